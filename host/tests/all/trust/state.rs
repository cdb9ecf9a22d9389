//! State never comes from a repository, and a store serves only its own repository.

use super::*;
use crate::support::repo::state_dir;

/// Runs `f` to its end on a runtime of its own thread (the tests' runtime serves the
/// HTTP servers).
fn on_own_runtime(f: impl std::future::Future<Output = ()> + Send) {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(f)
        })
        .join()
        .unwrap()
    });
}

/// A store as an attacker would ship it: one interrupted run whose payload is a
/// script running a shell command.
fn shipped_store(state: &Path, repo: &Path, marker: &str, prompt: &str) {
    let script = repo.join(".crewbox/pwn.toml");
    write(&script, &shell_script(marker));
    on_own_runtime(async {
        let store = crewbox::unstable::store::Store::open(state).unwrap();
        let spec = json!({
            "request": {"prompt": prompt, "mode": "single", "script": script},
            "provider": "scripted",
        });
        let mut run =
            crewbox::unstable::store::RunRecord::started(crewbox::Mode::Single, prompt, spec);
        run.pid = None;
        store.insert_run(&run).await.unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_state_dir_is_ignored_and_its_shipped_store_never_resumes() {
    let fx = Fx::new(|work, t| {
        write(
            &work.join(".crewbox/config.toml"),
            "state_dir = \"state\"\n",
        );
        let state = work.join(".crewbox/state");
        shipped_store(&state, work, &t.marker, "shipped payload");
        // Also where a per-repository directory under that base would be.
        shipped_store(
            &crate::support::repo::repo_state_dir(&state, work),
            work,
            &t.marker,
            "shipped payload",
        );
    })
    .await;
    let mut outputs = Vec::new();
    for trusted in [false, true] {
        if trusted {
            fx.trust().await;
        }
        let health = fx.run(&["health", "--json"]).await;
        assert!(health.status.success(), "{}", text(&health));
        let h = json_of(&health);
        assert_eq!(h["runs"]["interrupted"], 0, "{h}");
        // `health` opens no store where nothing ran (it never creates one); the shipped
        // stores exist, so any path shown would be one of them unless it is ours.
        if let Some(path) = h["store"]["path"].as_str() {
            assert!(
                Path::new(path).starts_with(state_dir(fx.home())),
                "{path} is not the user's own state"
            );
        }
        let resume = fx.run(&["resume", "--json"]).await;
        assert!(resume.status.success(), "{}", text(&resume));
        assert!(!String::from_utf8_lossy(&resume.stdout).contains("shipped"));
        if trusted {
            assert!(
                stderr(&health).contains("`state_dir` is ignored"),
                "{}",
                text(&health)
            );
        }
        outputs.extend([health, resume]);
    }
    assert!(fx.legit.requests().is_empty());
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_serves_only_the_repository_it_belongs_to() {
    let fx = Fx::new(|_, _| {}).await;
    // Another project's store, with an unfinished run, where this repository's
    // state would be (as when two repositories were pointed at one directory).
    let other = fx.home().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other_root = crewbox::unstable::trust::RepoRoot::discover(&other).unwrap();
    let ours = state_dir(fx.home());
    {
        on_own_runtime(async {
            let store =
                crewbox::unstable::store::Store::open_for(&ours, true, &other_root).unwrap();
            let mut run = crewbox::unstable::store::RunRecord::started(
                crewbox::Mode::Single,
                "the other project's secret prompt",
                json!({"request": {"prompt": "the other project's secret prompt"}, "provider": "claude"}),
            );
            run.pid = None;
            store.insert_run(&run).await.unwrap();
        });
    }
    assert_ne!(
        crate::support::repo::repo_state_dir(&fx.home().join("state"), &other),
        ours,
        "each repository has its own directory under the base"
    );
    let mut outputs = Vec::new();
    for trusted in [false, true] {
        if trusted {
            fx.trust().await;
        }
        for args in [
            &["resume", "--json"][..],
            &["status", "--json"],
            &["worktree", "prune", "--json"],
            &["run", "hello", "--mode", "single", "--json"],
        ] {
            let out = fx.run(args).await;
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
            let err = stderr(&out);
            assert!(
                err.contains("belongs to the repository at")
                    && err.contains(other_root.path().to_str().unwrap()),
                "{args:?}: {err}"
            );
            assert!(!String::from_utf8_lossy(&out.stdout).contains("secret prompt"));
            outputs.push(out);
        }
    }
    assert!(
        fx.legit.requests().is_empty(),
        "the other project's prompt was sent"
    );
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}
