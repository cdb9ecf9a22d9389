//! The audit chain through the real binary: a run's decisions are recorded, each with
//! the SHA-256 of the record before it, and `crewbox audit verify` finds an edited
//! record, a deleted one and a truncated tail in a copy of the store.

use crate::support::repo::{bin, crewbox, git_repo, state_dir};
use crate::support::script::writes_then;

use std::path::{Path, PathBuf};

fn db(dir: &Path) -> PathBuf {
    state_dir(dir).join("crewbox.db")
}

fn verify(dir: &Path) -> (i32, serde_json::Value) {
    let out = bin(dir, &["audit", "verify", "--json"]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), v)
}

/// A pristine copy of the store of `dir`, every write of it in the main file.
fn pristine_copy(dir: &Path) -> PathBuf {
    rusqlite::Connection::open(db(dir))
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let pristine = dir.join("pristine.db");
    std::fs::copy(db(dir), &pristine).unwrap();
    pristine
}

/// Restores the pristine copy, then tampers with it through `sql`.
fn tampered(dir: &Path, pristine: &Path, sql: &str) -> (i32, serde_json::Value) {
    std::fs::copy(pristine, db(dir)).unwrap();
    let conn = rusqlite::Connection::open(db(dir)).unwrap();
    conn.execute_batch(sql).unwrap();
    drop(conn);
    verify(dir)
}

#[test]
fn a_runs_decisions_are_chained_and_tampering_is_found() {
    let dir = git_repo(|_| {});
    let script = writes_then("agent", "one.txt", "one\n", 0, "wrote one.txt");
    let (out, report) = crewbox(
        dir.path(),
        &script,
        &["run", "write one", "--mode", "single"],
    );
    assert!(out.status.success(), "{report}");
    let run = report["run_id"].as_str().unwrap();

    let out = bin(dir.path(), &["audit", run, "--json"]);
    assert!(out.status.success());
    let records: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    for kind in ["run.started", "dispatch", "spawn", "run.finished"] {
        assert!(kinds.contains(&kind), "{kind} not in {kinds:?}");
    }
    let spawn = records.iter().find(|r| r["kind"] == "spawn").unwrap();
    assert_eq!(spawn["data"]["name"], "agent");
    assert!(
        spawn["data"]["caps"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{spawn}"
    );
    // Each record links to the one before it.
    let all: Vec<serde_json::Value> =
        serde_json::from_slice(&bin(dir.path(), &["audit", "--json"]).stdout).unwrap();
    for pair in all.windows(2) {
        assert_eq!(pair[1]["prev"], pair[0]["hash"], "{pair:?}");
        assert_eq!(
            pair[1]["seq"].as_i64().unwrap(),
            pair[0]["seq"].as_i64().unwrap() + 1
        );
    }
    let n = all.len() as i64;
    assert!(n >= 4, "{all:?}");

    let (code, v) = verify(dir.path());
    assert_eq!((code, v["status"].as_str()), (0, Some("intact")), "{v}");
    assert_eq!(v["records"], n);

    let pristine = pristine_copy(dir.path());

    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "UPDATE audit SET data = '{\"mode\":\"crew\"}' WHERE seq = 2;",
    );
    assert_eq!(
        (code, &v["status"]),
        (1, &serde_json::json!("broken-link")),
        "{v}"
    );
    assert_eq!(v["seq"], 2);

    let (code, v) = tampered(dir.path(), &pristine, "DELETE FROM audit WHERE seq = 2;");
    assert_eq!((code, &v["status"]), (1, &serde_json::json!("gap")), "{v}");
    assert_eq!(
        (v["seq"].as_i64(), v["expected"].as_i64()),
        (Some(3), Some(2))
    );

    let (code, v) = tampered(
        dir.path(),
        &pristine,
        &format!("DELETE FROM audit WHERE seq > {};", n - 2),
    );
    assert_eq!(
        (code, &v["status"]),
        (1, &serde_json::json!("truncated")),
        "{v}"
    );
    assert_eq!(
        (v["last"].as_i64(), v["head"].as_i64()),
        (Some(n - 2), Some(n))
    );

    // A value of another type (a blob where text was) or an id made empty (the hash
    // reads a missing id as empty) is an edit, named as one; verify did not stop with
    // a store error or call it intact.
    for sql in [
        "UPDATE audit SET kind = CAST(kind AS BLOB) WHERE seq = 3;",
        "UPDATE audit SET at = 'soon' WHERE seq = 3;",
        "UPDATE audit SET agent_id = '' WHERE seq = 3 AND agent_id IS NULL;
         UPDATE audit SET run_id = '' WHERE seq = 3 AND run_id IS NULL;
         UPDATE audit SET agent_id = '' WHERE seq = 3;",
    ] {
        let (code, v) = tampered(dir.path(), &pristine, sql);
        assert_eq!(
            (code, &v["status"], v["seq"].as_i64()),
            (1, &serde_json::json!("broken-link"), Some(3)),
            "{sql}: {v}"
        );
    }
    // The head removed: said so, not "ends at record N, but its head is record N".
    let (code, v) = tampered(dir.path(), &pristine, "DELETE FROM audit_head;");
    assert_eq!(
        (code, &v["status"], v["last"].as_i64()),
        (1, &serde_json::json!("head-missing"), Some(n)),
        "{v}"
    );

    // A record rewritten with a matching hash of its own still breaks the next link.
    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "UPDATE audit SET hash = 'f00d' WHERE seq = 2;",
    );
    assert_eq!(code, 1, "{v}");

    // The untouched copy verifies again.
    std::fs::copy(&pristine, db(dir.path())).unwrap();
    let (code, _) = verify(dir.path());
    assert_eq!(code, 0);
    let text = bin(dir.path(), &["audit", "verify"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("intact"));
}

/// What the chain says is checked against the store's facts: a chain emptied together
/// with its head leaves agents no record names (it verified as "intact: 0 records"
/// before), the record of when the chain began may not go, and a merge result edited
/// in `steps` (what a resume reads back as the truth) no longer matches its `merge`
/// record.
#[test]
fn a_chain_emptied_or_a_merge_result_edited_is_found() {
    let (dir, run, _) =
        crate::replay::recorded_pair_run("broadcast", &crate::replay::both_write(0));
    let (code, v_intact) = verify(dir.path());
    assert_eq!(
        (code, v_intact["status"].as_str()),
        (0, Some("intact")),
        "{v_intact}"
    );
    let pristine = pristine_copy(dir.path());
    let conn = rusqlite::Connection::open(&pristine).unwrap();
    let merges: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM steps WHERE key LIKE 'merge/%' AND state = 'done'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(merges > 0, "the run merged nothing");
    drop(conn);

    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "DELETE FROM audit; DELETE FROM audit_head;",
    );
    assert_eq!(
        (code, &v["status"], v["run"].as_str()),
        (1, &serde_json::json!("unrecorded"), Some(run.as_str())),
        "{v}"
    );
    for sql in [
        "DELETE FROM audit; DELETE FROM audit_head; DELETE FROM audit_origin;",
        "DROP TABLE audit_origin;",
    ] {
        let (code, v) = tampered(dir.path(), &pristine, sql);
        assert_eq!(
            (code, &v["status"]),
            (1, &serde_json::json!("origin-missing")),
            "{sql}: {v}"
        );
    }
    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "UPDATE steps SET data = '{\"merged\":[\"forged\"]}'
         WHERE rowid = (SELECT MIN(rowid) FROM steps WHERE key LIKE 'merge/%');",
    );
    assert_eq!(
        (code, &v["status"], v["run"].as_str()),
        (1, &serde_json::json!("step-edited"), Some(run.as_str())),
        "{v}"
    );
    assert!(
        v["step"].as_str().is_some_and(|s| s.starts_with("merge/")),
        "{v}"
    );

    // The origin is no hash's part: moved later, it hid an emptied chain ("intact: 0
    // records"); it may lie neither in the future nor after a run the chain recorded.
    for sql in [
        "DELETE FROM audit; DELETE FROM audit_head; UPDATE audit_origin SET at = at + 100000000000;",
        "UPDATE audit_origin SET at = (SELECT MAX(at) FROM audit WHERE kind = 'run.started') + 1;",
    ] {
        let (code, v) = tampered(dir.path(), &pristine, sql);
        assert_eq!(
            (code, &v["status"]),
            (1, &serde_json::json!("origin-moved")),
            "{sql}: {v}"
        );
    }
    // Facts the chain names, removed with it or alone.
    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "DELETE FROM audit; DELETE FROM audit_head; DELETE FROM agents;",
    );
    assert_eq!(
        (code, &v["status"], v["run"].as_str()),
        (1, &serde_json::json!("run-unrecorded"), Some(run.as_str())),
        "{v}"
    );
    // A whole run removed, its agents with it (it left no agent to miss), or every
    // run; a table dropped.
    for sql in [
        "DELETE FROM agents; DELETE FROM runs;",
        "DELETE FROM agents; DELETE FROM runs; DELETE FROM steps; DELETE FROM events;",
    ] {
        let (code, v) = tampered(dir.path(), &pristine, sql);
        assert_eq!(
            (code, &v["status"], v["run"].as_str()),
            (1, &serde_json::json!("run-missing"), Some(run.as_str())),
            "{sql}: {v}"
        );
    }
    for table in ["audit", "audit_head", "agents"] {
        let (code, v) = tampered(dir.path(), &pristine, &format!("DROP TABLE {table};"));
        assert_eq!(
            (code, &v["status"], v["table"].as_str()),
            (1, &serde_json::json!("table-missing"), Some(table)),
            "{table}: {v}"
        );
    }
    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "DELETE FROM agents WHERE rowid = (SELECT MAX(rowid) FROM agents);",
    );
    assert_eq!(
        (code, &v["status"]),
        (1, &serde_json::json!("fact-missing")),
        "{v}"
    );
    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "UPDATE audit_head SET hash = 'beef';",
    );
    assert_eq!(
        (code, &v["status"]),
        (1, &serde_json::json!("head-edited")),
        "{v}"
    );
    // A forged agent dated before the origin, in a run the chain recorded.
    let (code, v) = tampered(
        dir.path(),
        &pristine,
        "INSERT INTO agents (id, run_id, parent_id, name, role, task, caps, depth, state, created_at)
         SELECT 'a-forged', run_id, NULL, 'ghost', 'executor', 'x', '[]', 0, 'completed', 1
         FROM agents LIMIT 1;",
    );
    assert_eq!(
        (code, &v["status"], v["agent"].as_str()),
        (1, &serde_json::json!("unrecorded"), Some("a-forged")),
        "{v}"
    );

    // What no check inside the file can see: the chain emptied with its head and the
    // origin moved to after the last run (and before now). The head an earlier verify
    // printed, kept elsewhere, finds it; as it finds a chain rewritten with hashes of
    // its own.
    let head = v_intact["head"].as_str().unwrap().to_owned();
    let anchored = |sql: &str| {
        std::fs::copy(&pristine, db(dir.path())).unwrap();
        let conn = rusqlite::Connection::open(db(dir.path())).unwrap();
        conn.execute_batch(sql).unwrap();
        drop(conn);
        let (code, plain) = verify(dir.path());
        let out = bin(
            dir.path(),
            &["audit", "verify", "--json", "--anchor", head.as_str()],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (code, plain, out.status.code().unwrap(), v)
    };
    let (code, plain, anchored_code, v) = anchored(
        "DELETE FROM audit; DELETE FROM audit_head;
         UPDATE audit_origin SET at = MAX((SELECT MAX(created_at) FROM runs),
                                          (SELECT MAX(created_at) FROM agents)) + 1;",
    );
    assert_eq!((code, plain["records"].as_i64()), (0, Some(0)), "{plain}");
    assert_eq!(
        (anchored_code, &v["status"], v["found"].is_null()),
        (1, &serde_json::json!("anchor-lost"), true),
        "{v}"
    );
    let seq: i64 = head.split_once(':').unwrap().0.parse().unwrap();
    let (_, _, anchored_code, v) = anchored(&format!(
        "UPDATE audit SET hash = '{}' WHERE seq = {seq}; UPDATE audit_head SET hash = '{}';",
        "ab".repeat(32),
        "ab".repeat(32)
    ));
    // (The forged last hash is a broken link before it is a lost anchor.)
    assert_eq!(anchored_code, 1, "{v}");

    std::fs::copy(&pristine, db(dir.path())).unwrap();
    assert_eq!(verify(dir.path()).0, 0);
    // The chain grown by a later run still holds the anchored record: what anchoring
    // is for.
    let script = writes_then("agent", "later.txt", "later\n", 0, "wrote later.txt");
    let (out, report) = crewbox(dir.path(), &script, &["run", "later", "--mode", "single"]);
    assert!(out.status.success(), "{report}");
    let out = bin(dir.path(), &["audit", "verify", "--anchor", head.as_str()]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("intact") && !text.contains(&head), "{text}");
    let bad = bin(dir.path(), &["audit", "verify", "--anchor", "3:nothex"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

/// A store file SQLite finds damaged is not vouched for: the chain read back from it
/// verified as intact while `status` failed on the same file.
#[test]
fn a_damaged_store_file_is_not_called_intact() {
    let (dir, _run, _) =
        crate::replay::recorded_pair_run("broadcast", &crate::replay::both_write(0));
    let pristine = pristine_copy(dir.path());
    let mut bytes = std::fs::read(&pristine).unwrap();
    let page = 4096;
    assert!(bytes.len() > 6 * page, "{} bytes", bytes.len());
    // A page in the middle of the file, past the schema: its b-tree header overwritten.
    let at = (bytes.len() / page / 2) * page;
    bytes[at..at + 64].fill(0xff);
    std::fs::write(db(dir.path()), &bytes).unwrap();
    let out = bin(dir.path(), &["audit", "verify", "--json"]);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{v} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["status"], "store-damaged", "{v}");
}
