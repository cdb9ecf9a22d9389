//! A run's journal as its modes see it: look a step up before doing it, record it as
//! begun and as done. On a fresh run the lookup finds nothing; on a resumed run every
//! step stored as done is read back instead of run again (see `store/steps.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ids::RunId;
use crate::store::{StepState, Store, StoreError};

/// The steps of one run.
pub struct Journal {
    store: Store,
    run_id: RunId,
    done: Mutex<HashMap<String, serde_json::Value>>,
    resumed: bool,
    replayed: AtomicU32,
}

impl Journal {
    /// The journal of a run that starts now.
    pub fn fresh(store: Store, run_id: RunId) -> Self {
        Self {
            store,
            run_id,
            done: Mutex::new(HashMap::new()),
            resumed: false,
            replayed: AtomicU32::new(0),
        }
    }

    /// The journal of a run being resumed: its done steps are loaded.
    pub async fn load(store: Store, run_id: RunId) -> Result<Self, StoreError> {
        let done = store
            .steps(&run_id)
            .await?
            .into_iter()
            .filter(|s| s.state == StepState::Done)
            .map(|s| (s.key, s.data))
            .collect();
        Ok(Self {
            store,
            run_id,
            done: Mutex::new(done),
            resumed: true,
            replayed: AtomicU32::new(0),
        })
    }

    /// True when this run is being resumed.
    pub fn is_resumed(&self) -> bool {
        self.resumed
    }

    /// How many stored steps were read back instead of run.
    pub fn replayed(&self) -> u32 {
        self.replayed.load(Ordering::Relaxed)
    }

    /// The stored result of step `key`, if it is done and reads as a `T`. A stored
    /// value that no longer reads (written by another version) is run again.
    pub fn done<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let value = done.get(key)?;
        match serde_json::from_value(value.clone()) {
            Ok(v) => {
                self.replayed.fetch_add(1, Ordering::Relaxed);
                Some(v)
            }
            Err(e) => {
                tracing::warn!(key, error = %e, "a stored step does not read back; running it again");
                None
            }
        }
    }

    /// True when step `key` is stored as done (without reading it back).
    pub fn has(&self, key: &str) -> bool {
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(key)
    }

    /// Records that step `key` begins, done by `agent` (before it runs).
    pub async fn begin(
        &self,
        key: &str,
        agent: Option<&str>,
        input: serde_json::Value,
    ) -> Result<(), StoreError> {
        self.store
            .begin_step(&self.run_id, key, agent, &input)
            .await
    }

    /// Stores step `key`'s result (and consumes the control messages it took in, in
    /// the same transaction). Returns once it is committed.
    pub async fn finish<T: Serialize>(
        &self,
        key: &str,
        agent: Option<&str>,
        result: &T,
        consume: Vec<i64>,
    ) -> Result<(), StoreError> {
        let value = serde_json::to_value(result).unwrap_or(serde_json::Value::Null);
        self.store
            .finish_step(&self.run_id, key, agent, &value, consume)
            .await
    }
}
