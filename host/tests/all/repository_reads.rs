//! The typed reads of `Repository` that `schedule list`, `health` and `team list/show`
//! print, on a real git repository in a temp dir whose store the real binary wrote.

use std::path::Path;

use crate::support::repo::{bin, git_repo};
use crewbox::Repository;
use crewbox::types::TeamSource;

fn open(dir: &Path) -> Repository {
    Repository::open(
        Some(dir.join("repo").as_path()),
        Some(dir.join("state").as_path()),
    )
    .unwrap()
}

fn ok(dir: &Path, args: &[&str]) {
    let out = bin(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn schedules_and_health_read_the_jobs_the_binary_stored() {
    let dir = git_repo(|_| {});
    // The user's config (the binary's `XDG_CONFIG_HOME`): a provider for the jobs to name.
    std::fs::create_dir_all(dir.path().join("config/crewbox")).unwrap();
    let script = dir.path().join("s.toml");
    std::fs::write(&script, "[[reply]]\nrepeat = true\ntext = \"ok\"\n").unwrap();
    std::fs::write(
        dir.path().join("config/crewbox/config.toml"),
        format!(
            "default_provider = \"scripted\"\n[providers.scripted]\nkind = \"scripted\"\n\
             script = {script:?}\n"
        ),
    )
    .unwrap();
    let repo = open(dir.path());
    // Nothing has run here: empty answers, and no store is created by reading.
    assert!(repo.schedules().await.unwrap().is_empty());
    let empty = repo.health().await.unwrap();
    assert_eq!(empty.store, None);
    assert_eq!((empty.size_bytes, empty.active_jobs()), (0, 0));
    let db = repo.state_dir().join(crewbox::unstable::store::DB_FILE);
    assert!(!db.exists(), "reading created {}", db.display());

    ok(
        dir.path(),
        &[
            "schedule", "add", "--every", "5m", "--name", "nightly", "--mode", "single", "tidy up",
        ],
    );
    ok(
        dir.path(),
        &[
            "schedule",
            "add",
            "--every",
            "1h",
            "--name",
            "hourly",
            "--mode",
            "single",
            "look around",
        ],
    );
    ok(dir.path(), &["schedule", "pause", "hourly"]);

    let jobs = repo.schedules().await.unwrap();
    let names: Vec<(&str, &str, bool)> = jobs
        .iter()
        .map(|j| (j.name.as_str(), j.prompt.as_str(), j.paused))
        .collect();
    assert_eq!(
        names,
        [
            ("hourly", "look around", true),
            ("nightly", "tidy up", false)
        ]
    );
    let nightly = &jobs[1];
    assert_eq!((nightly.run_count, nightly.last_fire), (0, None));
    let next = nightly.next_fire.expect("an every-5m job has a next fire");

    let health = repo.health().await.unwrap();
    assert_eq!(health.jobs, jobs);
    assert_eq!(health.active_jobs(), 1, "the paused job is not active");
    assert_eq!(
        health.next_fire(),
        Some(next),
        "the paused job's fire is not next"
    );
    assert_eq!((health.unfinished, health.interrupted), (0, 0));
    assert_eq!((health.agents.running, health.agents.queued), (0, 0));
    let store = health.store.expect("the binary created the store");
    assert!(store.starts_with(repo.state_dir()), "{}", store.display());
    // The size of the database file when it was read: at least its first page, and no
    // more than the file and its write-ahead log hold now (a checkpoint of the other
    // connections may have moved pages from one into the other since).
    let len = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let wal = store.with_file_name(format!(
        "{}-wal",
        store.file_name().unwrap().to_string_lossy()
    ));
    assert!(health.size_bytes >= 512, "{}", health.size_bytes);
    assert!(
        health.size_bytes <= len(&store) + len(&wal),
        "{} > {} + {}",
        health.size_bytes,
        len(&store),
        len(&wal)
    );
}

#[tokio::test]
async fn teams_are_the_teams_in_force_with_source_and_members() {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(
            work.join(".crewbox/teams/duo.toml"),
            "mode = \"broadcast\"\n\n[[members]]\nname = \"alice\"\nrole = \"architect\"\n\n\
             [[members]]\nname = \"bob\"\nrole = \"tester\"\n",
        )
        .unwrap();
        std::fs::write(work.join(".crewbox/teams/broken.toml"), "mode = [").unwrap();
    });
    let found = open(dir.path()).teams().await.unwrap();
    let duo = found
        .teams
        .iter()
        .find(|t| t.name == "duo")
        .expect("the repository's team is listed");
    assert!(
        matches!(&duo.source, TeamSource::Repo(p) if p.ends_with("duo.toml")),
        "{:?}",
        duo.source
    );
    let members: Vec<(&str, &str)> = duo
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.role.as_str()))
        .collect();
    assert_eq!(members, [("alice", "architect"), ("bob", "tester")]);
    assert!(found.find("duo").is_ok());
    assert!(found.find("ghost").is_err());
    // The broken file is reported, not listed, and hides nothing.
    assert!(found.teams.iter().all(|t| t.name != "broken"));
    assert!(
        found
            .problems
            .iter()
            .any(|p| p.to_string().contains("broken.toml")),
        "{:?}",
        found.problems
    );
}

#[tokio::test]
async fn config_in_force_is_what_crewbox_config_prints() {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox")).unwrap();
        std::fs::write(work.join(".crewbox/config.toml"), "max_concurrent = 1\n").unwrap();
        std::fs::write(
            work.join(".mcp.json"),
            r#"{"mcpServers": {"docs": {"command": "docs-server"}}}"#,
        )
        .unwrap();
    });
    let repo = open(dir.path());
    let cfg = repo.config_in_force();
    assert_eq!(cfg.repository, repo.root());
    assert_eq!(cfg.state_dir, repo.state_dir());
    assert!(!cfg.trust.is_trusted());
    // Untrusted: the repository's `.mcp.json` server is listed, and not in force.
    let servers: Vec<(&str, crewbox::types::RepoServerState)> = cfg
        .repo_mcp
        .iter()
        .map(|r| (r.name.as_str(), r.state))
        .collect();
    assert_eq!(
        servers,
        [("docs", crewbox::types::RepoServerState::Untrusted)]
    );
    assert!(cfg.mcp_servers.iter().all(|s| s.name != "docs"));
    assert_eq!(
        cfg.repo_rules.first().map(|r| r.key),
        Some("default_provider")
    );
    // The repository's own value is not in force.
    let max = cfg
        .settings
        .iter()
        .find(|s| s.key == "max_concurrent")
        .unwrap();
    assert_eq!(max.source, crewbox::types::Source::Default);

    // The binary prints the same repository facts.
    let out = bin(dir.path(), &["config", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        printed["mcp"]["repository"],
        serde_json::to_value(&cfg.repo_mcp).unwrap()
    );
    assert_eq!(
        printed["repo_rules"],
        serde_json::to_value(&cfg.repo_rules).unwrap()
    );
    assert_eq!(printed["trust"], serde_json::to_value(cfg.trust).unwrap());
    assert_eq!(
        printed["ignored"],
        serde_json::to_value(&cfg.ignored).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_pages_through_a_runs_events_as_the_log_holds_them() {
    use crewbox::unstable::config::Config;
    use crewbox::{Mode, ModeChoice, RunRequest, RunStatus};
    let dir = git_repo(|_| {});
    let script = dir.path().join("s.toml");
    std::fs::write(
        &script,
        "[[reply]]\nagent = \"agent\"\nturn = 1\n[[reply.tool_calls]]\nname = \"read_file\"\n\
         args = { path = \"notes.txt\" }\n\n[[reply]]\nagent = \"agent\"\nturn = 2\ntext = \"done\"\n",
    )
    .unwrap();
    let repo = Repository::with_config(
        dir.path().join("repo"),
        dir.path().join("state"),
        Config::default(),
    );
    // Nothing has run here: nothing to watch, and watching creates no store.
    assert!(repo.watch().await.unwrap().is_none());
    assert!(
        !dir.path()
            .join("state")
            .join(crewbox::unstable::store::DB_FILE)
            .exists()
    );

    let engine = repo
        .engine(tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    let mut published = engine.subscribe();
    let mut req = RunRequest::new("read the notes");
    req.mode = Some(ModeChoice::Mode(Mode::Single));
    req.script = Some(script);
    let report = engine.run(req).await.unwrap();
    assert_eq!(
        report.status,
        RunStatus::Completed,
        "{}",
        report.render_text()
    );
    let run = report.run_id.clone();

    let watch = repo.watch().await.unwrap().expect("a store after a run");
    // What the engine published as it stored it, in the log's order.
    let mut all = Vec::new();
    while let Ok(e) = published.try_recv() {
        all.push(e);
    }
    assert!(all.len() > 3, "a run stores several events: {all:?}");
    // The engine's own watch reads the same log.
    assert_eq!(
        engine.watch().page(Some(&run), 0, 10_000).await.unwrap(),
        all
    );
    // Pages of two, each after the last one read, are the log in order, nothing twice.
    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let page = watch.page(Some(&run), after, 2).await.unwrap();
        assert!(page.len() <= 2);
        paged.extend(page.iter().cloned());
        match page.last() {
            Some(e) if page.len() == 2 => after = e.seq,
            _ => break,
        }
    }
    assert_eq!(paged, all);
    assert_eq!(watch.last_seq().await.unwrap(), all.last().unwrap().seq);
    assert!(
        watch
            .page(None, watch.last_seq().await.unwrap(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The run as the user names it, and the rows a watcher lists.
    assert_eq!(watch.run(&run.as_str()[..8]).await.unwrap().id, run);
    assert!(watch.run("r-nothing-like-it").await.unwrap_err().is_usage());
    let rows = watch.runs(10).await.unwrap();
    assert_eq!(rows.iter().map(|r| &r.id).collect::<Vec<_>>(), [&run]);
    assert_eq!(watch.agents(&run).await.unwrap().len(), 1);
    let latest = watch
        .latest(&run, &[crewbox::EventKind::ToolCall], 10)
        .await
        .unwrap();
    assert_eq!(latest.len(), 1, "{latest:?}");
}
