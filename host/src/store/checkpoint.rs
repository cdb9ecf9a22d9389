//! The WAL's checkpoints, on a thread of their own. SQLite's automatic checkpoint runs
//! inside the commit that crosses its threshold, so the writer — and every agent
//! waiting on it — stalled while pages were copied into the database and synced. Here
//! the writer only nudges after its commits; this thread copies what it can without
//! blocking anyone (`PASSIVE`: never waits for the writer or for readers), on its own
//! connection. Other processes sharing the store keep SQLite's automatic checkpoints.
//!
//! A checkpoint running beside a busy writer never copies the frames committed while it
//! ran, and SQLite restarts the WAL from its start only once every frame was copied: so
//! under a steady stream of writes the WAL would grow for as long as the stream lasts
//! (each new block of it zeroed by the filesystem first, a fifth of the `agents`
//! bench's time). So after each checkpoint the writer copies the short tail committed
//! meanwhile itself, between two transactions ([`Nudge::catch_up`]), and its next
//! transaction writes the WAL from the start again.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// Writes committed before a checkpoint is asked for: each adds a frame or more to
/// the WAL, so this is at least SQLite's own threshold (1,000 frames).
const WRITES: u64 = 1_000;

/// Least time between two nudges: under a steady stream of writes, one checkpoint per
/// interval copies each page once however often it changed in between.
const NUDGE_EVERY: Duration = Duration::from_millis(100);

/// The writer's side: tells the checkpointer when enough was committed.
pub(super) struct Nudge {
    tx: mpsc::SyncSender<()>,
    /// Set by the checkpointer after each run: frames committed during it are uncopied.
    behind: Arc<AtomicBool>,
    /// Writes committed since the last nudge (a frame or more each).
    since: u64,
    last: Instant,
}

impl Nudge {
    /// After a commit of `writes` writes: nudges the checkpointer when [`WRITES`] were
    /// committed since the last nudge, at most once per [`NUDGE_EVERY`]. Never blocks:
    /// a nudge pending already is enough.
    pub(super) fn committed(&mut self, writes: usize) {
        self.since += writes as u64;
        if self.since < WRITES || self.last.elapsed() < NUDGE_EVERY {
            return;
        }
        self.since = 0;
        self.last = Instant::now();
        let _ = self.tx.try_send(());
    }

    /// Between two transactions of the writer (`conn`): after a checkpoint ran, copies
    /// the frames committed meanwhile (only those: the rest are copied already), so the
    /// next transaction restarts the WAL. Nothing else writes meanwhile, so it completes
    /// unless a reader still holds an older snapshot (then a later one does).
    pub(super) fn catch_up(&mut self, conn: &Connection) {
        if !self.behind.swap(false, Ordering::Relaxed) {
            return;
        }
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "wal checkpoint failed; the next one retries");
        }
    }
}

/// Starts the checkpointer of the database at `path` on its own connection, and turns
/// off automatic checkpoints on `writer` (the connection that commits). Without a
/// thread or a connection, the writer keeps SQLite's automatic checkpoints.
pub(super) fn start(path: &Path, writer: &Connection) -> Option<Nudge> {
    let conn = match super::open_conn(path, OpenFlags::SQLITE_OPEN_READ_WRITE) {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(error = %e, "no checkpoint thread: the writer checkpoints");
            return None;
        }
    };
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    let behind = Arc::new(AtomicBool::new(false));
    let flag = behind.clone();
    let started = std::thread::Builder::new()
        .name("crewbox-store-checkpoint".into())
        .spawn(move || run(conn, rx, &flag));
    if let Err(e) = started {
        tracing::warn!(error = %e, "no checkpoint thread: the writer checkpoints");
        return None;
    }
    if let Err(e) = writer.pragma_update(None, "wal_autocheckpoint", 0) {
        tracing::warn!(error = %e, "automatic checkpoints stay on");
    }
    Some(Nudge {
        tx,
        behind,
        since: 0,
        last: Instant::now(),
    })
}

/// Checkpoints after each nudge until the writer is gone.
fn run(conn: Connection, nudges: mpsc::Receiver<()>, behind: &AtomicBool) {
    while nudges.recv().is_ok() {
        let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        });
        match done {
            Ok((frames, copied)) => {
                tracing::trace!(frames, copied, "wal checkpoint");
                // What the writer committed while this ran is not in `frames`: always
                // behind by that much.
                behind.store(true, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!(error = %e, "wal checkpoint failed; the next one retries"),
        }
    }
}
