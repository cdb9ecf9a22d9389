//! What team members remember within a run: each member's latest finished
//! conversation, so its next iteration (or its next stage) continues it instead of
//! starting blank. The conversations come from the journal — stored with each member's
//! step — so a resumed run rebuilds the same memory by replaying its stored steps.
//! What is carried is bounded by [`crate::agent::compaction::carry`].

use std::collections::HashMap;
use std::sync::Mutex;

use crate::agent::compaction;
use crate::agent::runner::AgentSpec;
use crate::provider::Message;

/// How many times `quotas.keep_turns` model turns a carried conversation keeps.
const CARRIED_TURNS_PER_KEPT_TURN: u32 = 4;

/// Each member's latest conversation, by member name (lowercased).
#[derive(Default)]
pub(crate) struct Memory {
    by_member: Mutex<HashMap<String, Vec<Message>>>,
}

impl Memory {
    /// Keeps `conversation` as member `name`'s latest.
    pub(crate) fn remember(&self, name: &str, conversation: Vec<Message>) {
        if conversation.is_empty() {
            return;
        }
        self.lock().insert(name.to_ascii_lowercase(), conversation);
    }

    /// The conversation `spec`'s member continues with for its task (`spec.task`): its
    /// latest one, bounded to half its context budget, then the task. `None` when the
    /// member has not worked yet in this run.
    pub(crate) fn carried(&self, spec: &AgentSpec) -> Option<Vec<Message>> {
        let earlier = self.lock().get(&spec.name.to_ascii_lowercase()).cloned()?;
        let q = &spec.quotas;
        Some(compaction::carry(
            &earlier,
            &spec.system_prompt,
            &spec.task,
            q.context_tokens / 2,
            q.keep_turns.max(1) * CARRIED_TURNS_PER_KEPT_TURN,
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Message>>> {
        self.by_member.lock().unwrap_or_else(|p| p.into_inner())
    }
}
