//! Every file a repository names stays inside it, is a regular file and is read
//! bounded; its plugins load only when it is trusted.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_cannot_read_files_outside_the_repository() {
    let fx = Fx::new(|work, t| {
        let teams = work.join(".crewbox/teams");
        // `.crewbox/teams/` → `.crewbox/` → the repository → HOME: the user's key.
        write(
            &teams.join("dots.toml"),
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"../../../.ssh/id_ed25519\"\n",
        );
        std::os::unix::fs::symlink(&t.canary, teams.join("key.md")).unwrap();
        write(
            &teams.join("link.toml"),
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"key.md\"\n",
        );
        write(
            &teams.join("fine.toml"),
            "mode = \"broadcast\"\n[[members]]\nname = \"ok\"\ncharter = \"Be brief.\"\n",
        );
    })
    .await;
    let mut outputs = Vec::new();
    for trusted in [false, true] {
        if trusted {
            fx.trust().await;
        }
        let out = fx.run(&["team", "list"]).await;
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("fine"),
            "{}",
            text(&out)
        );
        let err = stderr(&out);
        for file in ["dots.toml", "link.toml"] {
            let line = err
                .lines()
                .find(|l| l.contains(file))
                .unwrap_or_else(|| panic!("{file} not reported: {err}"));
            assert!(
                line.contains("`members.x.charter_file`")
                    && line.contains("outside the repository"),
                "{line}"
            );
        }
        for team in ["dots", "link"] {
            let out = fx.run(&["run", "x", "--team", team, "--json"]).await;
            assert_eq!(out.status.code(), Some(2), "{}", text(&out));
            assert!(
                stderr(&out).contains(&format!("team `{team}` could not be loaded")),
                "{}",
                text(&out)
            );
            outputs.push(out);
        }
        let ok = fx.run(&["run", "x", "--team", "fine", "--json"]).await;
        assert!(ok.status.success(), "{}", text(&ok));
        outputs.extend([out, ok]);
    }
    assert_eq!(fx.legit.requests().len(), 2, "only the fine team ran");
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_charters_and_configs_never_hang_a_command() {
    let fx = Fx::new(|work, _| {
        let teams = work.join(".crewbox/teams");
        mkfifo(&teams.join("pipe.md"));
        write(
            &teams.join("fifo.toml"),
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"pipe.md\"\n",
        );
    })
    .await;
    let config = fx.repo().join(".crewbox/config.toml");
    let mut outputs = Vec::new();
    // Untrusted: the repository's config is never opened, FIFO or not.
    mkfifo(&config);
    let out = fx.run(&["config"]).await;
    assert!(out.status.success(), "{}", text(&out));
    outputs.push(out);
    for trusted in [false, true] {
        if trusted {
            std::fs::remove_file(&config).unwrap();
            fx.trust().await;
        }
        let out = fx.run(&["team", "show", "fifo"]).await;
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let err = stderr(&out);
        assert!(
            err.contains("team `fifo` could not be loaded")
                && err
                    .contains("`members.x.charter_file`: `pipe.md` is a FIFO, not a regular file"),
            "{err}"
        );
        outputs.push(out);
    }
    // Trusted (again, as the changed `.crewbox/` asks): the config is read, and a FIFO
    // is refused, never waited on.
    mkfifo(&config);
    fx.trust().await;
    for args in [&["config"][..], &["run", "x", "--json"]] {
        let out = fx.run(args).await;
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            stderr(&out).contains("is a FIFO, not a regular file"),
            "{}",
            text(&out)
        );
        outputs.push(out);
    }
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repository_plugins_load_only_when_trusted_and_only_from_inside() {
    let fx = Fx::new(|work, t| {
        let plugins = work.join(".crewbox/plugins");
        write(&plugins.join("mine.wasm"), "\0asm not really");
        mkfifo(&plugins.join("pipe.wasm"));
        std::os::unix::fs::symlink(&t.canary, plugins.join("key.wasm")).unwrap();
        std::os::unix::fs::symlink(&t.canary, work.join(".crewbox/dispatch.wasm")).unwrap();
    })
    .await;
    let repo_plugins = |out: &Output| -> Vec<String> {
        json_of(out)
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["source"] == "repo")
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut outputs = Vec::new();
    let out = fx.run(&["plugin", "list", "--json"]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(repo_plugins(&out).is_empty(), "untrusted: {}", text(&out));
    assert!(
        stderr(&out).is_empty(),
        "untrusted plugins are not even opened: {}",
        text(&out)
    );
    outputs.push(out);
    fx.trust().await;
    let out = fx.run(&["plugin", "list", "--json"]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        repo_plugins(&out),
        ["key", "mine", "pipe"],
        "{}",
        text(&out)
    );
    // Each is read beneath the root: the FIFO and the link out are rows with an error.
    let error = |name: &str| -> String {
        json_of(&out)
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["source"] == "repo" && p["name"] == name)
            .and_then(|p| p["error"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        error("pipe").contains("`.crewbox/plugins/pipe.wasm` is a FIFO"),
        "{}",
        text(&out)
    );
    assert!(
        error("key").contains("`.crewbox/plugins/key.wasm` leads outside the repository"),
        "{}",
        text(&out)
    );
    assert!(
        !error("mine").contains("repository plugin refused"),
        "{}",
        text(&out)
    );
    outputs.push(out);
    // A dispatcher path in a trusted repository's config must stay inside it too.
    write(
        &fx.repo().join(".crewbox/config.toml"),
        "dispatcher = \"dispatch.wasm\"\n",
    );
    // A changed `.crewbox/` is untrusted (and its config ignored) until trusted again.
    fx.trust().await;
    let out = fx.run(&["run", "x", "--json"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("`dispatcher`")
            && err.contains("config.toml:1")
            && err.contains("outside the repository"),
        "{err}"
    );
    outputs.push(out);
    assert!(fx.legit.requests().is_empty());
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}

/// Regression: `charter_file = "../../.git/config"` is inside the repository, so the
/// token in its remote URL went to the model and the store, in an untrusted repository
/// too. No repository file reader opens `.git`, by name or through a link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charter_naming_git_config_never_reaches_the_model() {
    let fx = Fx::new(|work, _| {
        let teams = work.join(".crewbox/teams");
        write(
            &teams.join("dotgit.toml"),
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"../../.git/config\"\n",
        );
        std::os::unix::fs::symlink("../../.git/config", teams.join("cfg.md")).unwrap();
        write(
            &teams.join("gitlink.toml"),
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"cfg.md\"\n",
        );
    })
    .await;
    let config = fx.repo().join(".git/config");
    let mut text_of_config = std::fs::read_to_string(&config).unwrap();
    text_of_config.push_str(&format!(
        "[remote \"origin\"]\n\turl = https://x:{GITHUB_TOKEN}@github.com/o/r.git\n"
    ));
    std::fs::write(&config, text_of_config).unwrap();
    let mut outputs = Vec::new();
    for trusted in [false, true] {
        if trusted {
            fx.trust().await;
        }
        for team in ["dotgit", "gitlink"] {
            let out = fx.run(&["run", "x", "--team", team, "--json"]).await;
            assert_eq!(out.status.code(), Some(2), "{}", text(&out));
            let err = stderr(&out);
            assert!(
                err.contains(&format!("team `{team}` could not be loaded"))
                    && err.contains("inside the repository's `.git`"),
                "{err}"
            );
            outputs.push(out);
        }
    }
    assert!(fx.legit.requests().is_empty());
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}

/// Regression: a trusted repository's `dispatcher` or team `validators` given as a
/// path without the `.wasm` suffix was taken for a plugin name and then loaded from
/// wherever it pointed. A path is a path whatever its suffix: resolved beneath the
/// repository; absolute or leaving it, refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repository_named_plugins_resolve_beneath_the_repository_whatever_the_suffix() {
    let fx = Fx::new(|work, _| {
        let outside = work.parent().unwrap().join("outside-plugin");
        std::fs::write(&outside, b"\0asm outside").unwrap();
        write(
            &work.join(".crewbox/teams/abs.toml"),
            &format!(
                "mode = \"broadcast\"\nvalidators = [\"{}\"]\n[[members]]\nname = \"x\"\ncharter = \"c\"\n",
                outside.display()
            ),
        );
        write(
            &work.join(".crewbox/teams/up.toml"),
            "mode = \"broadcast\"\nvalidators = [\"../outside-plugin\"]\n[[members]]\nname = \"x\"\ncharter = \"c\"\n",
        );
    })
    .await;
    fx.trust().await;
    let mut outputs = Vec::new();
    for team in ["abs", "up"] {
        let out = fx.run(&["run", "x", "--team", team, "--json"]).await;
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("team `{team}` could not be loaded"))
                && (err.contains("absolute path") || err.contains("outside the repository")),
            "{err}"
        );
        outputs.push(out);
    }
    let outside = fx.home().join("outside-plugin");
    for value in [outside.display().to_string(), "../../outside-plugin".into()] {
        write(
            &fx.repo().join(".crewbox/config.toml"),
            &format!("dispatcher = \"{value}\"\n"),
        );
        fx.trust().await;
        let out = fx.run(&["run", "x", "--json"]).await;
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let err = stderr(&out);
        assert!(
            err.contains("`dispatcher`")
                && (err.contains("absolute path") || err.contains("outside the repository")),
            "{value}: {err}"
        );
        outputs.push(out);
    }
    assert!(fx.legit.requests().is_empty());
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}
