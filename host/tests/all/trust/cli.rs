//! The one-line notice on a terminal, `crewbox trust` and `crewbox init`.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_repository_says_once_on_a_terminal_what_it_ignored() {
    let fx = Fx::new(|work, _| {
        write(
            &work.join(".crewbox/config.toml"),
            "default_mode = \"crew\"\n",
        );
        write(&work.join(".crewbox/teams/t.toml"), FULL_REVIEW);
    })
    .await;
    let notice = "this repository is not trusted";
    // Not a terminal, or JSON: never.
    let plain = fx.run(&["team", "list"]).await;
    assert!(!stderr(&plain).contains(notice), "{}", text(&plain));
    let on_tty = |args: &'static [&'static str]| {
        let mut c = fx.cmd(args);
        tokio::task::spawn_blocking(move || stderr_on_a_terminal(&mut c))
    };
    assert!(
        !on_tty(&["team", "list", "--json"])
            .await
            .unwrap()
            .contains(notice)
    );
    let first = on_tty(&["team", "list"]).await.unwrap();
    assert!(
        first.contains(notice)
            && first.contains(".crewbox/config.toml (ignored)")
            && first.contains(".crewbox/teams/ (members read-only)")
            && first.contains("crewbox trust"),
        "{first}"
    );
    assert_eq!(first.matches(notice).count(), 1);
    let second = on_tty(&["team", "list"]).await.unwrap();
    assert!(!second.contains(notice), "shown once: {second}");
    fx.trust().await;
    assert!(!on_tty(&["team", "list"]).await.unwrap().contains(notice));
}

/// Runs `c` with stderr on a pseudo-terminal and returns what it wrote there.
fn stderr_on_a_terminal(c: &mut Command) -> String {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two fresh descriptors into the out-parameters.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors are ours alone from here on.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // Read while the child writes, so a full terminal buffer never blocks it.
    let reader = std::thread::spawn(move || {
        let mut file = std::fs::File::from(master);
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        // Once every copy of the slave is closed, reading ends (EIO on Linux).
        while let Ok(n) = file.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // The command keeps its stdio: replacing it closes our copy of the slave.
    c.stderr(Stdio::null());
    assert!(child.wait().unwrap().success());
    String::from_utf8_lossy(&reader.join().unwrap()).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_list_revoke_and_init() {
    let fx = Fx::new(|_, _| {}).await;
    let list = fx.run(&["trust", "--list", "--json"]).await;
    assert_eq!(json_of(&list), json!([]));
    let init = fx.run(&["init"]).await;
    assert!(init.status.success(), "{}", text(&init));
    let said = String::from_utf8_lossy(&init.stdout);
    assert!(
        said.contains("Needs trust") && said.contains("crewbox trust"),
        "{said}"
    );
    for f in [".crewbox/config.toml", ".crewbox/teams/example.toml"] {
        assert!(fx.repo().join(f).is_file(), "{f}");
    }
    // The files it writes are what a repository may hold: a trusted load takes them
    // without a warning, and the example team loads.
    fx.trust().await;
    let show = fx.run(&["team", "show", "example", "--json"]).await;
    assert!(show.status.success(), "{}", text(&show));
    assert!(stderr(&show).is_empty(), "{}", text(&show));
    let root = fx.repo().canonicalize().unwrap();
    let list = fx.run(&["trust", "--list", "--json"]).await;
    assert_eq!(json_of(&list)[0]["root"], root.to_str().unwrap());
    let again = fx.run(&["init"]).await;
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("kept"),
        "{}",
        text(&again)
    );
    let revoke = fx.run(&["trust", "--revoke", "--json"]).await;
    assert_eq!(json_of(&revoke)["was_trusted"], true);
    let list = fx.run(&["trust", "--list", "--json"]).await;
    assert_eq!(json_of(&list), json!([]));
    // A `.crewbox` that is a symlink out of the repository is never written through.
    let elsewhere = fx.home().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::remove_dir_all(fx.repo().join(".crewbox")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.repo().join(".crewbox")).unwrap();
    let out = fx.run(&["init"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("leads outside the repository"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}
