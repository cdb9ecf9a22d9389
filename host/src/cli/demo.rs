//! `crewbox demo`: the main job on a fresh machine. Creates a throwaway git repository
//! holding a small Python project with a failing test, lets the built-in scripted model
//! fix it through the real tools (list, run tests, read, edit, re-run), and prints the
//! report. Nothing outside the throwaway directory is touched.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crewbox::{Mode, ModeChoice, RunRequest};

use super::{Context, Exit, GlobalArgs, progress};

/// The demo project's files: (path, content).
const PROJECT: &[(&str, &str)] = &[
    ("calc.py", include_str!("../../assets/demo/project/calc.py")),
    (
        "test_calc.py",
        include_str!("../../assets/demo/project/test_calc.py"),
    ),
    (
        "README.md",
        include_str!("../../assets/demo/project/README.md"),
    ),
];

/// The task given to the demo crew.
pub const DEMO_PROMPT: &str =
    "The test suite of this project fails. Find the bug, fix it, and make sure the tests pass.";

/// Arguments of `crewbox demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Create the throwaway project here instead of a new temporary directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print the run report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs the demo.
pub async fn run(g: &GlobalArgs, args: DemoArgs) -> anyhow::Result<Exit> {
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => {
            std::env::temp_dir().join(format!("crewbox-demo-{}", uuid::Uuid::now_v7().simple()))
        }
    };
    let repo = base.join("project");
    tokio::task::spawn_blocking({
        let repo = repo.clone();
        move || create_project(&repo)
    })
    .await??;
    let repo = repo.canonicalize()?;
    let state_base = g.state_dir.clone().unwrap_or_else(|| base.join("state"));
    let ctx = Context::demo(repo.clone(), &state_base)?;
    if !args.json {
        errln!(
            "demo project: {}\nstate:        {}\n",
            repo.display(),
            ctx.state_dir().display()
        );
    }
    let shutdown = CancellationToken::new();
    let engine = super::context::engine(&ctx, shutdown.clone()).await?;
    let progress = (!args.json).then(|| progress::spawn(&engine, shutdown.child_token()));
    let req = RunRequest {
        prompt: DEMO_PROMPT.into(),
        mode: Some(ModeChoice::Mode(Mode::Crew)),
        validators: vec!["handoff-schema".into(), "no-secrets".into()],
        ..RunRequest::default()
    };
    let result = engine.run(req).await;
    if let Some(p) = progress {
        p.finish().await;
    }
    let report = result?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!();
        out!("{}", report.render_text());
        let branch = report
            .branch()
            .map_or("crewbox/<agent>", |b| b.branch.as_str());
        outln!(
            "\nThe fix is committed on a branch; the checkout itself is untouched. Inspect it:\n  cd {} && git log --stat {branch}",
            repo.display()
        );
    }
    Ok(Exit::of_report(&report))
}

/// Writes the project and commits it.
fn create_project(repo: &Path) -> anyhow::Result<()> {
    if repo.exists() {
        anyhow::bail!("{} already exists; pick another --dir", repo.display());
    }
    std::fs::create_dir_all(repo).with_context(|| format!("cannot create {}", repo.display()))?;
    for (path, content) in PROJECT {
        std::fs::write(repo.join(path), content).with_context(|| format!("cannot write {path}"))?;
    }
    let git = git2::Repository::init(repo).context("git init of the demo project")?;
    let mut index = git.index()?;
    index.add_all(["."], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = git.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now("crewbox demo", "crewbox@localhost")?;
    git.commit(
        Some("HEAD"),
        &sig,
        &sig,
        "A tiny calculator with a failing test",
        &tree,
        &[],
    )?;
    Ok(())
}
