//! Run and agent ids as the user types them: a full id, a unique prefix, or a unique
//! tail (what the progress view shows). Nothing or several matches end the command
//! with exit 2, naming the candidates.

use super::Exit;
use crate::store::{AgentRecord, Lookup, RunRecord, Store};

/// The run `text` names, or the exit code after saying why there is none.
pub async fn run(store: &Store, text: &str) -> anyhow::Result<Result<RunRecord, Exit>> {
    Ok(settle("run", text, store.lookup_run(text).await?))
}

/// The agent `text` names, or the exit code after saying why there is none.
pub async fn agent(store: &Store, text: &str) -> anyhow::Result<Result<AgentRecord, Exit>> {
    Ok(settle("agent", text, store.lookup_agent(text).await?))
}

fn settle<T>(kind: &str, text: &str, found: Lookup<T>) -> Result<T, Exit> {
    crate::control::settle(kind, text, found).map_err(|why| {
        errln!("crewbox: {why}");
        Exit::Usage
    })
}
