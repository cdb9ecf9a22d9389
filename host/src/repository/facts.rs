//! What the scheduler, health and team commands ask a repository: the scheduled jobs,
//! the store's health facts, the teams in force. Typed answers, typed errors; the
//! binary only renders them.

use std::path::PathBuf;

use crate::store::{AgentCounts, ScheduleRecord};
use crate::team::Discovered;

use super::{ReadError, Repository};

/// What `crewbox health` reads from the store ([`Repository::health`]).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HealthFacts {
    /// Every scheduled job, by name.
    pub jobs: Vec<ScheduleRecord>,
    /// Agents queued and running, in every process.
    pub agents: AgentCounts,
    /// Runs not finished (running, or left by a process that ended).
    pub unfinished: usize,
    /// Runs whose process is gone (`crewbox resume` finishes them).
    pub interrupted: usize,
    /// The database file; None when nothing has run here.
    pub store: Option<PathBuf>,
    /// Its size in bytes (0 without a store).
    pub size_bytes: u64,
}

impl HealthFacts {
    /// Jobs that will fire again: neither paused nor ended.
    pub fn active_jobs(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| !j.paused && j.next_fire.is_some())
            .count()
    }

    /// The soonest next fire of a job not paused (Unix ms).
    pub fn next_fire(&self) -> Option<i64> {
        self.jobs
            .iter()
            .filter(|j| !j.paused)
            .filter_map(|j| j.next_fire)
            .min()
    }
}

impl Repository {
    /// The scheduled jobs, by name, with their last and next fire (empty when nothing
    /// has run here; no store is created).
    pub async fn schedules(&self) -> Result<Vec<ScheduleRecord>, ReadError> {
        match self.store_if_exists()? {
            Some(store) => Ok(store.schedules().await?),
            None => Ok(Vec::new()),
        }
    }

    /// The store's side of `crewbox health`: jobs, agents, unfinished and interrupted
    /// runs, the database file and its size. All empty when nothing has run here.
    pub async fn health(&self) -> Result<HealthFacts, ReadError> {
        let Some(store) = self.store_if_exists()? else {
            return Ok(HealthFacts::default());
        };
        Ok(HealthFacts {
            jobs: store.schedules().await?,
            agents: store.agent_counts().await?,
            unfinished: store.unfinished_runs().await?.len(),
            interrupted: store.orphaned_runs().await?.len(),
            size_bytes: std::fs::metadata(store.path()).map_or(0, |m| m.len()),
            store: Some(store.path().to_path_buf()),
        })
    }

    /// The teams in force here (repository over user over built-in, each with its
    /// source, what it shadows and its members), the files skipped and the packs that
    /// hold no team. A repository team's network grant the user wrote for another
    /// repository's team of that name is withheld, with a warning on the team.
    pub async fn teams(&self) -> Result<Discovered, ReadError> {
        let dir = self.root().to_path_buf();
        let policy = self.config.team_policy();
        let mut found =
            tokio::task::spawn_blocking(move || crate::team::discover(&dir, &policy)).await?;
        for t in &mut found.teams {
            t.warnings.extend(self.config.withheld_team_network(t));
        }
        Ok(found)
    }
}
