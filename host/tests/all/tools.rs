//! The agent tools end to end: through the registry, on real temp dirs, with a real `sh`.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use crewbox::unstable::agent::permissions::{CapSet, DEFAULT_MAX_DEPTH, Permissions};
use crewbox::unstable::ids::AgentId;
use crewbox::unstable::sandbox::{AgentSandbox, AgentScope};
use crewbox::unstable::tool::{
    Capability, SpawnError, Spawner, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    registry: ToolRegistry,
    sandbox: Arc<AgentSandbox>,
}

impl Workspace {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let sandbox =
            crate::support::sandbox::sandbox(&dir.path().join("state")).agent(AgentScope {
                id: "tools".into(),
                workspace: Some(root.clone()),
                writable: true,
                network: false,
            });
        Self {
            _dir: dir,
            root,
            registry: ToolRegistry::builtin(),
            sandbox,
        }
    }

    /// A directory next to the workspace, outside it.
    fn outside(&self) -> PathBuf {
        let out = self.root.parent().unwrap().join("outside");
        std::fs::create_dir_all(&out).unwrap();
        out
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn ctx(&self) -> ToolContext {
        ToolContext {
            agent_id: AgentId::new(),
            root: self.root.clone(),
            spawner: None,
            sandbox: Some(self.sandbox.clone()),
        }
    }

    async fn call_as(
        &self,
        caps: CapSet,
        name: &str,
        args: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.registry.call(name, &self.ctx(), args, &caps).await
    }

    async fn call(&self, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
        self.call_as(CapSet::full(), name, args).await
    }

    async fn ok(&self, name: &str, args: Value) -> String {
        match self.call(name, args).await {
            Ok(out) => out.content,
            Err(e) => panic!("{name} failed: {e}"),
        }
    }

    async fn failed(&self, name: &str, args: Value) -> String {
        match self.call(name, args).await {
            Err(ToolError::Failed(message)) => message,
            other => panic!("{name}: expected Failed, got {other:?}"),
        }
    }

    async fn outside_err(&self, name: &str, args: Value) -> String {
        match self.call(name, args).await {
            Err(err @ ToolError::OutsideWorkspace { .. }) => err.to_string(),
            other => panic!("{name}: expected OutsideWorkspace, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn read_file_pages_by_line() {
    let ws = Workspace::new();
    ws.write("src/lib.rs", "a\nb\nc\nd\n");
    let out = ws
        .ok(
            "read_file",
            json!({"path": "src/lib.rs", "offset": 2, "limit": 2}),
        )
        .await;
    assert_eq!(
        out,
        "     2\tb\n     3\tc\n[showed lines 2-3; the file goes on: read again with offset=4]"
    );
    let missing = ws.failed("read_file", json!({"path": "nope.rs"})).await;
    assert!(missing == "`nope.rs` does not exist", "{missing}");
}

#[tokio::test]
async fn special_files_never_block() {
    let ws = Workspace::new();
    ws.write("a.txt", "needle\n");
    let status = std::process::Command::new("mkfifo")
        .arg(ws.root.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let err = ws.failed("read_file", json!({"path": "pipe"})).await;
    assert!(err.contains("not a regular file"), "{err}");
    let err = ws
        .failed("edit_file", json!({"path": "pipe", "old": "a", "new": "b"}))
        .await;
    assert!(err.contains("not a regular file"), "{err}");
    let err = ws
        .failed("write_file", json!({"path": "pipe", "content": "x"}))
        .await;
    assert!(err.contains("not a regular file"), "{err}");
    assert_eq!(
        ws.ok("grep", json!({"pattern": "needle"})).await,
        "a.txt:1: needle"
    );
    assert!(
        ws.ok("grep", json!({"pattern": "needle", "path": "pipe"}))
            .await
            .starts_with("no matches")
    );
}

#[tokio::test]
async fn list_dir_hides_git() {
    let ws = Workspace::new();
    ws.write(".git/HEAD", "ref");
    ws.write("src/main.rs", "");
    ws.write("README.md", "");
    assert_eq!(
        ws.ok("list_dir", json!({"path": "."})).await,
        "README.md\nsrc/"
    );
}

#[tokio::test]
async fn write_then_edit_then_read() {
    let ws = Workspace::new();
    let out = ws
        .ok(
            "write_file",
            json!({"path": "new/dir/a.txt", "content": "one\ntwo\n"}),
        )
        .await;
    assert_eq!(out, "created `new/dir/a.txt` (8 bytes)");
    ws.ok(
        "edit_file",
        json!({"path": "new/dir/a.txt", "old": "two", "new": "2"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.root.join("new/dir/a.txt")).unwrap(),
        "one\n2\n"
    );
}

#[tokio::test]
async fn edit_file_needs_exactly_one_match() {
    let ws = Workspace::new();
    ws.write("f.txt", "x = 1\nx = 1\ny = 2\n");
    let several = ws
        .failed(
            "edit_file",
            json!({"path": "f.txt", "old": "x = 1", "new": "x = 3"}),
        )
        .await;
    assert!(
        several.starts_with("`old` matches 2 times in `f.txt`; nothing changed"),
        "{several}"
    );
    let none = ws
        .failed(
            "edit_file",
            json!({"path": "f.txt", "old": "z = 9", "new": ""}),
        )
        .await;
    assert!(
        none.starts_with("`old` was not found in `f.txt`; nothing changed"),
        "{none}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("f.txt")).unwrap(),
        "x = 1\nx = 1\ny = 2\n"
    );
    let empty = ws
        .call("edit_file", json!({"path": "f.txt", "old": "", "new": "a"}))
        .await;
    assert!(
        matches!(empty, Err(ToolError::InvalidArgs { .. })),
        "{empty:?}"
    );
}

#[tokio::test]
async fn grep_glob_filter() {
    let ws = Workspace::new();
    ws.write("src/a.rs", "let needle = 1;\n");
    ws.write("src/b.py", "needle = 1\n");
    ws.write("docs/a.md", "needle\n");
    let out = ws
        .ok("grep", json!({"pattern": "needle", "glob": "*.rs"}))
        .await;
    assert_eq!(out, "src/a.rs:1: let needle = 1;");
    let out = ws
        .ok("grep", json!({"pattern": "needle", "path": "src"}))
        .await;
    assert_eq!(out, "src/a.rs:1: let needle = 1;\nsrc/b.py:1: needle = 1");
    let out = ws
        .ok(
            "grep",
            json!({"pattern": "needle", "glob": "{docs/*,*.py}"}),
        )
        .await;
    assert_eq!(out, "docs/a.md:1: needle\nsrc/b.py:1: needle = 1");
    let bad = ws.call("grep", json!({"pattern": "("})).await;
    assert!(
        matches!(&bad, Err(ToolError::InvalidArgs { message, .. }) if message.contains("not a valid regular expression")),
        "{bad:?}"
    );
}

#[tokio::test]
async fn grep_caps_matches() {
    let ws = Workspace::new();
    let many: String = (0..250).map(|i| format!("hit {i}\n")).collect();
    ws.write("many.txt", &many);
    let out = ws.ok("grep", json!({"pattern": "^hit"})).await;
    let hits = out.lines().filter(|l| l.starts_with("many.txt:")).count();
    assert_eq!(hits, 200);
    assert!(
        out.ends_with("[stopped after 200 matches; narrow the pattern, path or glob]"),
        "{out}"
    );
}

#[tokio::test]
async fn paths_cannot_leave_the_workspace() {
    let ws = Workspace::new();
    let outside = ws.outside();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    symlink(&outside, ws.root.join("out-dir")).unwrap();
    symlink(outside.join("secret.txt"), ws.root.join("secret-link")).unwrap();

    let err = ws
        .outside_err("read_file", json!({"path": "../outside/secret.txt"}))
        .await;
    assert!(
        err.contains("`..` climbs above the workspace root"),
        "{err}"
    );
    let absolute = outside.join("secret.txt").display().to_string();
    let err = ws.outside_err("read_file", json!({"path": absolute})).await;
    assert!(err.contains("absolute paths are not allowed"), "{err}");
    let err = ws
        .outside_err("read_file", json!({"path": "out-dir/secret.txt"}))
        .await;
    assert!(err.contains("`out-dir` is a symlink"), "{err}");
    let err = ws.outside_err("list_dir", json!({"path": "out-dir"})).await;
    assert!(err.contains("`out-dir` is a symlink"), "{err}");
    let err = ws
        .outside_err("read_file", json!({"path": "secret-link"}))
        .await;
    assert!(err.contains("`secret-link` is a symlink"), "{err}");
    ws.outside_err("grep", json!({"pattern": "secret", "path": "out-dir"}))
        .await;

    // Writing through a symlinked parent or a symlinked file must not touch the outside.
    let err = ws
        .outside_err(
            "write_file",
            json!({"path": "out-dir/sub/planted.txt", "content": "x"}),
        )
        .await;
    assert!(err.contains("`out-dir` is a symlink"), "{err}");
    assert!(!outside.join("sub").exists());
    ws.outside_err(
        "write_file",
        json!({"path": "secret-link", "content": "overwritten"}),
    )
    .await;
    ws.outside_err(
        "edit_file",
        json!({"path": "secret-link", "old": "top", "new": "no"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret"
    );

    // grep over the whole workspace does not follow the symlinks either.
    let out = ws.ok("grep", json!({"pattern": "top secret"})).await;
    assert!(out.starts_with("no matches"), "{out}");
}

/// Every answer of a tool call as text: the output, or the error.
fn answer(result: Result<ToolOutput, ToolError>) -> Result<String, String> {
    result.map(|o| o.content).map_err(|e| e.to_string())
}

/// Regression: the file tools run in crewbox's own process and wrote `.git` — a linked
/// worktree's `.git` file (four `write_file` calls made libgit2 treat any directory as
/// the work tree) and, with `--isolation none`, the main repository's `.git/config`
/// (`core.fsmonitor` ran on the user's next `git status`) and `.git/hooks`. No file
/// tool reads, lists, searches or writes `.git`, in any spelling, through any link.
#[tokio::test]
async fn git_is_off_limits_to_every_file_tool() {
    let ws = Workspace::new();
    let config = "[remote \"origin\"]\nurl = https://TOKEN@host/r\n";
    ws.write(".git/config", config);
    ws.write("sub/.git", "gitdir: ../.git\n");
    ws.write("sub/code.rs", "fn main() {}\n");
    symlink(".git/config", ws.root.join("cfg-link")).unwrap();
    symlink(".git", ws.root.join("git-dir-link")).unwrap();
    let calls = [
        ("read_file", json!({"path": ".git/config"})),
        ("read_file", json!({"path": ".GIT/config"})),
        ("read_file", json!({"path": "sub/../.git/config"})),
        ("read_file", json!({"path": "cfg-link"})),
        ("read_file", json!({"path": "git-dir-link/config"})),
        ("read_file", json!({"path": "sub/.git"})),
        ("list_dir", json!({"path": ".git"})),
        ("list_dir", json!({"path": "git-dir-link"})),
        ("grep", json!({"pattern": "TOKEN", "path": ".git"})),
        ("grep", json!({"pattern": "TOKEN", "path": "cfg-link"})),
        (
            "write_file",
            json!({"path": ".git", "content": "gitdir: /elsewhere\n"}),
        ),
        (
            "write_file",
            json!({"path": "sub/.git", "content": "gitdir: /elsewhere\n"}),
        ),
        (
            "write_file",
            json!({"path": ".git/config", "content": "[core]\nfsmonitor = evil\n"}),
        ),
        (
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
        ),
        (
            "write_file",
            json!({"path": ".git./config", "content": "x"}),
        ),
        ("write_file", json!({"path": ".Git/HEAD", "content": "x"})),
        (
            "write_file",
            json!({"path": "git-dir-link/config", "content": "x"}),
        ),
        ("write_file", json!({"path": "cfg-link", "content": "x"})),
        (
            "edit_file",
            json!({"path": ".git/config", "old": "TOKEN", "new": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "cfg-link", "old": "TOKEN", "new": "x"}),
        ),
    ];
    for (tool, args) in calls {
        match answer(ws.call(tool, args.clone()).await) {
            Err(e) => {
                assert!(
                    e.contains("is off limits to the file tools")
                        && e.contains("git's own directory"),
                    "{tool} {args}: {e}"
                );
                assert!(!e.contains("TOKEN"), "{e}");
            }
            Ok(out) => panic!("{tool} {args} was let through: {out}"),
        }
    }
    // Searching or listing the workspace never shows it either.
    let found = ws.ok("grep", json!({"pattern": "TOKEN|gitdir"})).await;
    assert!(found.starts_with("no matches"), "{found}");
    let listed = ws.ok("list_dir", json!({"path": "sub"})).await;
    assert_eq!(listed, "code.rs");
    // And nothing of it changed.
    assert_eq!(
        std::fs::read_to_string(ws.root.join(".git/config")).unwrap(),
        config
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("sub/.git")).unwrap(),
        "gitdir: ../.git\n"
    );
    let git: Vec<_> = std::fs::read_dir(ws.root.join(".git")).unwrap().collect();
    assert_eq!(git.len(), 1, "only config: {git:?}");
    assert!(!ws.root.join(".git.").exists() && !ws.root.join(".Git").exists());
}

/// Regression: an agent planted `.crewbox/` (a config, a team) on its branch with
/// `write_file`; a merge then changed what crewbox does in the repository. The file
/// tools read `.crewbox/` but never create or change anything in it.
#[tokio::test]
async fn crewbox_is_read_only_to_the_file_tools() {
    let ws = Workspace::new();
    ws.write(".crewbox/config.toml", "default_mode = \"single\"\n");
    symlink(".crewbox", ws.root.join("cb")).unwrap();
    assert!(
        ws.ok("read_file", json!({"path": ".crewbox/config.toml"}))
            .await
            .contains("default_mode")
    );
    assert_eq!(
        ws.ok("list_dir", json!({"path": "cb"})).await,
        "config.toml"
    );
    for (tool, args) in [
        (
            "write_file",
            json!({"path": ".crewbox/config.toml", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": ".crewbox/teams/evil.toml", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "cb/plugins/evil.wasm", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": ".CrewBox/config.toml", "content": "x"}),
        ),
        ("write_file", json!({"path": ".crewbox", "content": "x"})),
        (
            "edit_file",
            json!({"path": ".crewbox/config.toml", "old": "single", "new": "crew"}),
        ),
    ] {
        match answer(ws.call(tool, args.clone()).await) {
            Err(e) => assert!(
                e.contains("is off limits to the file tools") && e.contains("agents_write_crewbox"),
                "{tool} {args}: {e}"
            ),
            Ok(out) => panic!("{tool} {args} was let through: {out}"),
        }
    }
    assert_eq!(
        std::fs::read_to_string(ws.root.join(".crewbox/config.toml")).unwrap(),
        "default_mode = \"single\"\n"
    );
    let names: Vec<_> = std::fs::read_dir(ws.root.join(".crewbox"))
        .unwrap()
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(!ws.root.join(".CrewBox").exists());
}

/// Regression: with two agents sharing a checkout, one swapping `d` between a directory
/// and a symlink to `~/.ssh`, 11 of 2,400 `read_file d/id_ed25519` returned the real
/// key: the tools checked a path, then opened it again by name. Every call now resolves
/// from a descriptor of the workspace, so whatever the race, nothing outside is read,
/// listed, searched or written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_never_leaks_through_the_file_tools() {
    let ws = Workspace::new();
    let outside = ws.outside();
    std::fs::write(outside.join("id_ed25519"), "CANARY-PRIVATE-KEY\n").unwrap();
    std::fs::write(outside.join("outside-only"), "CANARY\n").unwrap();
    ws.write("d/id_ed25519", "inside\n");
    symlink(&outside, ws.root.join("swap")).unwrap();
    let calls = [
        ("read_file", json!({"path": "d/id_ed25519"})),
        ("list_dir", json!({"path": "d"})),
        ("grep", json!({"pattern": "CANARY|inside", "path": "d"})),
        (
            "write_file",
            json!({"path": "d/planted", "content": "PLANTED"}),
        ),
        (
            "edit_file",
            json!({"path": "d/id_ed25519", "old": "CANARY-PRIVATE-KEY", "new": "EDITED"}),
        ),
    ];
    let swapper = crate::support::swap::Swapper::start(ws.root.join("d"), ws.root.join("swap"));
    let started = Instant::now();
    let mut answers: Vec<Result<String, String>> = Vec::new();
    let (mut inside, mut refused) = (0, 0);
    // 2,400 reads at least, and until the race was really run in both states.
    while answers.len() < 2400 * calls.len() || inside == 0 || refused == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no race observed ({inside} inside, {refused} refused)"
        );
        for (tool, args) in &calls {
            let got = answer(ws.call(tool, args.clone()).await);
            if *tool == "read_file" {
                match &got {
                    Ok(text) if text.contains("inside") => inside += 1,
                    Err(e) if e.contains("is a symlink") => refused += 1,
                    _ => {}
                }
            }
            answers.push(got);
        }
    }
    let swaps = swapper.swaps.load(std::sync::atomic::Ordering::Relaxed);
    drop(swapper);
    let leaks: Vec<_> = answers
        .iter()
        .filter(|a| {
            let text = match a {
                Ok(t) | Err(t) => t,
            };
            text.contains("CANARY") || text.contains("outside-only")
        })
        .collect();
    assert!(
        leaks.is_empty(),
        "{} of {} calls escaped ({swaps} swaps), e.g. {:?}",
        leaks.len(),
        answers.len(),
        leaks[0]
    );
    assert!(!outside.join("planted").exists(), "a write landed outside");
    assert_eq!(
        std::fs::read_to_string(outside.join("id_ed25519")).unwrap(),
        "CANARY-PRIVATE-KEY\n",
        "an edit landed outside"
    );
}

#[tokio::test]
async fn malformed_args_come_back_as_invalid_args() {
    let ws = Workspace::new();
    let cases = [
        (
            "read_file",
            json!("src/lib.rs"),
            "arguments must be a JSON object, got a string",
        ),
        (
            "read_file",
            json!([1]),
            "arguments must be a JSON object, got an array",
        ),
        ("read_file", json!({}), "missing field `path`"),
        (
            "read_file",
            json!({"path": "a", "lines": 3}),
            "unknown field `lines`",
        ),
        (
            "read_file",
            json!({"path": "a", "offset": "3"}),
            "invalid type: string \"3\"",
        ),
        ("read_file", json!({"path": "a", "offset": 0}), "1-based"),
        (
            "write_file",
            json!({"path": "a"}),
            "missing field `content`",
        ),
        (
            "edit_file",
            json!({"path": "a", "old": "x", "replacement": "y"}),
            "unknown field `replacement`",
        ),
        (
            "run_command",
            json!({"command": "true", "timeout_s": 601}),
            "between 1 and 600",
        ),
        ("run_command", json!({"cmd": "true"}), "unknown field `cmd`"),
        ("spawn_agent", json!({"role": "x"}), "missing field `task`"),
        ("finish", json!({"summary": 3}), "invalid type: integer `3`"),
    ];
    for (tool, args, expected) in cases {
        match ws.call(tool, args.clone()).await {
            Err(ToolError::InvalidArgs { tool: t, message }) => {
                assert_eq!(t, tool);
                assert!(message.contains(expected), "{tool} {args}: {message}");
            }
            other => panic!("{tool} {args}: expected InvalidArgs, got {other:?}"),
        }
    }
    assert!(matches!(
        ws.call("rm_rf", json!({})).await,
        Err(ToolError::UnknownTool(name)) if name == "rm_rf"
    ));
}

#[tokio::test]
async fn read_only_grandchild_cannot_regain_write_or_exec() {
    let ws = Workspace::new();
    ws.write("f.txt", "data");
    let parent = Permissions::root(CapSet::read_only().with(Capability::Spawn));
    let child = parent.child(CapSet::full(), DEFAULT_MAX_DEPTH).unwrap();
    let grandchild = child.child(CapSet::full(), DEFAULT_MAX_DEPTH).unwrap();
    assert_eq!(grandchild.caps, CapSet::read_only());

    let offered: Vec<String> = ws
        .registry
        .specs_for(&grandchild.caps)
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(offered, ["read_file", "list_dir", "grep", "finish"]);
    for (tool, args) in [
        ("write_file", json!({"path": "f.txt", "content": "pwned"})),
        (
            "edit_file",
            json!({"path": "f.txt", "old": "data", "new": "pwned"}),
        ),
        ("run_command", json!({"command": "echo pwned > f.txt"})),
        ("spawn_agent", json!({"role": "r", "task": "t"})),
    ] {
        match ws.call_as(grandchild.caps, tool, args).await {
            Err(ToolError::Denied {
                tool: t,
                capability,
            }) => {
                assert_eq!(t, tool);
                assert!(!grandchild.caps.contains(capability));
            }
            other => panic!("{tool}: expected Denied, got {other:?}"),
        }
    }
    assert_eq!(
        std::fs::read_to_string(ws.root.join("f.txt")).unwrap(),
        "data"
    );
    let fin = ws
        .call_as(grandchild.caps, "finish", json!({"summary": "read it"}))
        .await
        .unwrap();
    assert_eq!(fin.finish.as_deref(), Some("read it"));
}

#[tokio::test]
async fn finish_without_summary() {
    let ws = Workspace::new();
    for args in [json!({}), Value::Null] {
        let out = ws.call("finish", args).await.unwrap();
        assert_eq!(out.finish.as_deref(), Some(""));
    }
}

/// A spawner standing in for the agent manager: records the request, answers text.
struct RecordingSpawner(Mutex<Vec<(String, String, String)>>);

#[async_trait]
impl Spawner for RecordingSpawner {
    async fn spawn_child(
        &self,
        parent: &AgentId,
        role: &str,
        task: &str,
    ) -> Result<String, SpawnError> {
        self.0
            .lock()
            .unwrap()
            .push((parent.to_string(), role.into(), task.into()));
        if role == "broken" {
            Err(SpawnError::Failed("provider down".into()))
        } else {
            Ok(format!("{role} did: {task}"))
        }
    }
}

#[tokio::test]
async fn spawn_agent_uses_the_spawner() {
    let ws = Workspace::new();
    let denied = ws
        .call("spawn_agent", json!({"role": "r", "task": "t"}))
        .await;
    assert!(
        matches!(
            &denied,
            Err(ToolError::Denied {
                capability: Capability::Spawn,
                ..
            })
        ),
        "no spawner means no spawning: {denied:?}"
    );

    let spawner = Arc::new(RecordingSpawner(Mutex::new(Vec::new())));
    let ctx = ToolContext {
        spawner: Some(spawner.clone()),
        ..ws.ctx()
    };
    let caps = CapSet::full();
    let out = ws
        .registry
        .call(
            "spawn_agent",
            &ctx,
            json!({"role": "tester", "task": "run tests"}),
            &caps,
        )
        .await
        .unwrap();
    assert_eq!(out.content, "tester did: run tests");
    let failed = ws
        .registry
        .call(
            "spawn_agent",
            &ctx,
            json!({"role": "broken", "task": "x"}),
            &caps,
        )
        .await;
    assert!(
        matches!(&failed, Err(ToolError::Failed(m)) if m.contains("provider down")),
        "{failed:?}"
    );
    let calls = spawner.0.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0],
        (
            ctx.agent_id.to_string(),
            "tester".into(),
            "run tests".into()
        )
    );
}

#[tokio::test]
async fn run_command_reports_exit_code_in_the_root() {
    let ws = Workspace::new();
    ws.write("marker.txt", "here");
    let out = ws
        .ok(
            "run_command",
            json!({"command": "cat marker.txt; echo; pwd; exit 7"}),
        )
        .await;
    assert_eq!(out, format!("[exit code 7]\nhere\n{}\n", ws.root.display()));
    let out = ws
        .ok("run_command", json!({"command": "echo oops >&2"}))
        .await;
    assert_eq!(out, "[exit code 0]\noops\n", "stderr is part of the output");
    let out = ws
        .ok(
            "run_command",
            json!({"command": "read line; echo \"got:$line\""}),
        )
        .await;
    assert_eq!(
        out, "[exit code 0]\ngot:\n",
        "stdin is empty, not the test's"
    );
}

use crate::support::procs;

#[tokio::test]
async fn run_command_timeout_kills_every_process_it_started() {
    let ws = Workspace::new();
    let mark = procs::marker("timeout");
    let started = Instant::now();
    let command = format!(
        "{}; echo started; wait",
        procs::background(&mark, "ready", 30)
    );
    let out = ws
        .ok("run_command", json!({"command": command, "timeout_s": 1}))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        out.starts_with(
            "[timed out after 1 s: the command and every process it started were killed]\nstarted"
        ),
        "{out}"
    );
    let gone = procs::gone(&mark);
    procs::kill(&mark);
    assert!(gone, "the backgrounded sleep survived the timeout");
}

#[tokio::test]
async fn cancelling_run_command_kills_every_process_it_started() {
    let ws = Workspace::new();
    let mark = procs::marker("cancel");
    let command = format!("{}; wait", procs::background(&mark, "ready", 30));
    let call = ws.call("run_command", json!({ "command": command }));
    // Dropping the call (as a cancelled agent does) must not leave the command running.
    let ready = ws.root.join("ready");
    let dropped = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::select! {
            _ = call => false,
            _ = async { while !ready.exists() { tokio::time::sleep(Duration::from_millis(10)).await } } => true,
        }
    })
    .await;
    assert_eq!(dropped, Ok(true), "the command never got going");
    let gone = procs::gone(&mark);
    procs::kill(&mark);
    assert!(gone, "the sleep survived the cancelled call");
}

#[tokio::test]
async fn run_command_background_jobs_do_not_outlive_it() {
    let ws = Workspace::new();
    let mark = procs::marker("bg");
    let command = format!("{}; echo done", procs::background(&mark, "ready", 30));
    let out = ws.ok("run_command", json!({ "command": command })).await;
    let gone = procs::gone(&mark);
    procs::kill(&mark);
    assert!(gone, "the background sleep survived the command");
    assert_eq!(out, "[exit code 0]\ndone\n");
    assert!(
        ws.root.join("ready").exists(),
        "the background job never started"
    );
}

#[tokio::test]
async fn run_command_caps_output_keeping_head_and_tail() {
    let ws = Workspace::new();
    let out = ws
        .ok("run_command", json!({"command": "echo BEGIN; head -c 300000 /dev/zero | tr '\\0' 'a'; echo; echo END"}))
        .await;
    assert!(out.len() < 64 * 1024 + 200, "{} bytes", out.len());
    assert!(
        out.starts_with("[exit code 0]\nBEGIN\naaa"),
        "{}",
        &out[..40]
    );
    assert!(out.ends_with("aaa\nEND\n"));
    assert!(
        out.contains("bytes omitted; 300011 bytes in all"),
        "{}",
        &out[32 * 1024..32 * 1024 + 200]
    );
}

const PROBE_FLAG: &str = "CREWBOX_TOOLS_ENV_PROBE";

/// Runs only inside the child test process started by `run_command_env_is_an_allowlist`,
/// whose environment carries fake secrets under ordinary and odd names.
#[tokio::test]
async fn env_probe() {
    if std::env::var_os(PROBE_FLAG).is_none() {
        return;
    }
    let ws = Workspace::new();
    let out = ws.ok("run_command", json!({"command": "env"})).await;
    assert!(out.contains("PATH="), "basic variables are passed: {out}");
    for leaked in [
        "FOO_API_KEY",
        "sk-test-123",
        "my_auth_token",
        "FOO_PLAIN",
        "visible",
    ] {
        assert!(
            !out.contains(leaked),
            "`{leaked}` reached the command: {out}"
        );
    }
    let out = ws
        .ok(
            "run_command",
            json!({"command": "echo ${FOO_API_KEY:-withheld}"}),
        )
        .await;
    assert_eq!(out, "[exit code 0]\nwithheld\n");
}

#[test]
fn run_command_env_is_an_allowlist() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tools::env_probe",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(PROBE_FLAG, "1")
        .env("FOO_API_KEY", "sk-test-123")
        .env("my_auth_token", "tok")
        .env("FOO_PLAIN", "visible")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "probe failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the probe did not run:\n{stdout}"
    );
}
