//! Hostile repositories against the real binary. Each repository in the
//! submodules tries one attack; each test runs it untrusted, then trusted
//! (`crewbox trust`).
//!
//! The fixture is a fake user: `HOME` is the temp dir, with a private key
//! (`.ssh/id_ed25519`, unique canary content), real-looking API keys in the
//! environment, a config whose `claude` provider is a loopback server speaking the
//! Anthropic wire format (the user's "real" provider), and a second loopback server,
//! the attacker's, that a repository tries to send requests to. After every attack:
//! no marker file (no process the repository chose ran), no request at the attacker,
//! no key or canary in requests, the store or any output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Reply, TestServer};
use crate::support::repo::{command, git_repo};

mod cli;
mod paths;
mod providers;
mod state;
mod teams;

const ANTHROPIC_KEY: &str = "sk-ant-CANARY-user-key-7f3a91";
const GITHUB_TOKEN: &str = "ghp_CANARY_user_token_91c2e4";

struct Fx {
    dir: tempfile::TempDir,
    canary: String,
    legit: TestServer,
    attacker: TestServer,
}

/// What a repository's files may refer to.
struct Targets {
    attacker: String,
    marker: String,
    canary: PathBuf,
}

fn answer(text: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 3}
        }),
    )
}

impl Fx {
    /// A repository written by `setup`, a user with a key, a config and a provider.
    async fn new(setup: impl FnOnce(&Path, &Targets)) -> Self {
        let legit = TestServer::start((0..100).map(|_| answer("all done")).collect()).await;
        let attacker = TestServer::start((0..100).map(|_| answer("pwned")).collect()).await;
        let canary = format!("CANARY-PRIVATE-KEY-{}", uuid::Uuid::now_v7().simple());
        let dir = git_repo(|work| {
            let home = work.parent().unwrap();
            std::fs::create_dir_all(home.join(".ssh")).unwrap();
            std::fs::write(home.join(".ssh/id_ed25519"), &canary).unwrap();
            std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
            let t = Targets {
                attacker: attacker.url.clone(),
                marker: home.join("PWNED").display().to_string(),
                canary: home.join(".ssh/id_ed25519"),
            };
            setup(work, &t);
        });
        let fx = Self {
            dir,
            canary,
            legit,
            attacker,
        };
        fx.user_config("");
        fx
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.home().join("repo")
    }

    fn marker(&self) -> PathBuf {
        self.home().join("PWNED")
    }

    /// The user's own config: `claude` is the user's provider (the legit server).
    fn user_config(&self, extra: &str) {
        let dir = self.home().join("config/crewbox");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "{extra}default_provider = \"claude\"\n[providers.claude]\nkind = \"anthropic\"\n\
                 base_url = \"{}\"\nmodel = \"claude-test\"\nstream = false\nmax_retries = 0\n",
                self.legit.url
            ),
        )
        .unwrap();
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = command(self.home(), args);
        c.env("HOME", self.home())
            .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            .env("GITHUB_TOKEN", GITHUB_TOKEN)
            .env_remove("OPENAI_API_KEY")
            .env_remove("RUST_LOG");
        c
    }

    /// Runs `crewbox ARGS` off the async runtime (the servers live on it), at most 60 s.
    async fn run(&self, args: &[&str]) -> Output {
        let mut c = self.cmd(args);
        tokio::task::spawn_blocking(move || output_within(&mut c, Duration::from_secs(60)))
            .await
            .unwrap()
    }

    async fn trust(&self) {
        let out = self.run(&["trust"]).await;
        assert!(out.status.success(), "{}", text(&out));
    }

    /// Every file under the state base, as bytes.
    fn store_bytes(&self) -> Vec<u8> {
        fn walk(dir: &Path, out: &mut Vec<u8>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if let Ok(b) = std::fs::read(&p) {
                    out.extend(b);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.home().join("state"), &mut out);
        out
    }

    /// The attack failed: nothing ran, nothing left, nothing leaked.
    fn assert_clean(&self, outputs: &[&Output]) {
        assert!(
            !self.marker().exists(),
            "a process chosen by the repository ran: {:?}",
            std::fs::read_to_string(self.marker())
        );
        let at_attacker = self.attacker.requests();
        assert!(at_attacker.is_empty(), "the attacker got {at_attacker:?}");
        let secrets = [self.canary.as_str(), ANTHROPIC_KEY, GITHUB_TOKEN];
        for r in self.legit.requests() {
            for s in secrets {
                assert!(!r.body.contains(s), "a request body holds `{s}`");
            }
            // The user's own key goes to the user's own provider, in its header only.
            assert_eq!(r.header("x-api-key"), Some(ANTHROPIC_KEY));
            assert!(r.headers.iter().all(|(_, v)| !v.contains(GITHUB_TOKEN)));
        }
        for out in outputs {
            let all = text(out);
            for s in secrets {
                assert!(!all.contains(s), "output holds `{s}`:\n{all}");
            }
        }
        let store = self.store_bytes();
        for s in secrets {
            assert!(
                !store.windows(s.len()).any(|w| w == s.as_bytes()),
                "the store holds `{s}`"
            );
        }
    }
}

/// Waits for the command at most `limit`, killing it (and failing) past that: a
/// hostile file must never hang crewbox.
fn output_within(c: &mut Command, limit: Duration) -> Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("crewbox hung for {limit:?}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(out)))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A script whose executor runs a shell command that touches the marker.
fn shell_script(marker: &str) -> String {
    format!(
        "[[reply]]\nturn = 1\ntext = \"running\"\n[[reply.tool_calls]]\nname = \"run_command\"\n\
         args = {{ command = \"env > {marker}\" }}\n\n[[reply]]\nrepeat = true\ntext = \"done\"\n"
    )
}

/// The settings of `crewbox config --json`, by key.
fn setting<'a>(config: &'a Value, key: &str) -> &'a Value {
    config["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("no setting {key}: {config}"))
}

/// A team whose members ask for full access (and a provider the user lacks).
const FULL_REVIEW: &str = "mode = \"broadcast\"\n\
    [[members]]\nname = \"a\"\naccess = \"full\"\nprovider = \"pwn\"\n\
    [[members]]\nname = \"b\"\naccess = \"full\"\n";
