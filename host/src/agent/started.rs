//! An agent's start as writes in flight: its row (queued) and its move to `running` are
//! queued to the store's writer without waiting, and confirmed before the agent's first
//! effect — a tool call, a provider that acts on the workspace, its seal — and before
//! its end is reported. The writer applies writes in the order they were queued, so
//! nothing the agent stores later can be committed before them; what the wait saves is
//! a round trip to the writer on every agent's path, which under load was most of what
//! an agent cost.

use std::sync::Mutex;

use tokio::sync::OnceCell;

use crate::store::Pending;

/// The writes that record an agent's start, and whether the store took them.
pub struct Started {
    /// What each write records (for the error) and the write, in the order queued.
    writes: Mutex<Vec<(&'static str, Pending)>>,
    confirmed: OnceCell<Result<(), String>>,
}

impl Started {
    /// The start recorded by `writes`, not yet known to be committed.
    pub(crate) fn queued(writes: Vec<(&'static str, Pending)>) -> Self {
        Self {
            writes: Mutex::new(writes),
            confirmed: OnceCell::new(),
        }
    }

    /// A start already known to be stored (or never stored, where no store is kept).
    pub fn committed() -> Self {
        Self::queued(Vec::new())
    }

    /// Waits until every write of the start is committed (at once after the first
    /// time): the first refusal, as the agent's error (`cannot record the agent as
    /// …`).
    pub async fn confirmed(&self) -> Result<(), String> {
        self.confirmed
            .get_or_init(|| async {
                let writes =
                    std::mem::take(&mut *self.writes.lock().unwrap_or_else(|p| p.into_inner()));
                for (what, write) in writes {
                    write
                        .committed()
                        .await
                        .map_err(|e| format!("cannot record the agent as {what}: {e}"))?;
                }
                Ok(())
            })
            .await
            .clone()
    }
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("confirmed", &self.confirmed.get())
            .finish_non_exhaustive()
    }
}
