//! The fingerprint of a request as sent: a SHA-256 of each message, of the tools
//! offered and of the call's parameters, and one SHA-256 over them all. Recorded with
//! every reply, so a replay can tell an identical request from one that differs, and
//! say which message differs first.
//!
//! The agent's id and workspace are not part of it: they differ on every run and the
//! model never sees them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::provider::{CompletionRequest, Role};
use crate::text::hex;

/// Hex characters kept of a message's own hash: enough to name the first differing
/// message (the request hash is the full SHA-256).
const PART_HEX: usize = 16;

/// One message's place in a request fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDigest {
    /// Who wrote it.
    pub role: Role,
    /// The first hex characters of the SHA-256 of its canonical JSON.
    pub hash: String,
}

/// The fingerprint of one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestDigest {
    /// SHA-256 (hex) over every part below, in order.
    pub hash: String,
    /// Each message, in order.
    pub messages: Vec<MessageDigest>,
    /// The tools offered (names, descriptions, schemas).
    pub tools: String,
    /// The call's parameters (the output token limit).
    pub params: String,
}

/// The parameters of a call that the model sees, besides messages and tools.
#[derive(Serialize)]
struct Params {
    max_tokens: Option<u32>,
}

fn sha(value: &impl Serialize) -> [u8; 32] {
    // Serialising our own types to JSON cannot fail (every map key is a string).
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    Sha256::digest(bytes).into()
}

fn short(bytes: &[u8]) -> String {
    let mut h = hex(bytes);
    h.truncate(PART_HEX);
    h
}

/// The hash of a tool list as [`digest`] counts it: a list offered on every turn is
/// hashed once ([`digest_with`]).
pub(crate) fn tools_hash(tools: &[crate::provider::ToolSpec]) -> [u8; 32] {
    sha(&tools)
}

/// The fingerprint of `request`.
pub fn digest(request: &CompletionRequest) -> RequestDigest {
    digest_with(request, tools_hash(&request.tools))
}

/// The fingerprint of `request` whose tools hash to `tools` ([`tools_hash`]).
pub(crate) fn digest_with(request: &CompletionRequest, tools: [u8; 32]) -> RequestDigest {
    let mut total = Sha256::new();
    total.update(b"crewbox-request-v1\n");
    let messages = request
        .messages
        .iter()
        .map(|m| {
            let h = sha(m);
            total.update(h);
            MessageDigest {
                role: m.role,
                hash: short(&h),
            }
        })
        .collect();
    total.update(tools);
    let params = sha(&Params {
        max_tokens: request.max_tokens,
    });
    total.update(params);
    RequestDigest {
        hash: hex(&total.finalize()),
        messages,
        tools: short(&tools),
        params: short(&params),
    }
}

/// Where a request differs from the recorded one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Difference {
    /// Message `index` (0-based; 0 is the system message) differs.
    Message {
        /// Its position.
        index: usize,
        /// Its role in the request sent now.
        role: Role,
        /// Its role in the recording.
        recorded_role: Role,
    },
    /// Every message both have is the same, but one request has more.
    Length {
        /// Messages in the recording.
        recorded: usize,
        /// Messages sent now.
        sent: usize,
    },
    /// The tools offered differ.
    Tools,
    /// The call's parameters (the output token limit) differ.
    Params,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Message {
                index,
                role,
                recorded_role,
            } if role == recorded_role => write!(
                f,
                "message {index} ({}) differs from the recorded one",
                role_name(*role)
            ),
            Self::Message {
                index,
                role,
                recorded_role,
            } => write!(
                f,
                "message {index} is a {} message where the recording has a {} message",
                role_name(*role),
                role_name(*recorded_role)
            ),
            Self::Length { recorded, sent } => write!(
                f,
                "the request has {sent} messages where the recording has {recorded} (the first {} are the same)",
                recorded.min(sent)
            ),
            Self::Tools => f.write_str("the tools offered differ from the recorded ones"),
            Self::Params => f.write_str("the call's parameters differ from the recorded ones"),
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool result",
    }
}

impl RequestDigest {
    /// The first place `self` (sent now) differs from `recorded`; `None` when they are
    /// the same request.
    pub fn first_difference(&self, recorded: &RequestDigest) -> Option<Difference> {
        for (index, (now, then)) in self.messages.iter().zip(&recorded.messages).enumerate() {
            if now != then {
                return Some(Difference::Message {
                    index,
                    role: now.role,
                    recorded_role: then.role,
                });
            }
        }
        if self.messages.len() != recorded.messages.len() {
            return Some(Difference::Length {
                recorded: recorded.messages.len(),
                sent: self.messages.len(),
            });
        }
        if self.tools != recorded.tools {
            return Some(Difference::Tools);
        }
        if self.params != recorded.params {
            return Some(Difference::Params);
        }
        (self.hash != recorded.hash).then_some(Difference::Params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{AgentLabel, Message};

    fn request(messages: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            progress: None,
            agent: AgentLabel {
                id: "a-1".into(),
                name: "executor".into(),
                role: "executor".into(),
            },
            turn: 1,
            messages,
            tools: Vec::new().into(),
            max_tokens: None,
            workspace: Some("/somewhere".into()),
        }
    }

    #[test]
    fn the_same_request_has_the_same_digest_whatever_agent_sends_it() {
        let a = request(vec![Message::system("s"), Message::user("fix it")]);
        let mut b = a.clone();
        b.agent.id = "a-2".into();
        b.workspace = Some("/elsewhere".into());
        assert_eq!(digest(&a), digest(&b));
        assert_eq!(digest(&a).hash.len(), 64);
    }

    #[test]
    fn the_first_differing_message_is_named() {
        let a = request(vec![
            Message::system("s"),
            Message::user("fix it"),
            Message::tool("c1", "x"),
        ]);
        let mut b = a.clone();
        b.messages[2] = Message::tool("c1", "y");
        let d = digest(&b).first_difference(&digest(&a)).unwrap();
        assert_eq!(
            d,
            Difference::Message {
                index: 2,
                role: Role::Tool,
                recorded_role: Role::Tool
            }
        );
        assert!(d.to_string().contains("message 2 (tool result)"), "{d}");
        b.messages.truncate(2);
        let d = digest(&b).first_difference(&digest(&a)).unwrap();
        assert_eq!(
            d,
            Difference::Length {
                recorded: 3,
                sent: 2
            }
        );
        let mut c = a.clone();
        c.max_tokens = Some(5);
        assert_eq!(
            digest(&c).first_difference(&digest(&a)),
            Some(Difference::Params)
        );
        assert_eq!(digest(&a).first_difference(&digest(&a)), None);
    }
}
