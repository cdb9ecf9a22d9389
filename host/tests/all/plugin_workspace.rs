//! The workspace view under attack from outside the sandbox: a process in the workspace
//! (one the agent left running is enough) swaps directories and files for symbolic links
//! while a validator reads, and the repository's own `.git` holds a token. Every read
//! goes through descriptors opened beneath the root, so none of it gets through.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crewbox::unstable::plugin::{
    AgentOutput, AgentStatus, CallEnv, Grants, Limits, ModelBudget, Plugin, PluginKind,
    PluginRuntime, PluginSource, RuntimeConfig, WorkspaceView,
};

use crate::support::limited;
use crate::support::swap::Swapper;

const WS_VALIDATOR: &[u8] = crate::guest_wasm!("ws-validator.wasm");

fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(crate::support::shared_cache_home().join("crewbox/plugins")),
        max_instances: 4,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

async fn ws_validator(rt: &PluginRuntime) -> Plugin {
    rt.load(
        "ws-validator",
        PluginSource::File("ws-validator.wasm".into()),
        Arc::from(WS_VALIDATOR),
        // It imports `model` too; no call here lends it one.
        Grants::defaults_for(PluginKind::Validator).model(ModelBudget {
            tokens: 1,
            time: Duration::from_secs(1),
        }),
        Some(Limits {
            deadline: Duration::from_secs(60),
            ..Limits::for_kind(PluginKind::Validator)
        }),
    )
    .await
    .unwrap()
}

/// Runs the `ws-validator` probes (`read:PATH`, `list:PATH`) and returns each detail.
async fn probe(plugin: &Plugin, root: &Path, probes: &[String]) -> Vec<String> {
    let env = CallEnv {
        workspace: Some(WorkspaceView {
            root: root.to_owned(),
            ..WorkspaceView::default()
        }),
        model: None,
    };
    let output = AgentOutput {
        agent_id: "a1".into(),
        role: "executor".into(),
        task: "t".into(),
        status: AgentStatus::Completed,
        reply: "done".into(),
    };
    let verdict = plugin
        .validate(env, &output, probes)
        .await
        .expect("no fault")
        .expect("judged");
    verdict.results.into_iter().map(|r| r.detail).collect()
}

fn repeat(probes: &[&str], times: usize) -> Vec<String> {
    (0..times)
        .flat_map(|_| probes.iter().map(|p| p.to_string()))
        .collect()
}

/// Regression: `read-file` and `list-dir` canonicalised and checked a path, then opened it
/// again by path; a directory swapped for a symlink in between let a validator read and
/// list what the link pointed at (~1 read in 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_never_leaks() {
    let base = tempfile::tempdir().unwrap();
    let (ws, outside) = (base.path().join("ws"), base.path().join("outside"));
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("d/file.txt"), "inside").unwrap();
    std::fs::write(outside.join("file.txt"), "TOP-SECRET").unwrap();
    std::fs::write(outside.join("outside-only.txt"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("swap")).unwrap();

    let rt = runtime();
    let plugin = ws_validator(&rt).await;
    let swapper = Swapper::start(ws.join("d"), ws.join("swap"));
    let probes = repeat(&["read:d/file.txt", "list:d"], 250);
    let mut details = Vec::new();
    let started = Instant::now();
    // At least a few calls, and until the race was really run in both states.
    while details.len() < 4 * probes.len()
        || !(details.iter().any(|d: &String| d == "inside")
            && details.iter().any(|d| d.starts_with("outside-workspace:")))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no race observed"
        );
        details.extend(probe(&plugin, &ws, &probes).await);
    }
    let swaps = swapper.swaps.load(Ordering::Relaxed);
    drop(swapper);
    let leaks: Vec<&String> = details
        .iter()
        .filter(|d| d.contains("TOP-SECRET") || d.contains("outside-only"))
        .collect();
    assert!(
        leaks.is_empty(),
        "{} of {} probes escaped ({swaps} swaps), e.g. {:?}",
        leaks.len(),
        details.len(),
        leaks[0]
    );
    for d in &details {
        assert!(
            d == "inside" || d == "file.txt:file" || d.starts_with("outside-workspace:"),
            "unexpected answer {d:?}"
        );
    }
}

/// Regression: a small file passed the size check, was swapped for a link to `/dev/zero`,
/// and the read then ran without end (OOM-killed at 2 GB). Run under an address-space cap
/// so a regression fails here instead of taking the machine.
#[test]
fn a_file_swapped_for_a_link_to_dev_zero_is_read_within_the_bound() {
    if !limited::in_child(
        "plugin_workspace::a_file_swapped_for_a_link_to_dev_zero_is_read_within_the_bound",
        6 << 30,
    ) {
        return;
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("small.txt"), "small").unwrap();
        std::os::unix::fs::symlink("/dev/zero", ws.join("zero")).unwrap();
        let rt = runtime();
        let plugin = ws_validator(&rt).await;
        let swapper = Swapper::start(ws.join("small.txt"), ws.join("zero"));
        let probes = repeat(&["read:small.txt"], 500);
        let started = Instant::now();
        let mut details = Vec::new();
        while details.len() < 4 * probes.len()
            || !(details.iter().any(|d: &String| d == "small")
                && details.iter().any(|d| d.starts_with("outside-workspace:")))
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no race observed"
            );
            details.extend(probe(&plugin, &ws, &probes).await);
        }
        drop(swapper);
        for d in &details {
            assert!(
                d == "small" || d == "outside-workspace:small.txt",
                "unexpected answer of {} bytes: {:?}",
                d.len(),
                d.chars().take(40).collect::<String>()
            );
        }
    });
}

/// The repository's `.git` (remote URLs with tokens, hooks) is not part of the view: not
/// by name at any depth, not through a committed symlink, not in listings.
#[tokio::test]
async fn git_metadata_is_hidden_from_the_view() {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("repo");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join("vendor/lib")).unwrap();
    std::fs::write(
        ws.join(".git/config"),
        "[remote \"origin\"]\n url = https://ghp_TOKEN@github.com/o/r\n",
    )
    .unwrap();
    // A submodule or worktree has a `.git` file.
    std::fs::write(
        ws.join("vendor/lib/.git"),
        "gitdir: ../../.git/modules/lib\n",
    )
    .unwrap();
    std::fs::write(ws.join("vendor/lib/code.rs"), "fn f() {}").unwrap();
    std::os::unix::fs::symlink(".git/config", ws.join("config-link")).unwrap();
    std::os::unix::fs::symlink(".git", ws.join("git-dir-link")).unwrap();
    let rt = runtime();
    let plugin = ws_validator(&rt).await;
    let probes: Vec<String> = [
        "read:.git/config",
        "read:./.git/config",
        "read:.GIT/config",
        "read:vendor/lib/.git",
        "read:config-link",
        "read:git-dir-link/config",
        "list:.git",
        "list:git-dir-link",
        "list:",
        "list:vendor/lib",
    ]
    .map(String::from)
    .to_vec();
    let details = probe(&plugin, &ws, &probes).await;
    assert_eq!(
        details,
        [
            "not-found:.git/config",
            "not-found:./.git/config",
            "not-found:.GIT/config",
            "not-found:vendor/lib/.git",
            "outside-workspace:config-link",
            "outside-workspace:git-dir-link/config",
            "not-found:.git",
            "outside-workspace:git-dir-link",
            "config-link:symlink,git-dir-link:symlink,vendor:dir",
            "code.rs:file",
        ]
    );
}
