//! The wire contract between a coordinator and its workers: a [`Task`] (an agent to
//! run), batches of [`Forwarded`] events (the first event of a sub-agent the task's
//! agent started names it, [`StartedAgent`]), a [`TaskResult`] (which carries the
//! agent's last events and the model calls of its agents, [`ForwardedExchange`]) and
//! steer/stop [`Control`] orders. Versioned ([`WIRE_VERSION`]), bounded
//! in size and shape, and free of secrets: a task names a provider by name and a model,
//! never a key, a URL of a model server or a command — the worker's own user config
//! decides what those names mean. Anything that does not read as the current version
//! within the bounds is refused with an error naming what is wrong.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::Quotas;
use crate::event::{RoundResult, ValidationStatus};
use crate::provider::replay::RequestDigest;
use crate::provider::{Completion, Message};
use crate::store::AgentRecord;
use crate::vocab::{AgentState, AgentStats, Exceeded, FailReason};
use crate::worktree::BranchArtifact;

/// The version of every message this build sends and the only one it reads. Version 2:
/// events travel in batches (and the last ones with the result), a base commit's ref on
/// the remote is per commit, not per run. Version 3: a task carries its run's trace
/// context; an event may say the sub-agent it is about started (with its record); a
/// result carries its agents' model calls; steer and stop orders ([`Control`]) reach
/// workers. A peer of version 2 would refuse those fields as unknown without saying
/// why, so they count as a new version and a mixed pair gets the version error.
pub const WIRE_VERSION: u32 = 3;
/// Largest task message (its conversation history included).
pub const MAX_TASK_BYTES: usize = 768 * 1024;
/// Largest result message.
pub const MAX_RESULT_BYTES: usize = 900 * 1024;
/// Largest message of forwarded events.
pub const MAX_EVENT_BYTES: usize = 256 * 1024;
/// Most bytes of events a result carries (more go ahead of it as event messages).
pub const MAX_RESULT_EVENT_BYTES: usize = 64 * 1024;
/// Largest control message (a steering text of at most 16 KiB, escaped as JSON).
pub const MAX_CONTROL_BYTES: usize = 128 * 1024;
/// Most validators a task names.
const MAX_VALIDATORS: usize = 16;
/// Most sub-agents a result reports.
pub const MAX_CHILDREN: usize = 64;
/// Longest name-like field (pool, provider, model, names, roles, keys).
const MAX_NAME: usize = 128;

/// Why a message was refused.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Larger than its bound.
    #[error("{what} of {len} bytes is over the {max}-byte limit")]
    TooLarge {
        /// Which message.
        what: &'static str,
        /// Its size.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Not JSON of the expected shape.
    #[error("{what} does not read: {detail}")]
    Malformed {
        /// Which message.
        what: &'static str,
        /// The parser's message.
        detail: String,
    },
    /// Another wire version.
    #[error("{what} has wire version {found}; this crewbox speaks version {WIRE_VERSION}")]
    Version {
        /// Which message.
        what: &'static str,
        /// The version it carries.
        found: u32,
    },
    /// A field outside its bounds or charset.
    #[error("{what}: field `{field}` {problem}")]
    Field {
        /// Which message.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

/// Where the agent works on the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskPlacement {
    /// Its own worktree at the base commit; a change becomes branch `crewbox/<agent>`.
    Worktree,
    /// A read-only checkout of the base commit, thrown away afterwards.
    Reader,
}

/// One validator to run after the agent, by name (resolved by the worker).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorRef {
    /// A built-in validator, or one of the worker's own (user or trusted repository).
    pub name: String,
    /// Its criteria (empty: its defaults).
    pub criteria: Vec<String>,
}

/// An agent to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// [`WIRE_VERSION`].
    pub v: u32,
    /// The task's key (unique per agent step in its run; results and dedupe use it).
    pub key: String,
    /// The pool it is for.
    pub pool: String,
    /// The coordinator's run.
    pub run_id: String,
    /// The agent (its id on the coordinator).
    pub agent_id: String,
    /// Its parent agent.
    pub parent: Option<String>,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Its task.
    pub task: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// Its capabilities (`read`, `write`, `exec`, `spawn`).
    pub caps: Vec<String>,
    /// Its depth in the agent tree.
    pub depth: u32,
    /// Its quotas (the worker lowers them to its own).
    pub quotas: Quotas,
    /// The provider by name (the worker's own definition of that name is used).
    pub provider: String,
    /// The model, when the run chose one.
    pub model: Option<String>,
    /// Whether the coordinator's user granted its commands the network (the worker's
    /// user must grant it too).
    pub network: bool,
    /// The git remote holding the base commit, where the result branch is pushed.
    pub remote: String,
    /// The commit it starts from (hex).
    pub base: String,
    /// The ref on the remote that holds `base`.
    pub base_ref: String,
    /// Where it works.
    pub placement: TaskPlacement,
    /// Validators after it completes.
    pub validators: Vec<ValidatorRef>,
    /// Most fix rounds they may ask for.
    pub max_fix_rounds: u32,
    /// Its conversation so far (a continued agent), instead of system + task.
    pub history: Option<Vec<Message>>,
    /// How it was joined (`swarm:ID`, `group:ID`).
    pub join: Option<String>,
    /// The W3C `traceparent` of the coordinator's span the agent runs under, when the
    /// coordinator exports traces: the worker's spans of it join that trace. Ids only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// An event of a task's agent (or its sub-agents), as the worker stored it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardedEvent {
    /// The event's number within the execution (unique per execution: the coordinator
    /// stores each once).
    pub seq: u64,
    /// The agent it is about.
    pub agent_id: Option<String>,
    /// When (ms).
    pub at: i64,
    /// The event's kind (`agent.state`, `model.reply`, …).
    pub kind: String,
    /// Its data.
    pub data: serde_json::Value,
    /// The agent it is about, when that is a sub-agent the task's agent started and
    /// this is the first of its events sent: what lets the coordinator steer and stop
    /// it while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Box<StartedAgent>>,
}

/// A sub-agent a task's agent started on the worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartedAgent {
    /// The worker running it.
    pub worker: String,
    /// Its row as the worker recorded it.
    pub agent: AgentRecord,
}

/// Events of one execution of a task, in the order the worker stored them.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forwarded {
    /// [`WIRE_VERSION`].
    pub v: u32,
    /// The task.
    pub key: String,
    /// One execution of the task (a redelivered task is a new execution).
    pub exec: String,
    /// The events (at least one).
    pub events: Vec<ForwardedEvent>,
}

/// How a task ended.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskResult {
    /// [`WIRE_VERSION`].
    pub v: u32,
    /// The task.
    pub key: String,
    /// The execution that produced it.
    pub exec: String,
    /// The agent (as the task named it).
    pub agent_id: String,
    /// The worker that ran it.
    pub worker: String,
    /// Terminal state.
    pub state: AgentState,
    /// Counters.
    pub stats: AgentStats,
    /// The final text.
    pub result: String,
    /// Why it failed.
    pub error: Option<String>,
    /// Which budget ran out.
    pub exceeded: Option<Exceeded>,
    /// Why it did not end well.
    pub reason: Option<FailReason>,
    /// Its conversation (dropped when the result would be too large).
    pub history: Vec<Message>,
    /// Paths it changed.
    pub changed: Vec<String>,
    /// Its diff against its base (capped).
    pub diff: String,
    /// The branch pushed to the remote, when it changed something.
    pub branch: Option<BranchArtifact>,
    /// How validation ended.
    pub validation: ValidationStatus,
    /// Every validator result of every round.
    pub rounds: Vec<RoundResult>,
    /// Sub-agents it spawned.
    pub children: Vec<AgentRecord>,
    /// The execution's events not sent ahead of the result, in order: recorded before
    /// the result is.
    pub events: Vec<ForwardedEvent>,
    /// Every model call of the agent and of the agents it started, in order: recorded
    /// with the result, so a replay of the run finds them (dropped first when the
    /// result would be too large).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<ForwardedExchange>,
}

/// One model call a task's agent (or an agent it started) made on the worker, as the
/// worker's store holds it: its JSON parts travel as stored (a worker does not read
/// them; the coordinator reads each as its type before it stores it, see
/// [`ForwardedExchange::check_parts`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardedExchange {
    /// The agent that made it.
    pub agent_id: String,
    /// That agent's name.
    pub agent: String,
    /// Its 1-based turn.
    pub turn: u32,
    /// When it was answered (ms since the epoch).
    pub at: i64,
    /// The fingerprint of the request as sent (a `RequestDigest`).
    pub request: Box<serde_json::value::RawValue>,
    /// The model's whole reply (a `Completion`).
    pub reply: Box<serde_json::value::RawValue>,
}

impl ForwardedExchange {
    /// Whether its request reads as a request fingerprint and its reply as a model's
    /// reply: what a replay will read them as.
    pub fn check_parts(&self) -> Result<(), String> {
        serde_json::from_str::<RequestDigest>(self.request.get())
            .map_err(|e| format!("its request does not read: {e}"))?;
        serde_json::from_str::<Completion>(self.reply.get())
            .map_err(|e| format!("its reply does not read: {e}"))?;
        Ok(())
    }
}

/// Reads a message of type `T` within `max` bytes and checks its version.
fn read<T: DeserializeOwned + Versioned>(
    what: &'static str,
    bytes: &[u8],
    max: usize,
) -> Result<T, WireError> {
    if bytes.len() > max {
        return Err(WireError::TooLarge {
            what,
            len: bytes.len(),
            max,
        });
    }
    // The version is checked before the shape, so a newer sender gets the clear error.
    #[derive(Deserialize)]
    struct Probe {
        v: Option<u32>,
    }
    let probe: Probe = serde_json::from_slice(bytes).map_err(|e| WireError::Malformed {
        what,
        detail: e.to_string(),
    })?;
    match probe.v {
        Some(WIRE_VERSION) => {}
        Some(found) => return Err(WireError::Version { what, found }),
        None => {
            return Err(WireError::Field {
                what,
                field: "v",
                problem: "is missing".into(),
            });
        }
    }
    let msg: T = serde_json::from_slice(bytes).map_err(|e| WireError::Malformed {
        what,
        detail: e.to_string(),
    })?;
    msg.check()?;
    Ok(msg)
}

/// Serialises a message within `max` bytes.
fn write<T: Serialize>(what: &'static str, msg: &T, max: usize) -> Result<Vec<u8>, WireError> {
    let bytes = serde_json::to_vec(msg).map_err(|e| WireError::Malformed {
        what,
        detail: e.to_string(),
    })?;
    if bytes.len() > max {
        return Err(WireError::TooLarge {
            what,
            len: bytes.len(),
            max,
        });
    }
    Ok(bytes)
}

trait Versioned {
    fn check(&self) -> Result<(), WireError>;
}

/// A W3C `traceparent` of version 00: `00-<trace id>-<span id>-<flags>`, lowercase hex,
/// neither id all zeros.
pub fn is_traceparent(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let hex = |p: &str, n: usize| {
        p.len() == n
            && p.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    matches!(parts[..], [v, t, sp, f]
        if v == "00" && hex(t, 32) && hex(sp, 16) && hex(f, 2)
            && t.bytes().any(|b| b != b'0') && sp.bytes().any(|b| b != b'0'))
}

/// A token that may stand in a NATS subject: `[A-Za-z0-9_-]`, 1..=128 bytes.
pub fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn token(what: &'static str, field: &'static str, s: &str) -> Result<(), WireError> {
    if is_token(s) {
        Ok(())
    } else {
        Err(WireError::Field {
            what,
            field,
            problem: format!("`{}` is not 1..=128 of [A-Za-z0-9_-]", s.escape_debug()),
        })
    }
}

fn short(what: &'static str, field: &'static str, s: &str) -> Result<(), WireError> {
    if s.len() <= MAX_NAME && !s.chars().any(char::is_control) {
        Ok(())
    } else {
        Err(WireError::Field {
            what,
            field,
            problem: "is longer than 128 bytes or holds control characters".into(),
        })
    }
}

/// An agent row's capabilities (a worker reports): each a capability's name.
/// The most tokens one figure a worker reports may hold (about 10^12: far past any
/// agent's spending, far from overflowing a sum of many, or the store's signed column).
pub const MAX_WIRE_TOKENS: u64 = 1 << 40;
/// The most a cost a worker reports may be.
const MAX_WIRE_COST: f64 = 1e9;

/// An agent's figures as a worker reports them: tokens within [`MAX_WIRE_TOKENS`], a
/// cost that is a number from 0 to [`MAX_WIRE_COST`].
fn stats(what: &'static str, field: &'static str, s: &AgentStats) -> Result<(), WireError> {
    let problem = if s.tokens_in > MAX_WIRE_TOKENS || s.tokens_out > MAX_WIRE_TOKENS {
        Some(format!(
            "holds {} / {} tokens; at most {MAX_WIRE_TOKENS} each",
            s.tokens_in, s.tokens_out
        ))
    } else {
        s.cost
            .filter(|c| !(c.is_finite() && (0.0..=MAX_WIRE_COST).contains(c)))
            .map(|c| format!("holds the cost {c}; a cost is from 0 to {MAX_WIRE_COST}"))
    };
    match problem {
        Some(problem) => Err(WireError::Field {
            what,
            field,
            problem,
        }),
        None => Ok(()),
    }
}

/// Whether `usage` (of a model reply a worker forwards) is within [`MAX_WIRE_TOKENS`].
pub fn usage_in_bounds(usage: &crate::vocab::Usage) -> bool {
    usage.input <= MAX_WIRE_TOKENS && usage.output <= MAX_WIRE_TOKENS
}

fn capabilities(what: &'static str, field: &'static str, caps: &[String]) -> Result<(), WireError> {
    match caps
        .iter()
        .find(|c| !matches!(c.as_str(), "read" | "write" | "exec" | "spawn" | "mcp"))
    {
        Some(c) => Err(WireError::Field {
            what,
            field,
            problem: format!("`{}` is not a capability", c.escape_debug()),
        }),
        None => Ok(()),
    }
}

fn hex_commit(what: &'static str, field: &'static str, s: &str) -> Result<(), WireError> {
    if (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(WireError::Field {
            what,
            field,
            problem: format!("`{}` is not a commit id", s.escape_debug()),
        })
    }
}

const TASK: &str = "task";
const CONTROL: &str = "control";
const RESULT: &str = "result";
const EVENT: &str = "event";

impl Versioned for Task {
    fn check(&self) -> Result<(), WireError> {
        token(TASK, "key", &self.key)?;
        token(TASK, "pool", &self.pool)?;
        token(TASK, "run_id", &self.run_id)?;
        token(TASK, "agent_id", &self.agent_id)?;
        if let Some(p) = &self.parent {
            token(TASK, "parent", p)?;
        }
        short(TASK, "name", &self.name)?;
        short(TASK, "role", &self.role)?;
        short(TASK, "provider", &self.provider)?;
        if let Some(m) = &self.model {
            short(TASK, "model", m)?;
        }
        hex_commit(TASK, "base", &self.base)?;
        let want = base_ref(&self.base);
        if self.base_ref != want {
            return Err(WireError::Field {
                what: TASK,
                field: "base_ref",
                problem: format!("must be `{want}`"),
            });
        }
        if let Some(t) = &self.trace
            && !is_traceparent(t)
        {
            return Err(WireError::Field {
                what: TASK,
                field: "trace",
                problem: "must be a W3C traceparent (`00-<32 hex>-<16 hex>-<2 hex>`)".into(),
            });
        }
        // A remote is handed to `git` as an argument: never an option, never a helper.
        if self.remote.is_empty()
            || self.remote.len() > 1024
            || self.remote.starts_with('-')
            || self.remote.chars().any(char::is_control)
        {
            return Err(WireError::Field {
                what: TASK,
                field: "remote",
                problem: "must be a git URL (no leading `-`, no control characters)".into(),
            });
        }
        for c in &self.caps {
            if !matches!(c.as_str(), "read" | "write" | "exec" | "spawn") {
                return Err(WireError::Field {
                    what: TASK,
                    field: "caps",
                    problem: format!("`{}` is not a capability", c.escape_debug()),
                });
            }
        }
        if self.validators.len() > MAX_VALIDATORS {
            return Err(WireError::Field {
                what: TASK,
                field: "validators",
                problem: format!("names more than {MAX_VALIDATORS}"),
            });
        }
        for v in &self.validators {
            short(TASK, "validators.name", &v.name)?;
            // A worker resolves a validator by name among its own user's plugins (and a
            // clone it trusts): a path would name a file on the worker's disk.
            if crate::plugin::discover::is_path_spec(&v.name) || v.name.contains('=') {
                return Err(WireError::Field {
                    what: TASK,
                    field: "validators.name",
                    problem: format!(
                        "`{}` is a path, not a plugin name; tasks name validators by name",
                        crate::text::escape(&v.name)
                    ),
                });
            }
        }
        if self.max_fix_rounds > crate::engine::request::MAX_FIX_ROUNDS {
            return Err(WireError::Field {
                what: TASK,
                field: "max_fix_rounds",
                problem: format!("is over {}", crate::engine::request::MAX_FIX_ROUNDS),
            });
        }
        if let Some(j) = &self.join {
            short(TASK, "join", j)?;
        }
        Ok(())
    }
}

impl ForwardedEvent {
    fn check(&self, what: &'static str) -> Result<(), WireError> {
        if let Some(a) = &self.agent_id {
            token(what, "events.agent_id", a)?;
        }
        if let Some(s) = &self.started {
            let a = &s.agent;
            short(what, "events.started.worker", &s.worker)?;
            if self.agent_id.as_deref() != Some(a.id.as_str()) {
                return Err(WireError::Field {
                    what,
                    field: "events.started.agent.id",
                    problem: "is not the agent the event is about".into(),
                });
            }
            token(what, "events.started.agent.run_id", a.run_id.as_str())?;
            match &a.parent {
                Some(p) => token(what, "events.started.agent.parent", p.as_str())?,
                None => {
                    return Err(WireError::Field {
                        what,
                        field: "events.started.agent.parent",
                        problem: "is missing: a started agent has a parent".into(),
                    });
                }
            }
            short(what, "events.started.agent.name", &a.name)?;
            short(what, "events.started.agent.role", &a.role)?;
            capabilities(what, "events.started.agent.caps", &a.caps)?;
        }
        short(what, "events.kind", &self.kind)
    }
}

impl Versioned for Forwarded {
    fn check(&self) -> Result<(), WireError> {
        token(EVENT, "key", &self.key)?;
        token(EVENT, "exec", &self.exec)?;
        if self.events.is_empty() {
            return Err(WireError::Field {
                what: EVENT,
                field: "events",
                problem: "is empty".into(),
            });
        }
        self.events.iter().try_for_each(|e| e.check(EVENT))
    }
}

impl Versioned for TaskResult {
    fn check(&self) -> Result<(), WireError> {
        token(RESULT, "key", &self.key)?;
        token(RESULT, "exec", &self.exec)?;
        token(RESULT, "agent_id", &self.agent_id)?;
        short(RESULT, "worker", &self.worker)?;
        if !self.state.is_terminal() {
            return Err(WireError::Field {
                what: RESULT,
                field: "state",
                problem: format!("`{}` is not an ending", self.state.as_str()),
            });
        }
        stats(RESULT, "stats", &self.stats)?;
        if self.children.len() > MAX_CHILDREN {
            return Err(WireError::Field {
                what: RESULT,
                field: "children",
                problem: format!("lists more than {MAX_CHILDREN}"),
            });
        }
        for c in &self.children {
            token(RESULT, "children.id", c.id.as_str())?;
            if let Some(p) = &c.parent {
                token(RESULT, "children.parent", p.as_str())?;
            }
            short(RESULT, "children.name", &c.name)?;
            short(RESULT, "children.role", &c.role)?;
            capabilities(RESULT, "children.caps", &c.caps)?;
            stats(RESULT, "children.stats", &c.stats)?;
            let times = [Some(c.created_at), c.started_at, c.finished_at];
            if times.into_iter().flatten().any(|t| t < 0) {
                return Err(WireError::Field {
                    what: RESULT,
                    field: "children.created_at",
                    problem: "a time is before 1970".into(),
                });
            }
            if !c.state.is_terminal() {
                return Err(WireError::Field {
                    what: RESULT,
                    field: "children.state",
                    problem: format!("`{}` is not an ending", c.state.as_str()),
                });
            }
        }
        if let Some(b) = &self.branch {
            if !b
                .branch
                .strip_prefix("crewbox/")
                .and_then(|rest| rest.strip_prefix(self.agent_id.as_str()))
                .is_some_and(|suffix| {
                    suffix.is_empty() || suffix.starts_with('-') && is_token(suffix)
                })
            {
                return Err(WireError::Field {
                    what: RESULT,
                    field: "branch",
                    problem: format!(
                        "`{}` is not this agent's branch crewbox/{}",
                        b.branch.escape_debug(),
                        self.agent_id
                    ),
                });
            }
            hex_commit(RESULT, "branch.base", &b.base)?;
            for c in &b.commits {
                hex_commit(RESULT, "branch.commits", c)?;
            }
        }
        for x in &self.exchanges {
            token(RESULT, "exchanges.agent_id", &x.agent_id)?;
            short(RESULT, "exchanges.agent", &x.agent)?;
        }
        self.events.iter().try_for_each(|e| e.check(RESULT))
    }
}

/// The ref on the remote holding a base commit (one per commit, whichever runs start
/// there: pushed once, fetched once per worker).
pub fn base_ref(commit: &str) -> String {
    format!("refs/crewbox/base/{commit}")
}

impl Task {
    /// Reads a task message.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        read(TASK, bytes, MAX_TASK_BYTES)
    }

    /// The task as a message.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        write(TASK, self, MAX_TASK_BYTES)
    }
}

impl Forwarded {
    /// Reads a message of events.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        read(EVENT, bytes, MAX_EVENT_BYTES)
    }

    /// The events as a message (an error when they are over the bound).
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        write(EVENT, self, MAX_EVENT_BYTES)
    }
}

impl ForwardedEvent {
    /// The bytes this event adds to a message that carries it.
    pub fn wire_len(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |b| b.len() + 1)
    }
}

impl TaskResult {
    /// An error result for `task` naming why it could not run (`exec` is this attempt's
    /// id, `worker` who answers).
    pub fn failure(task: &Task, exec: &str, worker: &str, why: String) -> Self {
        Self {
            v: WIRE_VERSION,
            key: task.key.clone(),
            exec: exec.to_owned(),
            agent_id: task.agent_id.clone(),
            worker: worker.to_owned(),
            state: AgentState::Error,
            stats: AgentStats::default(),
            result: String::new(),
            error: Some(why),
            exceeded: None,
            reason: Some(FailReason::Internal),
            history: Vec::new(),
            changed: Vec::new(),
            diff: String::new(),
            branch: None,
            validation: ValidationStatus::Skipped,
            rounds: Vec::new(),
            children: Vec::new(),
            events: Vec::new(),
            exchanges: Vec::new(),
        }
    }

    /// Reads a result message.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        read(RESULT, bytes, MAX_RESULT_BYTES)
    }

    /// The result as a message; a result over the bound drops its model exchanges,
    /// then its history, then cuts its diff, then its text, so it always fits.
    pub fn to_bytes(&mut self) -> Result<Vec<u8>, WireError> {
        if let Ok(b) = write(RESULT, self, MAX_RESULT_BYTES) {
            return Ok(b);
        }
        if !self.exchanges.is_empty() {
            tracing::warn!(
                task = %self.key,
                calls = self.exchanges.len(),
                "the model exchanges of this task do not fit its result and are not sent: a replay of its run will not find them"
            );
            self.exchanges.clear();
            if let Ok(b) = write(RESULT, self, MAX_RESULT_BYTES) {
                return Ok(b);
            }
        }
        self.history.clear();
        if let Ok(b) = write(RESULT, self, MAX_RESULT_BYTES) {
            return Ok(b);
        }
        self.diff = cut(&self.diff, 64 * 1024);
        self.rounds.clear();
        self.children.truncate(8);
        self.result = cut(&self.result, 256 * 1024);
        write(RESULT, self, MAX_RESULT_BYTES)
    }
}

fn cut(s: &str, max: usize) -> String {
    crate::text::cut_marked(s, max, "\n[… cut to fit a result message]").into_owned()
}

/// A steer or a stop for a task's running agent, from the coordinator that published
/// the task to the worker running it: a core NATS request on
/// `crewbox.ctl.<pool>.<run>.<key>`, which only the worker running that task's agent
/// answers, once it has handed the order to the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Control {
    /// [`WIRE_VERSION`].
    pub v: u32,
    /// The task.
    pub key: String,
    /// Its run.
    pub run_id: String,
    /// The task's agent (the only agent a control reaches).
    pub agent_id: String,
    /// What to do.
    pub order: Order,
    /// The steering message (steer only; at most 16 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a [`Control`] asks of the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Deliver the message before its next model call.
    Steer,
    /// Stop it.
    Stop,
}

impl Versioned for Control {
    fn check(&self) -> Result<(), WireError> {
        token(CONTROL, "key", &self.key)?;
        token(CONTROL, "run_id", &self.run_id)?;
        token(CONTROL, "agent_id", &self.agent_id)?;
        let problem = match (self.order, &self.message) {
            (Order::Steer, None) => Some("a steer needs a message".to_owned()),
            (Order::Steer, Some(m)) if m.len() > crate::control::MAX_MESSAGE_BYTES => {
                Some(format!(
                    "is {} bytes; the limit is {}",
                    m.len(),
                    crate::control::MAX_MESSAGE_BYTES
                ))
            }
            (Order::Stop, Some(_)) => Some("a stop carries no message".to_owned()),
            _ => None,
        };
        match problem {
            Some(problem) => Err(WireError::Field {
                what: CONTROL,
                field: "message",
                problem,
            }),
            None => Ok(()),
        }
    }
}

impl Control {
    /// Reads a control message.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        read(CONTROL, bytes, MAX_CONTROL_BYTES)
    }

    /// The control as a message.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        write(CONTROL, self, MAX_CONTROL_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn task() -> Task {
        Task {
            v: WIRE_VERSION,
            key: "k1".into(),
            pool: "default".into(),
            run_id: "r-1".into(),
            agent_id: "a-1".into(),
            parent: None,
            name: "worker".into(),
            role: "worker".into(),
            task: "do it".into(),
            system_prompt: "you".into(),
            caps: vec!["read".into(), "write".into()],
            depth: 0,
            quotas: Quotas::default(),
            provider: "scripted".into(),
            model: None,
            network: false,
            remote: "/srv/repo.git".into(),
            base: "0123456789012345678901234567890123456789".into(),
            base_ref: base_ref("0123456789012345678901234567890123456789"),
            placement: TaskPlacement::Worktree,
            validators: Vec::new(),
            max_fix_rounds: 0,
            history: None,
            join: None,
            trace: None,
        }
    }

    #[test]
    fn a_task_round_trips() {
        let t = task();
        let back = Task::from_bytes(&t.to_bytes().unwrap()).unwrap();
        assert_eq!(back.key, t.key);
        assert_eq!(back.quotas, t.quotas);
    }

    #[test]
    fn hostile_tasks_are_refused_naming_what_is_wrong() {
        let err = |bytes: &[u8]| Task::from_bytes(bytes).unwrap_err().to_string();
        assert!(err(b"not json").contains("task does not read"));
        assert!(err(br#"{"v": 1}"#).contains("wire version 1"));
        // A version 2 peer (no trace context, model calls or orders) is named as such.
        let mut v2 = serde_json::to_value(task()).unwrap();
        v2["v"] = 2.into();
        let e = err(&serde_json::to_vec(&v2).unwrap());
        assert!(
            e.contains("wire version 2") && e.contains("version 3"),
            "{e}"
        );
        assert!(err(br#"{"x": 1}"#).contains("`v` is missing"));
        let big = vec![b' '; MAX_TASK_BYTES + 1];
        assert!(err(&big).contains("over the"));
        let mut t = task();
        t.pool = "a.b".into();
        assert!(err(&serde_json::to_vec(&t).unwrap()).contains("`pool`"));
        let mut t = task();
        t.remote = "--upload-pack=sh".into();
        assert!(err(&serde_json::to_vec(&t).unwrap()).contains("`remote`"));
        let mut t = task();
        t.caps.push("root".into());
        assert!(err(&serde_json::to_vec(&t).unwrap()).contains("`root` is not a capability"));
        let mut t = task();
        t.base_ref = "refs/heads/main".into();
        assert!(err(&serde_json::to_vec(&t).unwrap()).contains("base_ref"));
        let mut v = serde_json::to_value(task()).unwrap();
        v["api_key"] = "sk-x".into();
        assert!(err(&serde_json::to_vec(&v).unwrap()).contains("unknown field `api_key`"));
    }

    #[test]
    fn messages_of_events_are_refused_empty_or_with_a_hostile_event() {
        let event = |agent: &str, kind: &str| ForwardedEvent {
            started: None,
            seq: 1,
            agent_id: Some(agent.into()),
            at: 1,
            kind: kind.into(),
            data: serde_json::json!({"state": "running"}),
        };
        let msg = |events| Forwarded {
            v: WIRE_VERSION,
            key: "k1".into(),
            exec: "e1".into(),
            events,
        };
        let ok = msg(vec![
            event("a-1", "agent.state"),
            event("a-2", "model.reply"),
        ]);
        let back = Forwarded::from_bytes(&ok.to_bytes().unwrap()).unwrap();
        assert_eq!(back.events.len(), 2);
        let err = |m: Forwarded| {
            Forwarded::from_bytes(&serde_json::to_vec(&m).unwrap())
                .unwrap_err()
                .to_string()
        };
        assert!(err(msg(Vec::new())).contains("`events` is empty"));
        assert!(err(msg(vec![event("a.b", "agent.state")])).contains("`events.agent_id`"));
        let e = err(msg(vec![event("a-1", "agent.state\u{1b}[2J")]));
        assert!(e.contains("`events.kind`"), "{e}");
        let mut v = serde_json::to_value(ok).unwrap();
        v["events"][0]["secret"] = "x".into();
        let e = Forwarded::from_bytes(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(e.to_string().contains("unknown field `secret`"), "{e}");
        // A started agent must be the one its event is about, with a parent and a
        // clean name.
        let kid = |id: &str, parent: Option<&str>, name: &str| {
            let mut e = event("a-kid", "agent.state");
            e.started = Some(Box::new(StartedAgent {
                worker: "w".into(),
                agent: AgentRecord {
                    name: name.into(),
                    role: "kid".into(),
                    ..AgentRecord::running(
                        &crate::ids::AgentId::from_string(id.to_owned()),
                        &crate::ids::RunId::from_string("r-1".to_owned()),
                        parent
                            .map(|p| crate::ids::AgentId::from_string(p.to_owned()))
                            .as_ref(),
                    )
                },
            }));
            msg(vec![e])
        };
        let fine = kid("a-kid", Some("a-1"), "kid");
        assert!(Forwarded::from_bytes(&fine.to_bytes().unwrap()).is_ok());
        let e = err(kid("a-other", Some("a-1"), "kid"));
        assert!(e.contains("`events.started.agent.id`"), "{e}");
        let e = err(kid("a-kid", None, "kid"));
        assert!(e.contains("`events.started.agent.parent`"), "{e}");
        let e = err(kid("a-kid", Some("a-1"), "kid\u{1b}[2J"));
        assert!(e.contains("`events.started.agent.name`"), "{e}");
        let mut root = kid("a-kid", Some("a-1"), "kid");
        if let Some(s) = root.events[0].started.as_mut() {
            s.agent.caps = vec!["read".into(), "\u{1b}[2Jroot".into()];
        }
        let e = err(root);
        assert!(e.contains("`events.started.agent.caps`"), "{e}");
    }

    #[test]
    fn a_result_for_another_agents_branch_is_refused() {
        let r = TaskResult {
            branch: Some(BranchArtifact {
                branch: "main".into(),
                base: "0123456789012345678901234567890123456789".into(),
                commits: Vec::new(),
            }),
            ..result_with(Vec::new(), Vec::new())
        };
        let bytes = serde_json::to_vec(&r).unwrap();
        let e = TaskResult::from_bytes(&bytes).unwrap_err().to_string();
        assert!(e.contains("not this agent's branch"), "{e}");
        let mut r = r;
        r.branch = None;
        r.state = AgentState::Running;
        let e = TaskResult::from_bytes(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(e.to_string().contains("not an ending"));
    }

    fn raw<T: Serialize>(v: &T) -> Box<serde_json::value::RawValue> {
        serde_json::value::to_raw_value(v).unwrap()
    }

    fn exchange(agent_id: &str, text: &str) -> ForwardedExchange {
        ForwardedExchange {
            agent_id: agent_id.into(),
            agent: "executor".into(),
            turn: 1,
            at: 1,
            request: raw(&RequestDigest {
                hash: "00".into(),
                messages: Vec::new(),
                tools: "00".into(),
                params: "00".into(),
            }),
            reply: raw(&Completion {
                text: text.into(),
                tool_calls: Vec::new(),
                usage: crate::vocab::Usage::default(),
                stop: crate::vocab::StopReason::EndTurn,
                reasoning: String::new(),
                thoughts: Vec::new(),
            }),
        }
    }

    fn result_with(history: Vec<Message>, exchanges: Vec<ForwardedExchange>) -> TaskResult {
        TaskResult {
            v: WIRE_VERSION,
            key: "k1".into(),
            exec: "e1".into(),
            agent_id: "a-1".into(),
            worker: "w".into(),
            state: AgentState::Completed,
            stats: AgentStats::default(),
            result: "ok".into(),
            error: None,
            exceeded: None,
            reason: None,
            history,
            changed: Vec::new(),
            diff: String::new(),
            branch: None,
            validation: ValidationStatus::Skipped,
            rounds: Vec::new(),
            children: Vec::new(),
            events: Vec::new(),
            exchanges,
        }
    }

    #[test]
    fn a_results_exchanges_are_checked_and_dropped_before_its_history() {
        let history = vec![Message::user("the task")];
        // Fits: sent whole, read back equal.
        let mut r = result_with(history.clone(), vec![exchange("a-1", "done")]);
        let back = TaskResult::from_bytes(&r.to_bytes().unwrap()).unwrap();
        assert_eq!(back.exchanges.len(), 1);
        assert_eq!(back.exchanges[0].reply.get(), r.exchanges[0].reply.get());
        assert!(back.exchanges[0].check_parts().is_ok());
        // Parts that are JSON but not what a replay reads are named.
        let mut x = exchange("a-1", "done");
        x.reply = raw(&serde_json::json!({"bogus": 1}));
        assert!(x.check_parts().unwrap_err().contains("reply does not read"));
        x.request = raw(&serde_json::json!([1]));
        assert!(
            x.check_parts()
                .unwrap_err()
                .contains("request does not read")
        );
        // An exchange naming no agent token, or an agent name with escapes, is refused.
        for (id, name) in [("a.1", "executor"), ("a-1", "exec\u{1b}[2J")] {
            let mut x = exchange(id, "done");
            x.agent = name.into();
            let bad = result_with(Vec::new(), vec![x]);
            let e = TaskResult::from_bytes(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
            assert!(e.to_string().contains("`exchanges.agent"), "{e}");
        }
        // Too large with them: they go, the conversation stays.
        let big = "x".repeat(MAX_RESULT_BYTES / 2);
        let mut r = result_with(
            history.clone(),
            vec![exchange("a-1", &big), exchange("a-1", &big)],
        );
        let back = TaskResult::from_bytes(&r.to_bytes().unwrap()).unwrap();
        assert!(back.exchanges.is_empty());
        assert_eq!(back.history, history);
        // A sub-agent it lists has capabilities by name only.
        let mut r = result_with(Vec::new(), Vec::new());
        r.children = vec![AgentRecord {
            name: "kid".into(),
            role: "kid".into(),
            caps: vec!["read".into(), "root".into()],
            state: AgentState::Completed,
            ..AgentRecord::running(
                &crate::ids::AgentId::from_string("a-kid".to_owned()),
                &crate::ids::RunId::from_string("r-1".to_owned()),
                Some(&crate::ids::AgentId::from_string("a-1".to_owned())),
            )
        }];
        let e = TaskResult::from_bytes(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(e.to_string().contains("`children.caps`"), "{e}");
        // A result of before (no exchanges) reads, and writes no `exchanges` key.
        let plain = result_with(Vec::new(), Vec::new());
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("exchanges"), "{json}");
    }

    #[test]
    fn a_control_is_checked_field_by_field() {
        let steer = Control {
            v: WIRE_VERSION,
            key: "k1".into(),
            run_id: "r-1".into(),
            agent_id: "a-1".into(),
            order: Order::Steer,
            message: Some("look at the tests first".into()),
        };
        let back = Control::from_bytes(&steer.to_bytes().unwrap()).unwrap();
        assert_eq!(back, steer);
        let refused = |c: &Control| {
            Control::from_bytes(&serde_json::to_vec(c).unwrap())
                .unwrap_err()
                .to_string()
        };
        let e = refused(&Control {
            key: "k1.>".into(),
            ..steer.clone()
        });
        assert!(e.contains("key"), "{e}");
        let e = refused(&Control {
            message: None,
            ..steer.clone()
        });
        assert!(e.contains("needs a message"), "{e}");
        let e = refused(&Control {
            message: Some("x".repeat(crate::control::MAX_MESSAGE_BYTES + 1)),
            ..steer.clone()
        });
        assert!(e.contains("the limit is"), "{e}");
        let e = refused(&Control {
            order: Order::Stop,
            ..steer.clone()
        });
        assert!(e.contains("no message"), "{e}");
        let e =
            Control::from_bytes(br#"{"v":3,"key":"k","run_id":"r","agent_id":"a","order":"kill"}"#)
                .unwrap_err()
                .to_string();
        assert!(e.contains("kill"), "{e}");
    }

    #[test]
    fn a_tasks_trace_context_must_be_a_traceparent() {
        assert!(is_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473\u{1b}-00f067aa0ba902b7-01",
        ] {
            assert!(!is_traceparent(bad), "{bad:?}");
        }
        let mut t = task();
        t.trace = Some("00-zz-00f067aa0ba902b7-01".into());
        let e = Task::from_bytes(&serde_json::to_vec(&t).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("trace"), "{e}");
        t.trace = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
        let back = Task::from_bytes(&t.to_bytes().unwrap()).unwrap();
        assert_eq!(back.trace, t.trace);
        // Without one, the message has no `trace` key (a worker of before reads it).
        t.trace = None;
        assert!(
            !String::from_utf8(t.to_bytes().unwrap())
                .unwrap()
                .contains("trace")
        );
    }
}
