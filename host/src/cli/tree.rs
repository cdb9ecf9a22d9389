//! `crewbox tree`: the agent tree of a run as text, Mermaid or JSON.

use std::io::Write as _;

use super::render::tree as render;
use super::{Context, Exit};

/// How `crewbox tree` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TreeFormat {
    /// Indented lines with box-drawing branches.
    #[default]
    Text,
    /// A Mermaid `flowchart TD`.
    Mermaid,
    /// Nested JSON.
    Json,
}

/// Arguments of `crewbox tree`.
#[derive(Debug, Clone, clap::Args)]
pub struct TreeArgs {
    /// A run id (or unique prefix); the latest run when absent.
    pub run: Option<String>,
    /// The same as the positional RUN (the older spelling).
    #[arg(
        long = "run",
        id = "run_flag",
        value_name = "RUN",
        conflicts_with = "run",
        hide = true
    )]
    pub run_flag: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TreeFormat::Text)]
    pub format: TreeFormat,
    /// The same as `--format json` (the flag every read command takes).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

impl TreeArgs {
    /// The format asked for, `--json` included.
    pub fn format(&self) -> TreeFormat {
        if self.json {
            TreeFormat::Json
        } else {
            self.format
        }
    }
}

/// Prints who spawned whom in a run, with group and swarm membership.
pub async fn run(ctx: Context, args: TreeArgs) -> anyhow::Result<Exit> {
    let format = args.format();
    let wanted = args.run.or(args.run_flag);
    let found = match ctx.tree(wanted.as_deref()).await {
        Ok(found) => found,
        Err(e) if e.is_usage() => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(e.into()),
    };
    let (run, tree) = (&found.run, &found.tree);
    let out = match format {
        TreeFormat::Text => {
            let mut text = format!("run {} ({})\n", run.id, run.mode.as_str());
            let workers = ctx.agent_workers(&run.id).await?;
            text.push_str(&with_workers(&render::text(tree), &workers));
            text
        }
        TreeFormat::Mermaid => render::mermaid(tree),
        TreeFormat::Json => {
            let mut json = tree.to_json(run.id.as_str());
            json.push('\n');
            json
        }
    };
    // One write: a large tree is printed without line-by-line locking.
    crate::text::stdout().write_all(out.as_bytes())?;
    Ok(Exit::Ok)
}

/// Each line of an agent that ran on a worker (scale-out) ends with `@ WORKER`.
pub(super) fn with_workers(text: &str, workers: &[crewbox::types::AgentWorker]) -> String {
    if workers.is_empty() {
        return text.to_owned();
    }
    let by_agent: std::collections::HashMap<&str, &str> = workers
        .iter()
        .map(|w| (w.agent_id.as_str(), w.worker.as_str()))
        .collect();
    let mut out = String::with_capacity(text.len() + workers.len() * 16);
    for line in text.lines() {
        out.push_str(line);
        if let Some(w) = line.rsplit(' ').next().and_then(|id| by_agent.get(id)) {
            out.push_str(" @ ");
            out.push_str(w);
        }
        out.push('\n');
    }
    out
}
