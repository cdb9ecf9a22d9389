//! `kind = "replay"`: answers model calls from a recorded run — this store's recording
//! of run `run = "r-…"`, or a cassette file (`cassette = "FILE"`, written by `crewbox
//! export RUN --cassette FILE`). A call is answered by the recorded exchange of the
//! same agent name, turn and request fingerprint; a call whose request differs is
//! refused with a [`Divergence`] naming the first differing message, and the run ends
//! `diverged`.

pub mod cassette;
pub mod digest;

use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use cassette::{Cassette, CassetteError, Exchange, RecordedRun};
pub use digest::{Difference, RequestDigest, digest};

use super::{Completion, CompletionRequest, Provider, ProviderError};

/// Why a request could not be answered from the recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Divergence {
    /// The agent that sent it.
    pub agent: String,
    /// Its turn.
    pub turn: u32,
    /// Where it differs from the recorded request; `None`: the recording has no call
    /// of this agent at this turn left.
    pub difference: Option<Difference>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.difference {
            Some(d) => write!(
                f,
                "agent `{}` turn {}: the request differs from the recording: {d}",
                self.agent, self.turn
            ),
            None => write!(
                f,
                "agent `{}` turn {}: the recording has no model call of this agent at this turn",
                self.agent, self.turn
            ),
        }
    }
}

/// How a replay went so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayStatus {
    /// Model calls in the recording.
    pub recorded: usize,
    /// Calls answered from it.
    pub answered: usize,
    /// The first request that differed, if any.
    pub divergence: Option<Divergence>,
}

struct State {
    exchanges: Vec<Exchange>,
    used: Vec<bool>,
    answered: usize,
    divergence: Option<Divergence>,
}

/// Answers calls from a recording.
pub struct ReplayProvider {
    name: String,
    state: Mutex<State>,
}

impl ReplayProvider {
    /// A provider named `name` answering from `exchanges`.
    pub fn new(name: impl Into<String>, exchanges: Vec<Exchange>) -> Self {
        Self {
            name: name.into(),
            state: Mutex::new(State {
                used: vec![false; exchanges.len()],
                exchanges,
                answered: 0,
                divergence: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The recorded reply to `request`, or where it diverges.
    fn answer(&self, request: &CompletionRequest) -> Result<Completion, Divergence> {
        let sent = digest(request);
        let agent = &request.agent.name;
        let mut st = self.lock();
        let open = |st: &State, i: usize| {
            !st.used[i] && st.exchanges[i].agent == *agent && st.exchanges[i].turn == request.turn
        };
        let exact = (0..st.exchanges.len())
            .find(|&i| open(&st, i) && st.exchanges[i].request.hash == sent.hash);
        if let Some(i) = exact {
            st.used[i] = true;
            st.answered += 1;
            return Ok(st.exchanges[i].reply.clone());
        }
        let nearest = (0..st.exchanges.len()).find(|&i| open(&st, i));
        let divergence = Divergence {
            agent: agent.clone(),
            turn: request.turn,
            difference: nearest.and_then(|i| sent.first_difference(&st.exchanges[i].request)),
        };
        st.divergence.get_or_insert_with(|| divergence.clone());
        Err(divergence)
    }
}

#[async_trait]
impl Provider for ReplayProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn acts(&self) -> bool {
        false
    }

    fn model(&self) -> &str {
        "replay"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        self.answer(request)
            .map_err(|d| ProviderError::Diverged(Box::new(d)))
    }

    fn replay(&self) -> Option<ReplayStatus> {
        let st = self.lock();
        Some(ReplayStatus {
            recorded: st.exchanges.len(),
            answered: st.answered,
            divergence: st.divergence.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{AgentLabel, Message, StopReason, Usage};

    fn request(name: &str, turn: u32, task: &str) -> CompletionRequest {
        CompletionRequest {
            progress: None,
            agent: AgentLabel {
                id: format!("a-{name}"),
                name: name.into(),
                role: name.into(),
            },
            turn,
            messages: vec![Message::system("s"), Message::user(task)],
            tools: Vec::new().into(),
            max_tokens: None,
            workspace: None,
        }
    }

    fn exchange(r: &CompletionRequest, text: &str) -> Exchange {
        Exchange {
            agent: r.agent.name.clone(),
            turn: r.turn,
            request: digest(r),
            reply: Completion {
                thoughts: Vec::new(),
                reasoning: String::new(),
                text: text.into(),
                tool_calls: Vec::new(),
                usage: Usage::default(),
                stop: StopReason::EndTurn,
            },
        }
    }

    #[tokio::test]
    async fn answers_by_name_turn_and_hash_then_names_a_divergence() {
        let a = request("alice", 1, "one");
        let b = request("bob", 1, "two");
        let p = ReplayProvider::new("replay", vec![exchange(&a, "A"), exchange(&b, "B")]);
        assert_eq!(p.complete(&b).await.unwrap().text, "B");
        assert_eq!(p.complete(&a).await.unwrap().text, "A");
        // Each exchange answers once.
        let e = p.complete(&a).await.unwrap_err();
        assert!(e.to_string().contains("no model call"), "{e}");
        assert!(!e.is_retryable());
        let p = ReplayProvider::new("replay", vec![exchange(&a, "A")]);
        let e = p
            .complete(&request("alice", 1, "changed"))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("message 1 (user) differs"), "{e}");
        let status = p.replay().unwrap();
        assert_eq!((status.recorded, status.answered), (1, 0));
        assert_eq!(status.divergence.unwrap().agent, "alice");
    }
}
