//! Versioned migrations. `PRAGMA user_version` holds the schema version; a database
//! written by a newer crewbox is refused, never downgraded or reset.

/// Each entry migrates from version `index` to `index + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: runs, agents, events, controls.
    r#"
    CREATE TABLE runs (
        id          TEXT PRIMARY KEY,
        mode        TEXT NOT NULL,
        prompt      TEXT NOT NULL,
        team        TEXT,
        status      TEXT NOT NULL,
        exit_reason TEXT,
        result      TEXT,
        spec        TEXT NOT NULL,
        pid         INTEGER,
        created_at  INTEGER NOT NULL,
        finished_at INTEGER
    );
    CREATE INDEX runs_status ON runs(status);
    CREATE TABLE agents (
        id          TEXT PRIMARY KEY,
        run_id      TEXT NOT NULL REFERENCES runs(id),
        parent_id   TEXT,
        name        TEXT NOT NULL,
        role        TEXT NOT NULL,
        task        TEXT NOT NULL,
        caps        TEXT NOT NULL,
        depth       INTEGER NOT NULL,
        join_mode   TEXT,
        state       TEXT NOT NULL,
        turns       INTEGER NOT NULL DEFAULT 0,
        tool_calls  INTEGER NOT NULL DEFAULT 0,
        tokens_in   INTEGER NOT NULL DEFAULT 0,
        tokens_out  INTEGER NOT NULL DEFAULT 0,
        cost        REAL,
        result      TEXT,
        error       TEXT,
        created_at  INTEGER NOT NULL,
        started_at  INTEGER,
        finished_at INTEGER
    );
    CREATE INDEX agents_run ON agents(run_id);
    CREATE INDEX agents_state ON agents(state);
    CREATE TABLE events (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id   TEXT NOT NULL,
        agent_id TEXT,
        at       INTEGER NOT NULL,
        kind     TEXT NOT NULL,
        data     TEXT NOT NULL
    );
    CREATE INDEX events_run ON events(run_id, seq);
    CREATE TABLE controls (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        target      TEXT NOT NULL,
        kind        TEXT NOT NULL,
        message     TEXT,
        created_at  INTEGER NOT NULL,
        consumed_at INTEGER
    );
    CREATE INDEX controls_pending ON controls(consumed_at, target);
    "#,
    // 2: run details (decision, crew, swarm), dispatch history.
    r#"
    ALTER TABLE runs ADD COLUMN details TEXT;
    CREATE TABLE dispatch_history (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id     TEXT,
        at         INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        source     TEXT NOT NULL,
        prompt_len INTEGER NOT NULL,
        reason     TEXT NOT NULL
    );
    "#,
    // 3: scheduled jobs. Times are Unix milliseconds; `last_fire` is the due time a fire
    // accounted for (not when the run started), so plans resume on the job's grid.
    r#"
    CREATE TABLE schedules (
        name        TEXT PRIMARY KEY,
        kind        TEXT NOT NULL,
        spec        TEXT NOT NULL,
        tz          TEXT NOT NULL,
        prompt      TEXT NOT NULL,
        mode        TEXT,
        team        TEXT,
        provider    TEXT,
        model       TEXT,
        catch_up    TEXT NOT NULL,
        overlap     TEXT NOT NULL,
        paused      INTEGER NOT NULL DEFAULT 0,
        created_at  INTEGER NOT NULL,
        last_fire   INTEGER,
        last_run    TEXT,
        last_status TEXT,
        run_count   INTEGER NOT NULL DEFAULT 0,
        next_fire   INTEGER
    );
    "#,
    // 4: a run's agents in creation order without a sort (tree, status, reports).
    r#"
    CREATE INDEX agents_run_order ON agents(run_id, created_at, id);
    DROP INDEX agents_run;
    "#,
    // 5: crash recovery. `steps` is each run's journal (see store/steps.rs);
    // `team_locks` lets one reflect loop per team run at a time.
    r#"
    CREATE TABLE steps (
        run_id      TEXT NOT NULL,
        key         TEXT NOT NULL,
        state       TEXT NOT NULL,
        agent_id    TEXT,
        data        TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        finished_at INTEGER,
        PRIMARY KEY (run_id, key)
    );
    CREATE TABLE team_locks (
        team   TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        pid    INTEGER NOT NULL,
        at     INTEGER NOT NULL
    );
    "#,
    // 6: a run whose result is one of its agents' names that agent instead of storing
    // the text twice (replies run to megabytes).
    r#"
    ALTER TABLE runs ADD COLUMN result_agent TEXT;
    "#,
    // 7: the repository this store belongs to (see store/identity.rs): one row.
    r#"
    CREATE TABLE repository (
        id          INTEGER PRIMARY KEY CHECK (id = 1),
        root        TEXT NOT NULL,
        root_commit TEXT,
        recorded_at INTEGER NOT NULL
    );
    "#,
    // 8: why a scheduled job's latest fire failed, for `schedule list`.
    r#"
    ALTER TABLE schedules ADD COLUMN last_error TEXT;
    "#,
    // 9: an agent step's final conversation, stored with its result, so a member's
    // next iteration (and a resumed run) continues it. Kept out of `data`, which every
    // step listing reads.
    r#"
    ALTER TABLE steps ADD COLUMN conversation TEXT;
    "#,
    // 10: scale-out (see store/remote.rs). `remote_results`: the result a worker sent
    // for an agent, recorded once per agent (and which worker ran it); `remote_events`:
    // events received from workers, each stored once however often it is delivered.
    r#"
    CREATE TABLE remote_results (
        run_id   TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        task_key TEXT NOT NULL,
        worker   TEXT NOT NULL,
        at       INTEGER NOT NULL,
        PRIMARY KEY (run_id, agent_id)
    );
    CREATE INDEX remote_results_key ON remote_results(run_id, task_key);
    CREATE TABLE remote_events (
        run_id TEXT NOT NULL,
        key    TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
    "#,
    // 11: every agent's final conversation, stored with its end in the same
    // transaction: a resume finishes a completed agent's step from it (no model call),
    // and a dead letter is retried from it.
    r#"
    CREATE TABLE agent_conversations (
        agent_id     TEXT PRIMARY KEY,
        conversation TEXT NOT NULL
    );
    "#,
    // 12: the audit chain (see store/audit.rs): each record holds the SHA-256 of the
    // one before it; `audit_head` the last record's number and hash.
    r#"
    CREATE TABLE audit (
        seq      INTEGER PRIMARY KEY,
        at       INTEGER NOT NULL,
        run_id   TEXT,
        agent_id TEXT,
        kind     TEXT NOT NULL,
        data     TEXT NOT NULL,
        prev     TEXT NOT NULL,
        hash     TEXT NOT NULL
    );
    CREATE INDEX audit_run ON audit(run_id, seq);
    CREATE TABLE audit_head (
        id   INTEGER PRIMARY KEY CHECK (id = 1),
        seq  INTEGER NOT NULL,
        hash TEXT NOT NULL
    );
    "#,
    // 13: dead letters (see store/dead.rs). `agents.fail_reason`: why an agent did not
    // end well, as its kind; `dead_letters`: the failed agents that are no longer dead
    // letters — dropped, or retried (with the step it redoes and the retry's overrides).
    r#"
    ALTER TABLE agents ADD COLUMN fail_reason TEXT;
    CREATE TABLE dead_letters (
        agent_id    TEXT PRIMARY KEY,
        run_id      TEXT NOT NULL,
        disposition TEXT NOT NULL,
        step        TEXT,
        overrides   TEXT,
        at          INTEGER NOT NULL
    );
    CREATE INDEX dead_letters_run ON dead_letters(run_id, disposition);
    "#,
    // 14: every model exchange, one row per agent turn (see store/exchanges.rs): the
    // fingerprint of the request as sent and the full reply, so a run can be replayed.
    r#"
    CREATE TABLE model_exchanges (
        seq        INTEGER PRIMARY KEY,
        run_id     TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        turn       INTEGER NOT NULL,
        request    TEXT NOT NULL,
        reply      TEXT NOT NULL,
        at         INTEGER NOT NULL
    );
    CREATE INDEX model_exchanges_run ON model_exchanges(run_id, seq);
    CREATE INDEX model_exchanges_agent ON model_exchanges(agent_id, turn);
    "#,
    // 15: who the process driving a run is beyond its pid (`process::identity`: the
    // boot and its start time), so a pid the kernel gave another process after the
    // driver died (after a reboot) does not keep the run from being resumed.
    r#"
    ALTER TABLE runs ADD COLUMN pid_identity TEXT;
    "#,
    // 16: when the audit chain began (ms): every agent stored since then has its
    // `spawn` record, which `audit verify` checks, so a chain emptied together with
    // its head no longer verifies as intact. A store that had a chain takes its first
    // record's time; one upgraded from before the chain, the time of this upgrade.
    r#"
    CREATE TABLE audit_origin (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        at INTEGER NOT NULL
    );
    INSERT INTO audit_origin (id, at) VALUES (1, COALESCE(
        (SELECT MIN(at) FROM audit),
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)));
    "#,
    // 17: a job's fire queued behind its running run (`--overlap queue`), kept until
    // it starts: a daemon stopped (or killed) meanwhile starts it when it comes back.
    r#"
    ALTER TABLE schedules ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
    "#,
    // 18: the run a job's fire started, from the fire's record until the run's end is
    // recorded on the job (the run's id is chosen before either is written): a daemon
    // that comes back finds the run of each job that was going, resumes it as that
    // job's (its end recorded on the job, the job busy meanwhile), and starts the run
    // of a fire that was recorded when it was killed before the run was created.
    r#"
    ALTER TABLE schedules ADD COLUMN active_run TEXT;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;
