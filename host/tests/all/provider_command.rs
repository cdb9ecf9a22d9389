//! The command provider with real child processes.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crewbox::unstable::provider::{
    AgentLabel, Breakers, BuildContext, CompletionRequest, Message, Provider, ProviderConfig,
    ProviderError, StopReason, build,
};
use crewbox::unstable::sandbox::{AgentSandbox, AgentScope, Sandbox};
use pretty_assertions::assert_eq;

/// The sandbox the command provider runs its child in (its state in a temp dir).
struct Cli {
    _state: tempfile::TempDir,
    sandbox: Sandbox,
}

fn cli() -> Cli {
    let state = tempfile::tempdir().unwrap();
    let sandbox = crate::support::sandbox::sandbox(state.path());
    Cli {
        _state: state,
        sandbox,
    }
}

impl Cli {
    /// Registers agent `a` (the one `request` speaks for) working in `workspace`.
    fn agent(&self, workspace: &Path) -> Arc<AgentSandbox> {
        self.sandbox.agent(AgentScope {
            id: "a".into(),
            workspace: Some(workspace.to_path_buf()),
            writable: true,
            network: false,
        })
    }

    fn provider(&self, toml_text: &str) -> Arc<dyn Provider> {
        provider_in(&self.sandbox, toml_text)
    }
}

fn provider_in(sandbox: &Sandbox, toml_text: &str) -> Arc<dyn Provider> {
    let cfg: ProviderConfig = toml::from_str(toml_text).expect("config");
    let breakers = Breakers::default();
    let env = |_: &str| None;
    let clients = crewbox::unstable::provider::http::HttpClients::default();
    let ctx = BuildContext {
        breakers: &breakers,
        clients: &clients,
        base_dir: Path::new("."),
        env: &env,
        default_script: "",
        sandbox,
    };
    build("cli", &cfg, &ctx)
        .map_err(|e| e.to_string())
        .expect("build")
}

fn request(workspace: Option<&Path>, messages: Vec<Message>) -> CompletionRequest {
    CompletionRequest {
        progress: None,
        agent: AgentLabel {
            id: "a".into(),
            name: "executor".into(),
            role: "executor".into(),
        },
        turn: 1,
        messages,
        tools: Vec::new().into(),
        max_tokens: None,
        workspace: workspace.map(Path::to_path_buf),
    }
}

fn first_turn() -> Vec<Message> {
    vec![Message::system("Be terse."), Message::user("Say hi")]
}

#[tokio::test]
async fn prompt_on_stdin_reply_on_stdout() {
    let c = cli();
    let p = c.provider("kind = \"command\"\ncommand = [\"cat\"]\n");
    let c = p.complete(&request(None, first_turn())).await.unwrap();
    assert_eq!(c.text, "Be terse.\n\nSay hi");
    assert_eq!(c.stop, StopReason::EndTurn);
    assert!(c.usage.input > 0 && c.usage.output > 0);
    assert_eq!(p.model(), "cat");
}

#[tokio::test]
async fn prompt_as_last_argument_and_runs_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("marker.txt"), "inside").unwrap();
    let c = cli();
    let _agent = c.agent(dir.path());
    let p = c.provider(
        "kind = \"command\"\ncommand = [\"sh\", \"-c\", \"cat marker.txt; printf ' %s' \\\"$0\\\"\"]\nprompt_via = \"arg\"\nmodel = \"fake-agent\"\n",
    );
    let reply = p
        .complete(&request(Some(dir.path()), first_turn()))
        .await
        .unwrap();
    assert_eq!(reply.text, "inside Be terse.\n\nSay hi");
    assert_eq!(p.model(), "fake-agent");
}

#[tokio::test]
async fn later_turns_send_a_transcript() {
    let c = cli();
    let p = c.provider("kind = \"command\"\ncommand = [\"cat\"]\n");
    let mut messages = first_turn();
    messages.push(Message::assistant("hi", vec![]));
    messages.push(Message::user("Again"));
    let c = p.complete(&request(None, messages)).await.unwrap();
    assert_eq!(
        c.text,
        "Be terse.\n\n[user]\nSay hi\n\n[assistant]\nhi\n\n[user]\nAgain"
    );
}

#[tokio::test]
async fn non_zero_exit_reports_the_stderr_tail() {
    let c = cli();
    let p = c.provider(
        "kind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo 'model quota exceeded' >&2; exit 3\"]\n",
    );
    let err = p.complete(&request(None, first_turn())).await.unwrap_err();
    let msg = err.to_string();
    // Named as the command's failure, not a model server's, and not retried: a CLI
    // that failed for its own reasons fails the same way again.
    assert!(matches!(err, ProviderError::CommandFailed(_)), "{msg}");
    assert!(!err.is_retryable(), "{msg}");
    assert_eq!(msg, "command `sh` exited with 3: model quota exceeded");
}

#[tokio::test]
async fn a_command_that_says_it_was_rate_limited_or_was_killed_is_retried() {
    let c = cli();
    for (script, exit) in [
        ("echo 'Error: 429 Too Many Requests' >&2; exit 1", "1"),
        ("kill -9 $$", "signal 9"),
    ] {
        let p = c.provider(&format!(
            "kind = \"command\"\ncommand = [\"sh\", \"-c\", \"{script}\"]\n"
        ));
        let err = p.complete(&request(None, first_turn())).await.unwrap_err();
        assert!(matches!(err, ProviderError::CommandFailed(_)), "{err}");
        assert!(err.is_retryable(), "{err}");
        assert!(
            err.to_string().contains(&format!("exited with {exit}")),
            "{err}"
        );
    }
}

#[tokio::test]
async fn timeout_kills_the_child() {
    let dir = tempfile::tempdir().unwrap();
    // If the child, or a grandchild it started, survived the timeout, `late` would
    // appear after 2 s.
    let c = cli();
    let _agent = c.agent(dir.path());
    let p = c.provider(
        "kind = \"command\"\ncommand = [\"sh\", \"-c\", \"(sleep 2; touch late) & wait\"]\ntimeout_s = 0.3\n",
    );
    let t0 = Instant::now();
    let err = p
        .complete(&request(Some(dir.path()), first_turn()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProviderError::Timeout(m) if m.contains("killed")),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !dir.path().join("late").exists(),
        "the child outlived its timeout"
    );
}

#[tokio::test]
async fn output_is_capped() {
    let c = cli();
    let p = c.provider(
        "kind = \"command\"\ncommand = [\"sh\", \"-c\", \"head -c 3000000 /dev/zero | tr '\\\\0' x\"]\n",
    );
    let c = p.complete(&request(None, first_turn())).await.unwrap();
    assert_eq!(c.text.len(), 1 << 20);
}

#[tokio::test]
async fn missing_program_is_a_config_error() {
    let c = cli();
    let p = c.provider("kind = \"command\"\ncommand = [\"crewbox-no-such-agent-cli\"]\n");
    let err = p.complete(&request(None, first_turn())).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Config(m) if m.contains("crewbox-no-such-agent-cli")),
        "{err}"
    );
}

/// A program outside the system directories (here under a temp dir, which the sandbox
/// hides), run through an interpreter of its own outside them too: both are shown, the
/// file beside them is not.
#[tokio::test]
async fn a_program_outside_the_system_directories_is_reachable_and_nothing_beside_it() {
    let c = cli();
    let ws = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let (bin, interp) = (tools.path().join("bin"), tools.path().join("interp"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&interp).unwrap();
    // The interpreter: a copy of the system shell outside the system directories.
    let shell = interp.join("mysh");
    std::fs::copy(Path::new("/bin/sh").canonicalize().unwrap(), &shell).unwrap();
    let secret = tools.path().join("secret.txt");
    std::fs::write(&secret, "NOT-FOR-THE-SANDBOX").unwrap();
    let tool = bin.join("tool");
    std::fs::write(
        &tool,
        format!(
            "#!{}\ncat > /dev/null\necho REPLY-FROM-TOOL\ncat {} 2>&1 || echo secret-unreadable\nls {} 2>&1 | wc -l\n",
            shell.display(),
            secret.display(),
            bin.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    for f in [&tool, &shell] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let _agent = c.agent(ws.path());
    let p = c.provider(&format!(
        "kind = \"command\"\ncommand = [\"{}\"]\n",
        tool.display()
    ));
    let out = p
        .complete(&request(Some(ws.path()), first_turn()))
        .await
        .unwrap_or_else(|e| panic!("the program did not start: {e}"));
    assert!(out.text.contains("REPLY-FROM-TOOL"), "{}", out.text);
    if !crate::support::sandbox::disabled() {
        assert!(!out.text.contains("NOT-FOR-THE-SANDBOX"), "{}", out.text);
        assert!(out.text.contains("secret-unreadable"), "{}", out.text);
        // Only the program itself in its directory.
        assert!(out.text.trim_end().ends_with('1'), "{}", out.text);
    }
}
