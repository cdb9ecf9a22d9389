//! The process sandbox on this kernel, with real processes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewbox::sandbox::{
    AgentScope, Helper, Program, Sandbox, SandboxConfig, SandboxOptions, layout::HostPaths,
};

fn sandbox(state: &Path, config: SandboxConfig) -> Sandbox {
    Sandbox::new(SandboxOptions {
        config,
        helper: Helper::Path(PathBuf::from(env!("CARGO_BIN_EXE_crewbox"))),
        paths: HostPaths::from_env(state, None),
        key_vars: vec![],
        user_config: None,
    })
    .unwrap()
}

async fn run(agent: &Arc<crewbox::sandbox::AgentSandbox>, line: &str) -> (i32, String, String) {
    use tokio::io::AsyncReadExt;
    let mut child = agent
        .command(Program::Shell(line.into()))
        .spawn()
        .await
        .unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    let mut so = child.child.stdout.take().unwrap();
    let mut se = child.child.stderr.take().unwrap();
    let _ = tokio::join!(so.read_to_string(&mut out), se.read_to_string(&mut err));
    let status = child.child.wait().await.unwrap();
    (status.code().unwrap_or(-1), out, err)
}

#[tokio::test]
async fn smoke() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let sb = sandbox(&dir.path().join("state"), SandboxConfig::default());
    let agent = sb.agent(AgentScope {
        id: "a1".into(),
        workspace: Some(ws.clone()),
        writable: true,
        network: false,
    });
    let r = run(
        &agent,
        "echo hi; id; ls /; ls /proc; pwd; echo x > f; cat f; echo $HOME; ls -la ~ /tmp; env",
    )
    .await;
    println!("{r:#?}");
}
