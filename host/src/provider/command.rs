//! An external coding-agent CLI as a model: its stdout is the reply.
//!
//! The CLI is stateless between calls, so the prompt carries the conversation
//! ([`render_prompt`]): on a first turn it is the system prompt and the task as plain
//! text; later turns add a transcript with one `[role]` header per message.
//!
//! The child runs from argv (no shell unless argv names one) in the calling agent's
//! process sandbox (see `crate::sandbox`): its workspace as the agent may use it, its
//! private `$HOME` and `/tmp`, the network (it must reach its API), and an environment
//! of the base allowlist plus exactly the variables named in `pass_env`. A call that is
//! no running agent's (a validator's model call) runs in a throwaway sandbox that may
//! read the request's workspace, if any, and write only its private dirs. The child and everything it started are killed when the call times out
//! or is dropped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::sandbox::{AgentScope, EnvPolicy, Program, Sandbox};

use super::{
    Completion, CompletionRequest, Message, Provider, ProviderError, Role, StopReason, Usage,
};

/// Stdout kept as the reply; the rest is drained and dropped.
pub const MAX_OUTPUT: usize = 1 << 20;
/// Stderr kept (its tail) for error messages.
const STDERR_TAIL: usize = 2048;

/// How the prompt reaches the command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptVia {
    /// Written to the child's stdin, which is then closed.
    #[default]
    Stdin,
    /// Appended as the last argument.
    Arg,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct CommandOptions {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Where the prompt goes.
    pub prompt_via: PromptVia,
    /// Longest a call may run before the child is killed.
    pub timeout: Duration,
    /// What `model()` reports (defaults to the program name).
    pub model: Option<String>,
    /// Variables of crewbox's environment the child gets besides the base allowlist.
    pub pass_env: Vec<String>,
    /// Extra read-only paths the child sees (its installation).
    pub read: Vec<std::path::PathBuf>,
    /// Where the child runs.
    pub sandbox: Sandbox,
}

/// An external agent CLI behind the `Provider` trait.
#[derive(Debug)]
pub struct CommandProvider {
    name: String,
    options: CommandOptions,
    model: String,
    /// The program's own files outside the system directories (see [`program_files`]).
    files: Vec<(PathBuf, PathBuf)>,
}

/// How many `#!` interpreters are followed (the kernel's own limit is 4).
const MAX_INTERPRETERS: usize = 4;

/// The files the sandbox must show for `program` to start, as (path the kernel opens,
/// the file it is): the program as found on `path_var` (or as given, when absolute),
/// and for a script its `#!` interpreter (through `/usr/bin/env NAME` too), and theirs in
/// turn. Files in the system directories are visible anyway and left out. Only these
/// files are shown, read-only: nothing beside them (a script's libraries, an
/// interpreter's modules) becomes visible; list those in the provider's `read`.
pub fn program_files(program: &str, path_var: Option<&std::ffi::OsStr>) -> Vec<(PathBuf, PathBuf)> {
    let lookup = |name: &str| -> Option<PathBuf> {
        if name.contains('/') {
            let p = PathBuf::from(name);
            return p.is_absolute().then_some(p);
        }
        std::env::split_paths(path_var?)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    };
    // As named and as they resolve (`/bin` is often `/usr/bin`).
    let system: Vec<PathBuf> = crate::sandbox::view::SYSTEM_ROOTS
        .iter()
        .flat_map(|r| {
            [
                PathBuf::from(r),
                Path::new(r).canonicalize().unwrap_or_default(),
            ]
        })
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let in_system = |p: &Path| system.iter().any(|s| p.starts_with(s));
    let mut out = Vec::new();
    let mut show = |named: PathBuf, real: &Path| {
        if in_system(real) {
            return;
        }
        out.push((real.to_owned(), real.to_owned()));
        // A link outside the system directories is shown as the file it names (one in
        // them already leads to the file shown above).
        if !in_system(&named) && named != real {
            out.push((named, real.to_owned()));
        }
    };
    let mut next = lookup(program);
    for _ in 0..=MAX_INTERPRETERS {
        let Some(named) = next.take() else { break };
        let Ok(real) = named.canonicalize() else {
            break;
        };
        if !real.is_file() {
            break;
        }
        show(named, &real);
        next = match interpreter(&real) {
            // `/usr/bin/env NAME`: env itself, then NAME as found on PATH.
            Some((interp, Some(name)))
                if interp.file_name().is_some_and(|n| n == "env") && !name.starts_with('-') =>
            {
                if let Ok(r) = interp.canonicalize() {
                    show(interp, &r);
                }
                lookup(&name)
            }
            Some((interp, _)) => Some(interp),
            None => None,
        };
    }
    out.sort();
    out.dedup();
    out
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A script's `#!` line: its interpreter and first argument.
fn interpreter(file: &Path) -> Option<(PathBuf, Option<String>)> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n')?];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interp = PathBuf::from(words.next()?);
    interp
        .is_absolute()
        .then(|| (interp, words.next().map(str::to_owned)))
}

impl CommandProvider {
    /// A provider named `name`; an empty argv is a config error.
    pub fn new(name: impl Into<String>, options: CommandOptions) -> Result<Self, ProviderError> {
        let name = name.into();
        let Some(program) = options.argv.first() else {
            return Err(ProviderError::Config(format!(
                "provider `{name}`: `command` must name a program"
            )));
        };
        let model = options.model.clone().unwrap_or_else(|| program.clone());
        let files = program_files(program, std::env::var_os("PATH").as_deref());
        Ok(Self {
            name,
            options,
            model,
            files,
        })
    }
}

/// The prompt for a stateless CLI (see the module doc).
pub fn render_prompt(messages: &[Message]) -> String {
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    let rest: Vec<&Message> = messages.iter().filter(|m| m.role != Role::System).collect();
    let mut out = system.join("\n\n");
    let mut push = |s: &str| {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(s);
    };
    match rest.as_slice() {
        [only] if only.role == Role::User => push(&only.content),
        _ => {
            for m in rest {
                let header = match m.role {
                    Role::User => "[user]".to_owned(),
                    Role::Assistant => "[assistant]".to_owned(),
                    Role::Tool => {
                        format!("[tool result {}]", m.tool_call_id.as_deref().unwrap_or("?"))
                    }
                    Role::System => unreachable!("filtered above"),
                };
                let mut body = m.content.clone();
                for c in &m.tool_calls {
                    body.push_str(&format!("\n(called {} {})", c.name, c.args));
                }
                push(&format!("{header}\n{body}"));
            }
        }
    }
    out
}

/// Reads up to `cap` bytes and drains the rest so the child never blocks on a full pipe.
async fn read_capped(
    mut r: impl AsyncRead + Unpin,
    cap: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut truncated = false;
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok((kept, truncated));
        }
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        truncated |= n > room;
    }
}

/// Reads everything, keeping only the last `keep` bytes.
async fn read_tail(mut r: impl AsyncRead + Unpin, keep: usize) -> std::io::Result<Vec<u8>> {
    let mut tail = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(tail);
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > keep {
            tail.drain(..tail.len() - keep);
        }
    }
}

#[async_trait]
impl Provider for CommandProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn model(&self) -> &str {
        &self.model
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let program = &self.options.argv[0];
        let prompt = render_prompt(&request.messages);
        let sandbox = &self.options.sandbox;
        // The agent's own sandbox, or for a call that is no running agent's (a validator's)
        // a throwaway one that may read the request's workspace but write nothing there.
        let agent = sandbox.for_agent(&request.agent.id).unwrap_or_else(|| {
            sandbox.agent(AgentScope {
                id: format!("{}-call-{:08x}", request.agent.id, fastrand::u32(..)),
                workspace: request.workspace.clone(),
                writable: false,
                network: true,
            })
        });
        let mut argv = self.options.argv.clone();
        if self.options.prompt_via == PromptVia::Arg {
            argv.push(prompt.clone());
        }
        let mut spawn = agent
            .command(Program::Argv(argv))
            .with_network()
            .without_memory_cap()
            .read_also(&self.options.read)
            .program_files(&self.files)
            .env(EnvPolicy {
                pass: self.options.pass_env.clone(),
                allow_named_keys: true,
            });
        if self.options.prompt_via == PromptVia::Stdin {
            spawn = spawn.piped_stdin();
        }
        let mut child = spawn.spawn().await.map_err(|e| {
            ProviderError::Config(format!(
                "provider `{}`: cannot run `{program}`: {e}",
                self.name
            ))
        })?;
        let stdin = child.stdin.take();
        // Both are piped above; a missing one is reported, not a panic.
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(ProviderError::Config(format!(
                "provider `{}`: `{program}` started without its output pipes",
                self.name
            )));
        };
        let input = prompt.clone();
        let run = async {
            let feed = async move {
                if let Some(mut stdin) = stdin {
                    // A child that exits without reading its stdin is not an error.
                    let _ = stdin.write_all(input.as_bytes()).await;
                    let _ = stdin.shutdown().await;
                }
            };
            let ((), out, err, status) = tokio::join!(
                feed,
                read_capped(stdout, MAX_OUTPUT),
                read_tail(stderr, STDERR_TAIL),
                child.wait()
            );
            (out, err, status)
        };
        let timeout = self.options.timeout;
        let (out, err, status) = match tokio::time::timeout(timeout, run).await {
            Ok(r) => r,
            Err(_) => {
                child.kill_tree();
                let _ = child.wait().await;
                return Err(ProviderError::Timeout(format!(
                    "command `{program}` did not finish within {} s and was killed",
                    timeout.as_secs_f32()
                )));
            }
        };
        // Whatever the CLI left running goes with it.
        child.kill_tree();
        let io = |e: std::io::Error| ProviderError::Connection(format!("command `{program}`: {e}"));
        let status = status.map_err(io)?;
        let (stdout, truncated) = out.map_err(io)?;
        let stderr = String::from_utf8_lossy(&err.map_err(io)?).trim().to_owned();
        if let Some(failure) = child.setup_failure(&status, &stderr) {
            return Err(ProviderError::Config(format!(
                "provider `{}`: {}",
                self.name,
                sandbox.describe_failure(failure)
            )));
        }
        if !status.success() {
            use std::os::unix::process::ExitStatusExt;
            // The CLI may echo a key it was given: masked before it becomes an error.
            let stderr = crate::redact::clean_owned(stderr);
            return Err(ProviderError::CommandFailed(Box::new(
                super::CommandExit::new(program, status.code(), status.signal(), stderr),
            )));
        }
        if truncated {
            tracing::warn!(provider = %self.name, "command output exceeded {MAX_OUTPUT} bytes; truncated");
        }
        let text = String::from_utf8_lossy(&stdout).into_owned();
        let usage = Usage {
            input: Usage::estimate(&prompt),
            output: Usage::estimate(&text),
        };
        Ok(Completion {
            thoughts: Vec::new(),
            reasoning: String::new(),
            text,
            tool_calls: Vec::new(),
            usage,
            stop: StopReason::EndTurn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn program_files_follow_path_links_and_env_interpreters() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        let (bin, lib) = (d.join("bin"), d.join("lib"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        // tool -> ../lib/tool.real, run by `env myint`, myint found on PATH.
        exe(&lib.join("tool.real"), "#!/usr/bin/env myint\n");
        std::os::unix::fs::symlink("../lib/tool.real", bin.join("tool")).unwrap();
        exe(&bin.join("myint"), "#!/bin/sh\n");
        let path = std::env::join_paths([bin.clone(), "/usr/bin".into()]).unwrap();
        let files = program_files("tool", Some(&path));
        let mut want = vec![
            (bin.join("tool"), lib.join("tool.real")),
            (lib.join("tool.real"), lib.join("tool.real")),
            (bin.join("myint"), bin.join("myint")),
        ];
        want.sort();
        assert_eq!(files, want);
        // System programs need nothing; an unknown one gives nothing.
        assert_eq!(program_files("sh", Some(std::ffi::OsStr::new("/bin"))), []);
        assert_eq!(program_files("no-such-tool-here", Some(&path)), []);
        assert_eq!(program_files("relative/tool", Some(&path)), []);
    }
}
