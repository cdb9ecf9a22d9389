//! Deterministic replies from a TOML script (format: `SCRIPT_FORMAT.md` beside this file).
//!
//! Built for scale: one script serves thousands of agents at once, so regexes are
//! compiled at parse time and entries are indexed by (agent, turn); a call looks at
//! no more than six small buckets, and consumed entries at a bucket's front are skipped
//! by moving a cursor, never by rescanning the script.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::{Completion, CompletionRequest, Provider, ProviderError, StopReason, ToolCall, Usage};

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {}: {source}", path.display())]
    Read {
        /// The script's path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not TOML, or has a top-level key other than `reply`.
    #[error("script {origin}: {message}")]
    Syntax {
        /// Where the script came from (a path, or e.g. `<embedded demo>`).
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// One `[[reply]]` entry is invalid.
    #[error("script {origin}: [[reply]] #{entry}, key `{key}`: {message}")]
    Entry {
        /// Where the script came from.
        origin: String,
        /// 1-based index of the entry in the file.
        entry: usize,
        /// The offending key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// A fault a script entry injects instead of replying.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScriptedFault {
    /// `ProviderError::Timeout`.
    Timeout,
    /// `ProviderError::Server` with status 500.
    Server,
    /// `ProviderError::RateLimited` without `Retry-After`.
    RateLimit,
    /// `ProviderError::Connection`.
    Connection,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolCall {
    name: String,
    #[serde(default)]
    args: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    input: Option<u64>,
    output: Option<u64>,
}

/// One parsed `[[reply]]` entry.
#[derive(Debug)]
struct Entry {
    agent: Option<String>,
    turn: Option<u32>,
    when: Option<Regex>,
    system: Option<Regex>,
    /// Searched in the whole conversation sent (every message but the system prompt).
    conversation: Option<Regex>,
    repeat: bool,
    text: String,
    tool_calls: Vec<RawToolCall>,
    delay: Option<Duration>,
    fault: Option<ScriptedFault>,
    usage: RawUsage,
}

const KEYS: &[&str] = &[
    "agent",
    "turn",
    "when",
    "system",
    "conversation",
    "repeat",
    "text",
    "tool_calls",
    "delay_ms",
    "error",
    "usage",
];

/// Entries sharing one (agent, turn) filter, in file order.
#[derive(Debug, Default)]
struct Bucket {
    entries: Vec<usize>,
    /// Everything before `start` is consumed.
    start: usize,
}

#[derive(Debug, Default)]
struct TurnBuckets {
    by_turn: HashMap<u32, Bucket>,
    any_turn: Bucket,
}

impl TurnBuckets {
    fn bucket_mut(&mut self, turn: Option<u32>) -> &mut Bucket {
        match turn {
            Some(t) => self.by_turn.entry(t).or_default(),
            None => &mut self.any_turn,
        }
    }
}

#[derive(Debug, Default)]
struct Index {
    by_agent: HashMap<String, TurnBuckets>,
    any_agent: TurnBuckets,
    used: Vec<bool>,
}

/// A provider answering from a script. Entries are consumed in file order; see the
/// format doc for the matching rules.
#[derive(Debug)]
pub struct ScriptedProvider {
    name: String,
    origin: String,
    entries: Vec<Entry>,
    index: Mutex<Index>,
    next_call_id: AtomicU64,
}

fn field<T: DeserializeOwned>(
    table: &toml::Table,
    key: &str,
    fail: &impl Fn(&str, String) -> ScriptError,
) -> Result<Option<T>, ScriptError> {
    match table.get(key) {
        None => Ok(None),
        Some(v) => v
            .clone()
            .try_into()
            .map(Some)
            .map_err(|e: toml::de::Error| fail(key, e.message().to_owned())),
    }
}

impl ScriptedProvider {
    /// Loads a script file.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses script text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ScriptError> {
        let syntax = |message: String| ScriptError::Syntax {
            origin: origin.to_owned(),
            message,
        };
        let mut doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| syntax(crate::text::toml_error(&e, text)))?;
        let replies = match doc.remove("reply") {
            None => Vec::new(),
            Some(toml::Value::Array(a)) => a,
            Some(_) => {
                return Err(syntax(
                    "`reply` must be an array of tables ([[reply]])".into(),
                ));
            }
        };
        if let Some(key) = doc.keys().next() {
            return Err(syntax(format!(
                "unknown top-level key `{key}` (only [[reply]] entries are allowed)"
            )));
        }
        let mut entries = Vec::with_capacity(replies.len());
        for (i, value) in replies.into_iter().enumerate() {
            let fail = |key: &str, message: String| ScriptError::Entry {
                origin: origin.to_owned(),
                entry: i + 1,
                key: key.to_owned(),
                message,
            };
            let toml::Value::Table(t) = value else {
                return Err(fail("reply", "each [[reply]] must be a table".into()));
            };
            if let Some(key) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(fail(
                    key,
                    format!("unknown key; expected one of: {}", KEYS.join(", ")),
                ));
            }
            let when = field::<String>(&t, "when", &fail)?
                .map(|w| Regex::new(&w).map_err(|e| fail("when", format!("invalid regex: {e}"))))
                .transpose()?;
            let system = field::<String>(&t, "system", &fail)?
                .map(|w| Regex::new(&w).map_err(|e| fail("system", format!("invalid regex: {e}"))))
                .transpose()?;
            let conversation = field::<String>(&t, "conversation", &fail)?
                .map(|w| {
                    Regex::new(&w).map_err(|e| fail("conversation", format!("invalid regex: {e}")))
                })
                .transpose()?;
            let turn = field::<u32>(&t, "turn", &fail)?;
            if turn == Some(0) {
                return Err(fail("turn", "turns are 1-based".into()));
            }
            let entry = Entry {
                agent: field(&t, "agent", &fail)?,
                turn,
                when,
                system,
                conversation,
                repeat: field(&t, "repeat", &fail)?.unwrap_or(false),
                text: field(&t, "text", &fail)?.unwrap_or_default(),
                tool_calls: field(&t, "tool_calls", &fail)?.unwrap_or_default(),
                delay: field(&t, "delay_ms", &fail)?.map(Duration::from_millis),
                fault: field(&t, "error", &fail)?,
                usage: field(&t, "usage", &fail)?.unwrap_or_default(),
            };
            if !t.contains_key("text") && entry.tool_calls.is_empty() && entry.fault.is_none() {
                return Err(fail(
                    "text",
                    "an entry needs `text`, `tool_calls` or `error`".into(),
                ));
            }
            entries.push(entry);
        }
        let mut index = Index {
            used: vec![false; entries.len()],
            ..Default::default()
        };
        for (i, e) in entries.iter().enumerate() {
            let turns = match &e.agent {
                Some(a) => index.by_agent.entry(a.clone()).or_default(),
                None => &mut index.any_agent,
            };
            turns.bucket_mut(e.turn).entries.push(i);
        }
        Ok(Self {
            name: "scripted".into(),
            origin: origin.to_owned(),
            entries,
            index: Mutex::new(index),
            next_call_id: AtomicU64::new(1),
        })
    }

    /// Renames the provider (its configured name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Where the script came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Number of `[[reply]]` entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the script has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries not yet consumed (repeatable entries always count).
    pub fn remaining(&self) -> usize {
        let idx = self.index.lock().unwrap_or_else(|e| e.into_inner());
        idx.used.iter().filter(|u| !**u).count()
    }

    /// Picks and consumes the entry answering `request`.
    fn select(&self, request: &CompletionRequest) -> Option<usize> {
        let latest = request
            .messages
            .last()
            .map(|m| m.content.as_str())
            .unwrap_or("");
        let system = request
            .messages
            .iter()
            .find(|m| m.role == super::Role::System)
            .map(|m| m.content.as_str())
            .unwrap_or("");
        let conversation = Conversation(&request.messages);
        let mut guard = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let Index {
            by_agent,
            any_agent,
            used,
        } = &mut *guard;
        let (name, role) = (request.agent.name.as_str(), request.agent.role.as_str());
        let mut agents: Vec<&mut TurnBuckets> = Vec::with_capacity(3);
        if name == role {
            agents.extend(by_agent.get_mut(name));
        } else {
            let [a, b] = by_agent.get_disjoint_mut([name, role]);
            agents.extend(a);
            agents.extend(b);
        }
        agents.push(any_agent);
        let mut best: Option<(usize, &mut Bucket)> = None;
        for turns in agents {
            let TurnBuckets { by_turn, any_turn } = turns;
            let specific = by_turn.get_mut(&request.turn);
            for bucket in specific.into_iter().chain(std::iter::once(any_turn)) {
                if let Some(i) = self.first_match(bucket, used, latest, system, &conversation)
                    && best.as_ref().is_none_or(|(b, _)| i < *b)
                {
                    best = Some((i, bucket));
                }
            }
        }
        let (i, bucket) = best?;
        if !self.entries[i].repeat {
            used[i] = true;
            while bucket.start < bucket.entries.len() && used[bucket.entries[bucket.start]] {
                bucket.start += 1;
            }
        }
        Some(i)
    }

    fn first_match(
        &self,
        bucket: &Bucket,
        used: &[bool],
        latest: &str,
        system: &str,
        conversation: &Conversation<'_>,
    ) -> Option<usize> {
        bucket.entries[bucket.start..]
            .iter()
            .copied()
            .filter(|&i| !used[i])
            .find(|&i| {
                let e = &self.entries[i];
                e.when.as_ref().is_none_or(|re| re.is_match(latest))
                    && e.system.as_ref().is_none_or(|re| re.is_match(system))
                    && e.conversation
                        .as_ref()
                        .is_none_or(|re| re.is_match(&conversation.text()))
            })
    }
}

/// The messages of a request as one text for `conversation` filters: each message
/// but the system prompt as `<role>: <content>` (tool calls as `call <name> <args>`),
/// one per line, built only when an entry asks.
struct Conversation<'a>(&'a [super::Message]);

impl Conversation<'_> {
    fn text(&self) -> String {
        let mut out = String::new();
        for m in self.0.iter().filter(|m| m.role != super::Role::System) {
            let role = match m.role {
                super::Role::System => "system",
                super::Role::User => "user",
                super::Role::Assistant => "assistant",
                super::Role::Tool => "tool",
            };
            out.push_str(&format!("{role}: {}\n", m.content));
            for c in &m.tool_calls {
                out.push_str(&format!("call {} {}\n", c.name, c.args_text()));
            }
        }
        out
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn acts(&self) -> bool {
        false
    }
    fn model(&self) -> &str {
        "script"
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let Some(i) = self.select(request) else {
            return Err(ProviderError::NoScriptedReply {
                agent: request.agent.name.clone(),
                role: request.agent.role.clone(),
                turn: request.turn,
            });
        };
        let entry = &self.entries[i];
        if let Some(delay) = entry.delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(fault) = entry.fault {
            let what = format!("injected by script {} [[reply]] #{}", self.origin, i + 1);
            return Err(match fault {
                ScriptedFault::Timeout => ProviderError::Timeout(what),
                ScriptedFault::Server => ProviderError::Server {
                    status: 500,
                    message: what,
                },
                ScriptedFault::RateLimit => ProviderError::RateLimited {
                    retry_after: None,
                    message: what,
                },
                ScriptedFault::Connection => ProviderError::Connection(what),
            });
        }
        let tool_calls: Vec<ToolCall> = entry
            .tool_calls
            .iter()
            .map(|c| {
                ToolCall::new(
                    format!("call_{}", self.next_call_id.fetch_add(1, Ordering::Relaxed)),
                    c.name.clone(),
                    serde_json::Value::Object(c.args.clone()),
                )
            })
            .collect();
        let input = entry.usage.input.unwrap_or_else(|| {
            request
                .messages
                .iter()
                .map(|m| Usage::estimate(&m.content))
                .sum()
        });
        let output = entry.usage.output.unwrap_or_else(|| {
            Usage::estimate(&entry.text)
                + tool_calls
                    .iter()
                    .map(|c| Usage::estimate(&c.name) + Usage::estimate(&c.args.to_string()))
                    .sum::<u64>()
        });
        let stop = if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        Ok(Completion {
            thoughts: Vec::new(),
            reasoning: String::new(),
            text: entry.text.clone(),
            tool_calls,
            usage: Usage { input, output },
            stop,
        })
    }
}
