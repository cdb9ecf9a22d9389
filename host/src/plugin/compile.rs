//! Compiling a component within limits. Cranelift has no fuel: one 7.6 MB function of
//! nested blocks took 10 s and 2.1 GB to compile, and as a repository's dispatcher it
//! would cost that on every run (Cranelift's time grows with the square of the blocks in
//! one function: 100,000 blocks in a 300 KB function take a minute). So before anything
//! is compiled the component is scanned (its size, each function's size and number of
//! blocks, the code in total), and an untrusted
//! component is compiled in a child process — this binary again — under a memory limit
//! and a deadline, after which it is killed. A refusal is cached like a compiled
//! component, so the next run refuses at once — except a deadline the compiler missed
//! for want of CPU (a busy machine, not the component): that one is reported and
//! compiled again next time ([`Failure::Starved`]).
//!
//! Components embedded in crewbox (the built-ins) are trusted and compiled in-process.
//! A runtime without a compiler program (library use) compiles untrusted components on
//! a thread with the same deadline, which bounds the wait but not the memory.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;
use wasmtime::Engine;

/// The argument that turns the crewbox binary into the plugin compiler (see
/// [`compiler_main`]); never shown in `--help`.
pub const COMPILER_ARG: &str = crate::child::Role::PluginCompiler.arg();

/// Most bytes of compiled code accepted from the compiler child.
const MAX_COMPILED_BYTES: u64 = 1 << 30;

/// Limits on compiling one component.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CompileLimits {
    /// The largest component accepted, in bytes.
    pub max_component_bytes: u64,
    /// The largest single function body, in bytes of code.
    pub max_function_bytes: u64,
    /// The most blocks, loops and ifs in one function.
    pub max_function_blocks: u32,
    /// All function bodies together, in bytes of code.
    pub max_code_bytes: u64,
    /// Wall time for one compilation.
    pub deadline: Duration,
    /// Memory the compiler child may use (its `RLIMIT_DATA`).
    pub max_memory_bytes: u64,
}

impl Default for CompileLimits {
    /// Room for a componentize-py component (18 MB, 6.5 MB of code, its largest
    /// function 427 KB, at most 3,112 blocks in a function, about a minute to compile
    /// in a debug build and 450 MB). 10,000 blocks compile in under a second.
    fn default() -> Self {
        Self {
            max_component_bytes: 32 << 20,
            max_function_bytes: 1 << 20,
            max_function_blocks: 10_000,
            max_code_bytes: 16 << 20,
            deadline: Duration::from_secs(180),
            max_memory_bytes: 2 << 30,
        }
    }
}

impl CompileLimits {
    /// A short stable key of these limits, part of a cached refusal's name: a refusal
    /// under other limits says nothing about these.
    pub(crate) fn key(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = format!("{self:?}");
        crate::text::hex(&Sha256::digest(text.as_bytes())[..4])
    }
}

/// How untrusted components are compiled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Compiler {
    /// On a thread of this process, with the deadline but no memory limit.
    #[default]
    InProcess,
    /// In a child process running this program with [`COMPILER_ARG`] (the crewbox
    /// binary), under the memory limit, killed at the deadline.
    Child(PathBuf),
}

impl Compiler {
    /// This program as the compiler: the crewbox binary uses it for every untrusted
    /// component. `/proc/self/exe` is the running binary even if the file was replaced
    /// by an upgrade meanwhile, so the child always compiles for this engine.
    pub fn this_program() -> std::io::Result<Self> {
        crate::child::own_exe().map(Self::Child)
    }

    /// This program as the compiler when its `main` calls
    /// [`compiler_main`] (the crewbox binary), else in-process: a program embedding the
    /// library would otherwise be re-run with arguments it does not understand.
    pub fn for_this_process() -> std::io::Result<Self> {
        if crate::child::Role::PluginCompiler.entry_installed() {
            Self::this_program()
        } else {
            Ok(Self::InProcess)
        }
    }
}

/// Why a component was refused before or while compiling. Deterministic for the same
/// bytes and limits, so it is cached (a deadline only when the compiler had the CPU to
/// meet it: see `Failure::Starved`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize, thiserror::Error)]
#[serde(tag = "refusal", rename_all = "kebab-case")]
pub enum CompileRefusal {
    /// The file does not start with the WebAssembly header. Its bytes are never quoted:
    /// a path that names some other file must not reveal what is in it.
    #[error("it is not a WebAssembly file (it does not start with the \\0asm header)")]
    NotWasm,
    /// The component file is too large.
    #[error("the component is {size} bytes, over the {limit}-byte cap")]
    ComponentTooLarge {
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// One function body is too large.
    #[error("its function {index} has {size} bytes of code, over the {limit}-byte cap")]
    FunctionTooLarge {
        /// The function's position among all function bodies of the component.
        index: u32,
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// One function has too many blocks (compile time grows with their square).
    #[error("its function {index} has {blocks} blocks, over the cap of {limit}")]
    FunctionTooComplex {
        /// The function's position among all function bodies of the component.
        index: u32,
        /// Its blocks, loops and ifs (counted up to the first over the cap).
        blocks: u32,
        /// The cap.
        limit: u32,
    },
    /// All function bodies together are too large.
    #[error("it has {size} bytes of code, over the {limit}-byte cap")]
    CodeTooLarge {
        /// Their size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// Compiling it ran past the deadline.
    #[error("compiling it took longer than {secs} s")]
    Deadline {
        /// The deadline in seconds.
        secs: u64,
    },
    /// Compiling it needed more memory than allowed.
    #[error("compiling it needed more than {limit} bytes of memory")]
    Memory {
        /// The limit.
        limit: u64,
    },
    /// The bytes are not a component wasmtime accepts.
    #[error("{reason}")]
    Invalid {
        /// What the compiler said.
        reason: String,
    },
}

/// Checks what can be checked without compiling: the sizes.
pub(crate) fn scan(bytes: &[u8], limits: &CompileLimits) -> Result<(), CompileRefusal> {
    let size = bytes.len() as u64;
    if size > limits.max_component_bytes {
        return Err(CompileRefusal::ComponentTooLarge {
            size,
            limit: limits.max_component_bytes,
        });
    }
    if !bytes.starts_with(b"\0asm") {
        return Err(CompileRefusal::NotWasm);
    }
    let mut total = 0u64;
    let mut index = 0u32;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        // A malformed component is reported by the compiler, with its own words.
        let Ok(payload) = payload else { return Ok(()) };
        if let wasmparser::Payload::CodeSectionEntry(body) = payload {
            let len = body.range().len() as u64;
            if len > limits.max_function_bytes {
                return Err(CompileRefusal::FunctionTooLarge {
                    index,
                    size: len,
                    limit: limits.max_function_bytes,
                });
            }
            let blocks = count_blocks(&body, limits.max_function_blocks);
            if blocks > limits.max_function_blocks {
                return Err(CompileRefusal::FunctionTooComplex {
                    index,
                    blocks,
                    limit: limits.max_function_blocks,
                });
            }
            total += len;
            if total > limits.max_code_bytes {
                return Err(CompileRefusal::CodeTooLarge {
                    size: total,
                    limit: limits.max_code_bytes,
                });
            }
            index += 1;
        }
    }
    Ok(())
}

/// The blocks, loops, ifs and `try`s of a function body, counted up to `cap + 1`. A body
/// that does not parse counts 0: the compiler reports it.
fn count_blocks(body: &wasmparser::FunctionBody<'_>, cap: u32) -> u32 {
    use wasmparser::Operator as Op;
    let Ok(mut ops) = body.get_operators_reader() else {
        return 0;
    };
    let mut blocks = 0u32;
    while !ops.eof() && blocks <= cap {
        match ops.read() {
            Ok(Op::Block { .. } | Op::Loop { .. } | Op::If { .. } | Op::TryTable { .. }) => {
                blocks += 1
            }
            Ok(_) => {}
            Err(_) => return 0,
        }
    }
    blocks
}

/// How long a compile runs before the user is told what is being compiled.
const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// Says what is being compiled once a compile has taken [`NOTICE_AFTER`]: a line on
/// stderr when it is a terminal, a log line otherwise, so a first run after a rebuild
/// never waits in silence. Dropping it (the compile ended) cancels the notice.
pub(crate) struct SlowNotice {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowNotice {
    /// Starts the timer for compiling plugin `name` of `size` bytes.
    pub(crate) fn start(name: &str, size: usize) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let name = name.to_owned();
        let thread = std::thread::Builder::new()
            .name("crewbox-plugin-notice".into())
            .spawn(move || {
                if stopped.recv_timeout(NOTICE_AFTER) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
                let mb = size as f64 / (1 << 20) as f64;
                let text = format!(
                    "compiling plugin `{name}` ({mb:.1} MB) for this machine; \
                     later runs load it from the cache"
                );
                if crate::text::stderr_is_terminal() {
                    crate::text::errln!("crewbox: {text}");
                } else {
                    tracing::warn!(plugin = %name, bytes = size, "{text}");
                }
            })
            .ok();
        Self {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for SlowNotice {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Why compiling did not produce code: the component's fault (cached), or ours.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The component was refused.
    Refused(CompileRefusal),
    /// The compiler could not be run (not the component's fault; not cached).
    Broken(String),
    /// The deadline passed while the compiler had less than [`STARVED_SHARE`] of it on
    /// a CPU: the machine was busy, so the refusal says nothing about the component and
    /// is not remembered.
    Starved(String),
}

/// The share of the deadline a compiler must have spent on a CPU for a missed deadline
/// to count as the component's (and be cached). A compile that is starved by other load
/// gets a fraction of a core; one that is really too slow gets nearly all of one.
pub(crate) const STARVED_SHARE: f64 = 0.25;

/// The CPU time process `pid` has used so far (user + system), from `/proc`.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count fields after its `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line (utime, stime) are the 12th and 13th after `)`.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let per_second = rustix::param::clock_ticks_per_second();
    (per_second > 0).then(|| Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// A missed deadline: the component's fault when the compiler used at least
/// [`STARVED_SHARE`] of it on a CPU (or its use is unknown), else the machine's.
fn missed_deadline(limits: &CompileLimits, cpu: Option<Duration>) -> Failure {
    let refusal = CompileRefusal::Deadline {
        secs: limits.deadline.as_secs(),
    };
    match cpu {
        Some(cpu) if cpu.as_secs_f64() < limits.deadline.as_secs_f64() * STARVED_SHARE => {
            Failure::Starved(format!(
                "{refusal} while the compiler had only {:.1} s of CPU: the machine is busy, \
                 so this is not remembered and the next load compiles it again",
                cpu.as_secs_f64()
            ))
        }
        _ => Failure::Refused(refusal),
    }
}

/// Compiles on a thread and waits at most `limits.deadline`. A compilation past the
/// deadline is abandoned (it finishes in the background; its result is dropped).
pub(crate) fn on_thread(
    engine: &Engine,
    bytes: &[u8],
    limits: &CompileLimits,
) -> Result<wasmtime::component::Component, Failure> {
    let (tx, rx) = mpsc::channel();
    let (engine, bytes) = (engine.clone(), bytes.to_vec());
    std::thread::Builder::new()
        .name("crewbox-plugin-compile".into())
        .spawn(move || {
            let _ = tx.send(wasmtime::component::Component::new(&engine, &bytes));
        })
        .map_err(|e| Failure::Broken(format!("cannot start a compile thread: {e}")))?;
    match rx.recv_timeout(limits.deadline) {
        Ok(Ok(component)) => Ok(component),
        Ok(Err(e)) => Err(Failure::Refused(CompileRefusal::Invalid {
            reason: format!("{e:#}"),
        })),
        Err(_) => Err(Failure::Refused(CompileRefusal::Deadline {
            secs: limits.deadline.as_secs(),
        })),
    }
}

/// Compiles in a child process (`program` with [`COMPILER_ARG`]) under `limits`, and
/// returns the serialized component it produced. `memory_reservation` is the engine
/// setting the child must share with this process for the code to load here.
pub(crate) fn in_child(
    program: &Path,
    bytes: &[u8],
    limits: &CompileLimits,
    memory_reservation: u64,
) -> Result<Vec<u8>, Failure> {
    use std::process::Stdio;

    let (memory, cpu) = (limits.max_memory_bytes, limits.deadline.as_secs() * 4 + 1);
    let limits_in_child = crate::child::Limits {
        data_bytes: Some(memory),
        cpu_secs: Some(cpu),
        no_core: true,
    };
    // Nothing of this process's environment (keys) reaches the compiler.
    let mut command = crate::child::command(
        program,
        crate::child::Role::PluginCompiler,
        [memory_reservation.to_string()],
        limits_in_child,
    );
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| Failure::Broken(format!("cannot start {}: {e}", program.display())))?;
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Failure::Broken(
            "the compiler's pipes were not set up".into(),
        ));
    };
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let errors = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = (&mut stderr).take(16 << 10).read_to_end(&mut text);
        String::from_utf8_lossy(&text).trim().to_owned()
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let read = (&mut stdout)
            .take(MAX_COMPILED_BYTES + 1)
            .read_to_end(&mut out);
        let _ = tx.send(read.map(|_| out));
    });
    // The reader finishes when the child closes its stdout: when it exits.
    let output = rx.recv_timeout(limits.deadline);
    // Read before the kill: what the compiler got of a CPU decides whose fault it is.
    let cpu = output.is_err().then(|| cpu_time(child.id())).flatten();
    if output.is_err() {
        let _ = child.kill();
    }
    let status = child
        .wait()
        .map_err(|e| Failure::Broken(format!("waiting for the plugin compiler: {e}")))?;
    let _ = writer.join();
    let message = errors.join().unwrap_or_default();
    let Ok(output) = output else {
        return Err(missed_deadline(limits, cpu));
    };
    let output =
        output.map_err(|e| Failure::Broken(format!("reading the plugin compiler: {e}")))?;
    if status.success() && output.len() as u64 <= MAX_COMPILED_BYTES {
        return Ok(output);
    }
    use std::os::unix::process::ExitStatusExt;
    Err(match (status.code(), status.signal()) {
        (Some(EXIT_INVALID), _) => Failure::Refused(CompileRefusal::Invalid { reason: message }),
        (Some(EXIT_OUT_OF_MEMORY), _) | (_, Some(libc::SIGABRT | libc::SIGSEGV | libc::SIGBUS)) => {
            Failure::Refused(CompileRefusal::Memory { limit: memory })
        }
        // SIGKILL not sent by us (that case returned above): the kernel's OOM killer.
        (_, Some(libc::SIGKILL)) => Failure::Refused(CompileRefusal::Memory { limit: memory }),
        (_, Some(libc::SIGXCPU)) => Failure::Refused(CompileRefusal::Deadline {
            secs: limits.deadline.as_secs(),
        }),
        _ => Failure::Broken(format!(
            "the plugin compiler ended with {status}: {message}"
        )),
    })
}

/// The compiler child's exit code for bytes wasmtime refuses.
const EXIT_INVALID: i32 = 3;
/// The compiler child's exit code when an allocation failed.
const EXIT_OUT_OF_MEMORY: i32 = 4;

/// The compiler child: when this process was started with [`COMPILER_ARG`], reads a
/// component on stdin, compiles it for an engine configured like the runtime's, writes
/// the serialized code to stdout and returns the exit code; otherwise returns `None`.
/// The crewbox binary calls this first thing in `main`.
pub fn compiler_main() -> Option<std::process::ExitCode> {
    let mut args = crate::child::Role::PluginCompiler.enter()?;
    let code = |n: i32| Some(std::process::ExitCode::from(n as u8));
    let Some(reservation) = args
        .next()
        .and_then(|a| a.to_str().and_then(|s| s.parse::<u64>().ok()))
    else {
        crate::text::errln!("usage: crewbox {COMPILER_ARG} MEMORY_RESERVATION < component");
        return code(2);
    };
    // The parent checked the size; this reads what it sends.
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        crate::text::errln!("cannot read the component: {e}");
        return code(1);
    }
    let engine = match Engine::new(&super::runtime::wasm_config(reservation, None)) {
        Ok(e) => e,
        Err(e) => {
            crate::text::errln!("cannot set up the compiler: {e:#}");
            return code(1);
        }
    };
    let compiled = match engine.precompile_component(&bytes) {
        Ok(c) => c,
        Err(e) => {
            let text = format!("{e:#}");
            let oom = e.is::<wasmtime::OutOfMemory>() || text.contains("out of memory");
            crate::text::errln!("{text}");
            return code(if oom {
                EXIT_OUT_OF_MEMORY
            } else {
                EXIT_INVALID
            });
        }
    };
    // The compiled bytes are the child's answer to its parent, not text.
    #[allow(clippy::disallowed_methods)]
    let written = std::io::stdout().lock().write_all(&compiled);
    if let Err(e) = written {
        crate::text::errln!("cannot write the compiled component: {e}");
        return code(1);
    }
    code(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(bodies: &[usize]) -> Vec<u8> {
        let funcs: String = bodies
            .iter()
            .map(|n| format!("(func {})", "(nop)".repeat(*n)))
            .collect();
        wat::parse_str(format!("(module {funcs})")).unwrap()
    }

    #[test]
    fn scan_caps_each_function_and_the_code_in_total() {
        let limits = CompileLimits {
            max_function_bytes: 1000,
            max_code_bytes: 2500,
            ..CompileLimits::default()
        };
        assert_eq!(scan(&module(&[900, 900]), &limits), Ok(()));
        assert!(matches!(
            scan(&module(&[10, 1200]), &limits),
            Err(CompileRefusal::FunctionTooLarge {
                index: 1,
                limit: 1000,
                ..
            })
        ));
        assert!(matches!(
            scan(&module(&[900, 900, 900]), &limits),
            Err(CompileRefusal::CodeTooLarge { limit: 2500, .. })
        ));
        let small = CompileLimits {
            max_component_bytes: 10,
            ..limits
        };
        assert!(matches!(
            scan(&module(&[1]), &small),
            Err(CompileRefusal::ComponentTooLarge { limit: 10, .. })
        ));
    }

    #[test]
    fn scan_caps_the_blocks_of_a_function() {
        let nested = |n: usize| {
            let body = format!("{}{}", "(block ".repeat(n), ")".repeat(n));
            wat::parse_str(format!("(module (func {body}))")).unwrap()
        };
        let limits = CompileLimits {
            max_function_blocks: 100,
            ..CompileLimits::default()
        };
        assert_eq!(scan(&nested(100), &limits), Ok(()));
        assert_eq!(
            scan(&nested(5000), &limits),
            Err(CompileRefusal::FunctionTooComplex {
                index: 0,
                blocks: 101,
                limit: 100
            })
        );
    }

    #[test]
    fn refusals_round_trip_through_json() {
        let r = CompileRefusal::Deadline { secs: 3 };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<CompileRefusal>(&text).unwrap(), r);
    }
}
