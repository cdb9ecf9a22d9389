//! Scheduled jobs as stored rows, their writes and reads. The daemon re-reads them every
//! tick, so `crewbox schedule` changes take effect without a restart.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, Row, params};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError, writer::Write};

/// A write to the `schedules` table.
#[derive(Debug)]
pub(crate) enum ScheduleWrite {
    Insert(Box<ScheduleRecord>),
    Remove {
        name: String,
    },
    Pause {
        name: String,
        paused: bool,
    },
    RunNow {
        name: String,
        at: i64,
    },
    Fire {
        name: String,
        due: Option<i64>,
        next: Option<i64>,
        status: FireStatus,
        /// The run a `running` fire starts.
        run: Option<String>,
    },
    Finished {
        name: String,
        /// The fire's run.
        run_id: String,
        /// Whether that run was created (else it could not start).
        started: bool,
        status: FireStatus,
        error: Option<String>,
    },
}

use crate::schedule::next_fire::{CatchUp, Overlap};
use crate::schedule::spec::{ScheduleError, ScheduleSpec, format_interval};
use crate::vocab::{ModeChoice, str_enum};

str_enum!(
    /// Which kind of schedule a job has.
    ScheduleKind {
        /// A cron expression in a time zone.
        Cron = "cron",
        /// A fixed interval.
        Every = "every",
        /// Once, at a time.
        At = "at",
    }
);

str_enum!(
    /// How a job's latest fire went.
    FireStatus {
        /// Its run is going.
        Running = "running",
        /// Its run completed.
        Completed = "completed",
        /// Its run failed.
        Failed = "failed",
        /// Its run was cancelled.
        Cancelled = "cancelled",
        /// The run could not start (configuration, provider).
        Error = "error",
        /// The fire was dropped (overlap or catch-up policy).
        Skipped = "skipped",
        /// The fire waits for the previous run to end.
        Queued = "queued",
    }
);

/// One scheduled job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// Unique name.
    pub name: String,
    /// Which kind of schedule.
    pub kind: ScheduleKind,
    /// The schedule text: a cron expression, an interval (`90s`) or an RFC 3339 time.
    pub spec: String,
    /// The IANA zone a cron expression is read in.
    pub tz: String,
    /// The prompt each run gets.
    pub prompt: String,
    /// The run mode (`None`: the configured default).
    pub mode: Option<ModeChoice>,
    /// The team, for team modes.
    pub team: Option<String>,
    /// The provider (`None`: the configured default).
    pub provider: Option<String>,
    /// Overrides the provider's model.
    pub model: Option<String>,
    /// What to do with fires missed while the daemon was down.
    pub catch_up: CatchUp,
    /// What to do when a fire comes while the previous run is going.
    pub overlap: Overlap,
    /// A paused job does not fire.
    pub paused: bool,
    /// When it was added (ms).
    pub created_at: i64,
    /// The latest due time a fire accounted for (ms), fired or skipped.
    pub last_fire: Option<i64>,
    /// The latest run it started.
    pub last_run: Option<String>,
    /// How its latest fire went.
    pub last_status: Option<FireStatus>,
    /// Why its latest finished fire failed (cleared by one that completes).
    pub last_error: Option<String>,
    /// Runs started.
    pub run_count: u32,
    /// The next fire (ms); `None` when the job has ended.
    pub next_fire: Option<i64>,
    /// A fire waits behind the job's running run (`--overlap queue`).
    #[serde(default)]
    pub queued: bool,
    /// The run of its latest fire while that run has not ended (chosen and recorded
    /// with the fire, before the run itself is created).
    #[serde(default)]
    pub active_run: Option<String>,
}

impl ScheduleRecord {
    /// A new job from a checked spec; `now` is its creation time (and an interval's anchor).
    pub fn new(name: &str, spec: &ScheduleSpec, prompt: &str, now: DateTime<Utc>) -> Self {
        let (kind, text, tz) = match spec {
            ScheduleSpec::Cron { expr, tz } => (ScheduleKind::Cron, expr.clone(), tz.to_string()),
            ScheduleSpec::Every(d) => (ScheduleKind::Every, format_interval(*d), "UTC".into()),
            // Millisecond precision, like every stored time: a finer instant would stay
            // after the stored `last_fire` and fire again.
            ScheduleSpec::At(at) => (
                ScheduleKind::At,
                at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "UTC".into(),
            ),
        };
        Self {
            name: name.to_owned(),
            kind,
            spec: text,
            tz,
            prompt: prompt.to_owned(),
            mode: None,
            team: None,
            provider: None,
            model: None,
            catch_up: CatchUp::default(),
            overlap: Overlap::default(),
            paused: false,
            created_at: now.timestamp_millis(),
            last_fire: None,
            last_run: None,
            last_status: None,
            last_error: None,
            run_count: 0,
            next_fire: crate::schedule::next_fire::next_fire(spec, now)
                .map(|t| t.timestamp_millis()),
            queued: false,
            active_run: None,
        }
    }

    /// The schedule read back (a stored one-shot time may be in the past by now).
    pub fn schedule(&self) -> Result<ScheduleSpec, ScheduleError> {
        match self.kind {
            ScheduleKind::Cron => ScheduleSpec::cron(&self.spec, Some(&self.tz)),
            ScheduleKind::Every => ScheduleSpec::every(&self.spec),
            ScheduleKind::At => DateTime::parse_from_rfc3339(&self.spec)
                .ok()
                .and_then(|t| DateTime::from_timestamp_millis(t.timestamp_millis()))
                .map(ScheduleSpec::At)
                .ok_or_else(|| "not an RFC 3339 time in range".to_owned())
                .map_err(|reason| ScheduleError::InvalidTime {
                    text: self.spec.clone(),
                    reason,
                }),
        }
    }

    /// Where plans start from: the last accounted due time, else the creation time.
    pub fn anchor(&self) -> DateTime<Utc> {
        let ms = self.last_fire.unwrap_or(self.created_at);
        DateTime::from_timestamp_millis(ms).unwrap_or_default()
    }
}

const COLS: &str = "name, kind, spec, tz, prompt, mode, team, provider, model, catch_up, overlap, \
     paused, created_at, last_fire, last_run, last_status, run_count, next_fire, last_error, queued, active_run";

fn bad(what: &'static str, text: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("schedule {what}: `{text}`").into(),
    )
}

fn row(r: &Row<'_>) -> rusqlite::Result<ScheduleRecord> {
    let kind: String = r.get(1)?;
    let mode: Option<String> = r.get(5)?;
    let catch_up: String = r.get(9)?;
    let overlap: String = r.get(10)?;
    let status: Option<String> = r.get(15)?;
    Ok(ScheduleRecord {
        name: r.get(0)?,
        kind: ScheduleKind::parse(&kind).ok_or_else(|| bad("kind", &kind))?,
        spec: r.get(2)?,
        tz: r.get(3)?,
        prompt: r.get(4)?,
        mode: mode
            .map(|m| ModeChoice::parse(&m).ok_or_else(|| bad("mode", &m)))
            .transpose()?,
        team: r.get(6)?,
        provider: r.get(7)?,
        model: r.get(8)?,
        catch_up: CatchUp::parse(&catch_up).ok_or_else(|| bad("catch-up", &catch_up))?,
        overlap: Overlap::parse(&overlap).ok_or_else(|| bad("overlap", &overlap))?,
        paused: r.get(11)?,
        created_at: r.get(12)?,
        last_fire: r.get(13)?,
        last_run: r.get(14)?,
        last_status: status
            .map(|s| FireStatus::parse(&s).ok_or_else(|| bad("status", &s)))
            .transpose()?,
        run_count: r.get(16)?,
        next_fire: r.get(17)?,
        last_error: r.get(18)?,
        queued: r.get(19)?,
        active_run: r.get(20)?,
    })
}

/// Applies one schedule write (called by the writer thread inside its transaction).
pub(crate) fn apply(conn: &Connection, write: &ScheduleWrite) -> Result<(), StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    let changed = match write {
        ScheduleWrite::Insert(s) => {
            let done = super::writer::exec(
                conn,
                &format!(
                    "INSERT INTO schedules ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
                ),
                params![
                    s.name,
                    s.kind.as_str(),
                    s.spec,
                    s.tz,
                    s.prompt,
                    s.mode.map(ModeChoice::as_str),
                    s.team,
                    s.provider,
                    s.model,
                    s.catch_up.as_str(),
                    s.overlap.as_str(),
                    s.paused,
                    s.created_at,
                    s.last_fire,
                    s.last_run,
                    s.last_status.map(FireStatus::as_str),
                    s.run_count,
                    s.next_fire,
                    s.last_error,
                    s.queued,
                    s.active_run
                ],
            );
            return match done {
                Ok(_) => Ok(()),
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) =>
                {
                    Err(StoreError::ScheduleExists {
                        name: s.name.clone(),
                    })
                }
                Err(e) => Err(StoreError::sqlite("insert schedule", &e)),
            };
        }
        ScheduleWrite::Remove { name } => (
            name,
            super::writer::exec(conn, "DELETE FROM schedules WHERE name = ?1", params![name])
                .map_err(q("remove schedule"))?,
        ),
        ScheduleWrite::Pause { name, paused } => (
            name,
            super::writer::exec(
                conn,
                "UPDATE schedules SET paused = ?2 WHERE name = ?1",
                params![name, paused],
            )
            .map_err(q("pause schedule"))?,
        ),
        ScheduleWrite::RunNow { name, at } => (
            name,
            super::writer::exec(
                conn,
                "UPDATE schedules SET next_fire = ?2 WHERE name = ?1",
                params![name, at],
            )
            .map_err(q("request schedule run"))?,
        ),
        ScheduleWrite::Fire {
            name,
            due,
            next,
            status,
            run,
        } => {
            let started = i64::from(*status == FireStatus::Running);
            (
                name,
                super::writer::exec(
                    conn,
                    "UPDATE schedules SET last_fire = COALESCE(?2, last_fire), next_fire = ?3,
                     last_status = ?4, run_count = run_count + ?5,
                     last_run = CASE WHEN ?5 = 1 THEN ?6 ELSE last_run END,
                     active_run = CASE WHEN ?5 = 1 THEN ?6 ELSE active_run END,
                     queued = CASE WHEN ?4 = 'queued' THEN 1 WHEN ?5 = 1 THEN 0 ELSE queued END
                     WHERE name = ?1",
                    params![name, due, next, status.as_str(), started, run],
                )
                .map_err(q("record schedule fire"))?,
            )
        }
        // Only on the job whose fire started that run: not on one removed and added
        // again under its name meanwhile.
        ScheduleWrite::Finished {
            name,
            run_id,
            started,
            status,
            error,
        } => (
            name,
            super::writer::exec(
                conn,
                "UPDATE schedules SET last_run = CASE WHEN ?3 THEN ?2 ELSE NULL END,
                 active_run = NULL, last_status = ?4, last_error = ?5
                 WHERE name = ?1 AND active_run = ?2",
                params![name, run_id, started, status.as_str(), error],
            )
            .map_err(q("record schedule end"))?,
        ),
    };
    let (name, changed) = changed;
    if changed == 0 {
        return Err(StoreError::NoSuchSchedule { name: name.clone() });
    }
    Ok(())
}

impl Store {
    /// Adds a job; a job of the same name is an error.
    pub async fn insert_schedule(&self, job: &ScheduleRecord) -> Result<(), StoreError> {
        self.write(Write::Schedule(ScheduleWrite::Insert(Box::new(
            job.clone(),
        ))))
        .await
    }

    /// Removes a job.
    pub async fn remove_schedule(&self, name: &str) -> Result<(), StoreError> {
        self.write(Write::Schedule(ScheduleWrite::Remove {
            name: name.to_owned(),
        }))
        .await
    }

    /// Pauses or resumes a job.
    pub async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<(), StoreError> {
        self.write(Write::Schedule(ScheduleWrite::Pause {
            name: name.to_owned(),
            paused,
        }))
        .await
    }

    /// Asks the daemon to fire a job at its next tick: its next fire becomes `at` while
    /// its due-time anchor stays, so the schedule's grid is unchanged.
    pub async fn request_schedule_run(
        &self,
        name: &str,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.write(Write::Schedule(ScheduleWrite::RunNow {
            name: name.to_owned(),
            at: at.timestamp_millis(),
        }))
        .await
    }

    /// Records a fire decision before any run starts: the due time it accounts for (if
    /// any), the next fire and what happened (`Running` counts a started run).
    pub async fn record_schedule_fire(
        &self,
        name: &str,
        due: Option<DateTime<Utc>>,
        next: Option<DateTime<Utc>>,
        status: FireStatus,
        run: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write(Write::Schedule(ScheduleWrite::Fire {
            name: name.to_owned(),
            due: due.map(|t| t.timestamp_millis()),
            next: next.map(|t| t.timestamp_millis()),
            status,
            run: run.map(str::to_owned),
        }))
        .await
    }

    /// Records how the run `run_id` of a job's fire ended (`started`: it was created;
    /// else it could not start) and why it failed; [`StoreError::NoSuchSchedule`] when
    /// the job is gone or its latest fire started another run.
    pub async fn record_schedule_finished(
        &self,
        name: &str,
        run_id: &str,
        started: bool,
        status: FireStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write(Write::Schedule(ScheduleWrite::Finished {
            name: name.to_owned(),
            run_id: run_id.to_owned(),
            started,
            status,
            error: error.map(str::to_owned),
        }))
        .await
    }

    /// Every job, by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {COLS} FROM schedules ORDER BY name"))
                .map_err(|e| StoreError::sqlite("prepare schedules", &e))?;
            stmt.query_map([], row)
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(|e| StoreError::sqlite("read schedules", &e))
        })
        .await
    }

    /// One job.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        Ok(self.schedules().await?.into_iter().find(|s| s.name == name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_stored_schedule_that_can_never_fire_does_not_read_back() {
        // Written by a crewbox that did not check: the daemon skips it with a warning.
        let now = Utc::now();
        let mut job = ScheduleRecord::new("j", &ScheduleSpec::every("1h").unwrap(), "p", now);
        job.kind = ScheduleKind::Cron;
        job.spec = "0 0 30 2 *".into();
        let e = job.schedule().unwrap_err();
        assert!(matches!(e, ScheduleError::NeverFires { .. }), "{e}");
        job.kind = ScheduleKind::Every;
        job.spec = "99999999999999d".into();
        assert!(matches!(
            job.schedule(),
            Err(ScheduleError::NeverFires { .. })
        ));
    }

    #[tokio::test]
    async fn jobs_are_stored_fired_and_finished_in_a_real_database() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = at("2030-01-01T00:00:00Z");
        let spec = ScheduleSpec::cron("*/5 * * * *", Some("Europe/Berlin")).unwrap();
        let mut job = ScheduleRecord::new("five", &spec, "check", now);
        job.mode = Some(ModeChoice::Mode(crate::vocab::Mode::Single));
        job.overlap = Overlap::Queue;
        assert_eq!(
            job.next_fire,
            Some(at("2030-01-01T00:05:00Z").timestamp_millis())
        );
        store.insert_schedule(&job).await.unwrap();
        let dup = store.insert_schedule(&job).await.unwrap_err();
        assert!(
            matches!(&dup, StoreError::ScheduleExists { name } if name == "five"),
            "{dup}"
        );
        let shot = ScheduleSpec::at_time(at("2030-01-02T03:04:05.123456Z"), now).unwrap();
        store
            .insert_schedule(&ScheduleRecord::new("shot", &shot, "once", now))
            .await
            .unwrap();

        let every = ScheduleSpec::every("1h30m").unwrap();
        let hourly = ScheduleRecord::new("every", &every, "p", now);
        assert_eq!(hourly.schedule().unwrap(), every, "an interval reads back");
        assert_eq!(
            hourly.next_fire,
            Some(at("2030-01-01T01:30:00Z").timestamp_millis())
        );

        let listed = store.schedules().await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0], job, "a job reads back as written");
        // Stored at millisecond precision, so its own fire time is not after itself.
        assert_eq!(
            listed[1].schedule().unwrap(),
            ScheduleSpec::At(at("2030-01-02T03:04:05.123Z"))
        );

        let due = at("2030-01-01T00:05:00Z");
        let next = at("2030-01-01T00:10:00Z");
        store
            .record_schedule_fire(
                "five",
                Some(due),
                Some(next),
                FireStatus::Running,
                Some("r-1"),
            )
            .await
            .unwrap();
        let firing = store.schedule("five").await.unwrap().unwrap();
        assert_eq!(
            firing.active_run.as_deref(),
            Some("r-1"),
            "recorded with the fire"
        );
        store
            .record_schedule_fire("five", None, Some(next), FireStatus::Skipped, None)
            .await
            .unwrap();
        // Only the end of the run its fire started is recorded on a job.
        let other = store
            .record_schedule_finished("five", "r-0", true, FireStatus::Failed, None)
            .await
            .unwrap_err();
        assert!(
            matches!(other, StoreError::NoSuchSchedule { .. }),
            "{other}"
        );
        store
            .record_schedule_finished("five", "r-1", true, FireStatus::Completed, None)
            .await
            .unwrap();
        store.set_schedule_paused("five", true).await.unwrap();
        let five = store.schedule("five").await.unwrap().unwrap();
        assert_eq!(five.run_count, 1, "only started runs count");
        assert_eq!(five.last_fire, Some(due.timestamp_millis()));
        assert_eq!(five.anchor(), due);
        assert_eq!(five.next_fire, Some(next.timestamp_millis()));
        assert_eq!(five.last_run.as_deref(), Some("r-1"));
        assert_eq!(five.last_status, Some(FireStatus::Completed));
        assert_eq!(five.active_run, None, "its run ended");
        assert!(five.paused);

        store.remove_schedule("five").await.unwrap();
        let gone = store.remove_schedule("five").await.unwrap_err();
        assert!(matches!(gone, StoreError::NoSuchSchedule { .. }), "{gone}");
        let missing = store
            .record_schedule_fire("five", None, None, FireStatus::Running, Some("r-2"))
            .await
            .unwrap_err();
        assert!(matches!(missing, StoreError::NoSuchSchedule { .. }));
        assert_eq!(store.schedules().await.unwrap().len(), 1);
    }
}
