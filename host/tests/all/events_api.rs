//! The library's event API: a running engine publishes every event it stores, in the
//! order of the log, as the same typed values (and the same JSON) the log reads back.

use crewbox::unstable::config::Config;
use crewbox::{Event, EventRecord, Mode, ModeChoice, Repository, RunReport, RunRequest, RunStatus};
use tokio_util::sync::CancellationToken;

use crate::support::repo::git_repo;

/// What one `single` run published and what its log holds afterwards.
struct Observed {
    report: RunReport,
    published: Vec<EventRecord>,
    stored: Vec<EventRecord>,
}

/// Runs `script` as a `single` run through the library, subscribed from the start.
async fn observe(script: &str) -> Observed {
    let dir = git_repo(|_| {});
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script).unwrap();
    let repo = Repository::with_config(
        dir.path().join("repo"),
        dir.path().join("state"),
        Config::default(),
    );
    let engine = repo.engine(CancellationToken::new()).await.unwrap();
    let mut events = engine.subscribe();
    let mut req = RunRequest::new("do it");
    req.mode = Some(ModeChoice::Mode(Mode::Single));
    req.script = Some(path);
    let report = engine.run(req).await.unwrap();
    let mut published = Vec::new();
    while let Ok(e) = events.try_recv() {
        published.push(e);
    }
    let stored = repo
        .watch()
        .await
        .unwrap()
        .expect("a store after a run")
        .page(Some(&report.run_id), 0, 1000)
        .await
        .unwrap();
    Observed {
        report,
        published,
        stored,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_see_what_the_log_stores_in_order() {
    let Observed {
        report,
        published: seen,
        stored,
    } = observe(
        "[[reply]]\nagent = \"agent\"\nturn = 1\n[[reply.tool_calls]]\nname = \"read_file\"\nargs = { path = \"notes.txt\" }\n\n[[reply]]\nagent = \"agent\"\nturn = 2\ntext = \"read it\"\n",
    )
    .await;
    assert_eq!(
        report.status,
        RunStatus::Completed,
        "{}",
        report.render_text()
    );
    assert_eq!(seen, stored, "published = stored, in log order");
    assert!(seen.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(matches!(
        seen.first().map(|e| &e.event),
        Some(Event::RunStarted {
            mode: Mode::Single,
            ..
        })
    ));
    assert!(seen.iter().any(
        |e| matches!(&e.event, Event::ToolCall { tool, ok: true, .. } if tool == "read_file")
    ));
    assert!(matches!(
        seen.last().map(|e| &e.event),
        Some(Event::RunFinished {
            status: RunStatus::Completed,
            ..
        })
    ));
    // The JSON a subscriber would print is the JSON `crewbox events` prints.
    let line = serde_json::to_value(&seen[0]).unwrap();
    assert_eq!(line["kind"], "run.started");
    assert_eq!(line["data"]["mode"], "single");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_never_see_a_secret_the_log_masks() {
    use crewbox::secrets as redact;
    // A key this process knows (as a configured provider's key would be); unique, so
    // no other test of the suite is affected by it being masked.
    let secret = format!("sk-test-{}", uuid::Uuid::now_v7().simple());
    redact::register(&secret);
    let Observed {
        published, stored, ..
    } = observe(&format!(
        "[[reply]]\nagent = \"agent\"\ntext = \"the key is {secret}\"\n"
    ))
    .await;
    let reply = published
        .iter()
        .find_map(|e| match &e.event {
            Event::ModelReply { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("the reply was published");
    assert_eq!(reply, format!("the key is {}", redact::MASK));
    for e in &published {
        let line = serde_json::to_string(e).unwrap();
        assert!(!line.contains(&secret), "published with the key: {line}");
    }
    assert_eq!(published, stored, "published = stored, masked alike");
}
