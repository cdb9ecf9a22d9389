//! The git remote coordinator and workers meet at, driven through the `git` program
//! (so the user's SSH keys, agents and credential helpers work as they do for them),
//! always off the async runtime's threads, with transports limited to file, git, ssh
//! and http(s) — never `ext::` or other helpers a remote URL could name — and never a
//! program the repository's own config names (hooks, fsmonitor, ssh command, credential
//! helpers, pack programs, signing): see [`neutral_config`].

use std::path::{Path, PathBuf};

use tokio::process::Command;

/// Transports a remote may use.
const PROTOCOLS: &str = "file:git:ssh:http:https";

/// The pack programs, named on the command line: `remote.NAME.receivepack` and
/// `uploadpack` in a repository's config are shell commands, and git keeps the first
/// one it reads, so a `-c` cannot replace them; these options do.
const RECEIVE_PACK: &str = "--receive-pack=git-receive-pack";
const UPLOAD_PACK: &str = "--upload-pack=git-upload-pack";

/// A git operation that failed.
#[derive(Debug, thiserror::Error)]
#[error("git {op} ({remote}): {detail}")]
pub struct GitError {
    /// What was done.
    pub op: String,
    /// The remote (name or URL) it was done with.
    pub remote: String,
    /// git's message.
    pub detail: String,
}

/// Runs `git ARGS` in `dir` with every program-naming setting of the repository's own
/// config overridden (see [`neutral_config`]); its trimmed stdout, or an error naming
/// `op` and `remote`.
async fn git(dir: &Path, args: &[&str], op: &str, remote: &str) -> Result<String, GitError> {
    let fail = |detail: String| GitError {
        op: op.to_owned(),
        remote: remote.to_owned(),
        detail,
    };
    let neutral = neutral_config(dir).await.map_err(fail)?;
    run_git(dir, args, &neutral).await.map_err(fail)
}

/// Runs `git -c SETTING... ARGS` in `dir`: its trimmed stdout, or git's (redacted,
/// bounded) message.
async fn run_git(dir: &Path, args: &[&str], settings: &[String]) -> Result<String, String> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir);
    for s in settings {
        command.arg("-c").arg(s);
    }
    let out = command
        .args(args)
        .env("GIT_ALLOW_PROTOCOL", PROTOCOLS)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = crate::redact::clean(err.trim()).into_owned();
        return Err(err.chars().take(2000).collect());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
/// Config keys that name a program git would run. A repository's own config (local or
/// worktree scope, includes followed) may set any of them — a clone made from an
/// untrusted project, a `.git/config` an agent or a script rewrote — so every git step
/// crewbox takes overrides them on its command line: hooks and fsmonitor off, push
/// signing off, and the others back to what the user's own (global or system) config
/// says, else git's default (the pack programs are named by option instead, see
/// [`RECEIVE_PACK`]). Values are the `-c` arguments, in order.
async fn neutral_config(dir: &Path) -> Result<Vec<String>, String> {
    let mut args: Vec<String> = [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "push.gpgSign=false",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let list = [
        "config",
        "--list",
        "--show-scope",
        "--includes",
        "--name-only",
    ];
    let listed = run_git(dir, &list, &[]).await?;
    let mut seen = std::collections::BTreeSet::new();
    for line in listed.lines() {
        let Some((scope, key)) = line.split_once('\t') else {
            continue;
        };
        if !matches!(scope, "local" | "worktree") {
            continue;
        }
        // git prints section and name in lower case; a subsection keeps its case.
        if !seen.insert(key.to_owned()) {
            continue;
        }
        match Named::of(&key.to_ascii_lowercase()) {
            None => {}
            Some(Named::Single(default)) => {
                let value = match users_value(key).await.pop() {
                    Some(v) => v,
                    None if key.eq_ignore_ascii_case("core.sshcommand") => {
                        std::env::var("GIT_SSH").unwrap_or_else(|_| default.to_owned())
                    }
                    None => default.to_owned(),
                };
                args.push(format!("{key}={value}"));
            }
            Some(Named::List) => {
                // An empty value resets the list; the user's own entries come back after.
                args.push(format!("{key}="));
                for v in users_value(key).await {
                    args.push(format!("{key}={v}"));
                }
            }
        }
    }
    Ok(args)
}

/// How a program-naming key is put back.
enum Named {
    /// One value: the user's, else this default.
    Single(&'static str),
    /// A list (credential helpers): reset, then the user's entries.
    List,
}

impl Named {
    fn of(key: &str) -> Option<Self> {
        let (section, rest) = key.split_once('.')?;
        let last = rest.rsplit('.').next()?;
        Some(match (section, last) {
            ("core", "sshcommand") => Self::Single("ssh"),
            ("core", "gitproxy") => Self::Single("none"),
            ("core", "askpass") => Self::Single(""),
            ("credential", "helper") => Self::List,
            ("gpg", "program") => Self::Single("gpg"),
            _ => return None,
        })
    }
}

/// The values the user's own config (global, then system) gives `key`, in order.
async fn users_value(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for scope in ["--system", "--global"] {
        let args = ["config", scope, "--includes", "--get-all", key];
        if let Ok(v) = run_git(Path::new("/"), &args, &[]).await {
            out.extend(v.lines().map(str::to_owned));
        }
    }
    out
}

/// The URL of remote `name` of the repository at `repo`.
pub async fn remote_url(repo: &Path, name: &str) -> Result<String, GitError> {
    git(
        repo,
        &["remote", "get-url", "--", name],
        "remote get-url",
        name,
    )
    .await
}

/// The commit `rev` names in `repo` (hex).
pub async fn resolve(repo: &Path, rev: &str) -> Result<String, GitError> {
    let spec = format!("{rev}^{{commit}}");
    git(
        repo,
        &["rev-parse", "--verify", "--quiet", &spec],
        "rev-parse",
        rev,
    )
    .await
}

/// Pushes `commit` of `repo` to `refname` on `remote`.
pub async fn push_commit(
    repo: &Path,
    remote: &str,
    commit: &str,
    refname: &str,
) -> Result<(), GitError> {
    let spec = format!("{commit}:{refname}");
    git(
        repo,
        &["push", "--quiet", RECEIVE_PACK, "--", remote, &spec],
        "push",
        remote,
    )
    .await?;
    Ok(())
}

/// Fetches branch `branch` from `remote` into the same local branch of `repo`.
pub async fn fetch_branch(
    repo: &Path,
    remote: &str,
    branch: &str,
    claimed: &ClaimedBranch<'_>,
) -> Result<(), GitError> {
    // Fetched aside first: the branch is set only once what arrived is what the
    // result names, so a worker can never move a branch to something else.
    let aside = format!("refs/crewbox-fetch/{branch}");
    let spec = format!("+refs/heads/{branch}:{aside}");
    let fail = |detail: String| GitError {
        op: "fetch".into(),
        remote: remote.to_owned(),
        detail,
    };
    // The repository's own settings are looked up once for every step below.
    let neutral = neutral_config(repo).await.map_err(fail)?;
    let fetched = async {
        let fetch = [
            "fetch",
            "--quiet",
            "--no-tags",
            UPLOAD_PACK,
            "--",
            remote,
            &spec,
        ];
        run_git(repo, &fetch, &neutral).await.map_err(fail)?;
        let commit = format!("{aside}^{{commit}}");
        let verify = ["rev-parse", "--verify", "--quiet", &commit];
        let tip = run_git(repo, &verify, &neutral).await.map_err(fail)?;
        if tip != claimed.tip {
            return Err(fail(format!(
                "the worker's branch {branch} holds commit {tip}, not the {} its result names",
                claimed.tip
            )));
        }
        if !claimed.crewbox_writable {
            let diff = [
                "diff",
                "--name-only",
                "--no-renames",
                claimed.base,
                claimed.tip,
                "--",
            ];
            let changed = run_git(repo, &diff, &neutral).await.map_err(fail)?;
            if let Some(path) = changed
                .lines()
                .find(|p| *p == ".crewbox" || p.starts_with(".crewbox/"))
            {
                return Err(fail(format!(
                    "the worker's branch {branch} changes `{}`: .crewbox/ is read-only to \
                     agents here (`[workspace] agents_write_crewbox`)",
                    crate::text::escape(path)
                )));
            }
        }
        let head = format!("refs/heads/{branch}");
        run_git(repo, &["update-ref", &head, claimed.tip], &neutral)
            .await
            .map_err(fail)
    }
    .await;
    let _ = run_git(repo, &["update-ref", "-d", &aside], &neutral).await;
    fetched.map(|_| ())
}

/// What a result says its branch holds, and whether it may change `.crewbox/`.
pub struct ClaimedBranch<'a> {
    /// The commit the agent's work started from.
    pub base: &'a str,
    /// The branch's last commit (the base when it made none).
    pub tip: &'a str,
    /// This coordinator's user lets agents change `.crewbox/`.
    pub crewbox_writable: bool,
}

/// A worker's clone of `url` under `cache`, created on first use (one directory per
/// remote, named by a hash of the URL).
pub async fn clone_cache(cache: &Path, url: &str) -> Result<PathBuf, GitError> {
    use sha2::Digest;
    // Keyed by the normalised URL: `file:///x/repo`, `file:///x//repo/` and
    // `file:///x/./repo` share one clone; different repositories never do.
    let key = super::url::RemoteUrl::parse(url)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| url.to_owned());
    let hash = sha2::Sha256::digest(key.as_bytes());
    let name = crate::text::hex(&hash[..12]);
    let dir = cache.join(name);
    if dir.join(".git").is_dir() {
        return Ok(dir);
    }
    tokio::fs::create_dir_all(cache)
        .await
        .map_err(|e| GitError {
            op: "clone".into(),
            remote: url.into(),
            detail: format!("cannot create {}: {e}", cache.display()),
        })?;
    let tmp = cache.join(format!(
        ".{}-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("x"),
        std::process::id()
    ));
    let _ = tokio::fs::remove_dir_all(&tmp).await;
    let tmp_s = tmp.to_string_lossy().into_owned();
    git(
        cache,
        &[
            "clone",
            "--quiet",
            "--no-tags",
            UPLOAD_PACK,
            "--",
            url,
            &tmp_s,
        ],
        "clone",
        url,
    )
    .await?;
    // Worktree commits need an identity; these are the worker's, not the user's global.
    for (k, v) in [
        ("user.name", "crewbox worker"),
        ("user.email", "crewbox@localhost"),
    ] {
        git(&tmp, &["config", k, v], "config", url).await?;
    }
    if let Err(e) = tokio::fs::rename(&tmp, &dir).await {
        let _ = tokio::fs::remove_dir_all(&tmp).await;
        // Another worker sharing this state directory cloned it first.
        if !dir.join(".git").is_dir() {
            return Err(GitError {
                op: "clone".into(),
                remote: url.into(),
                detail: format!("cannot move the clone into {}: {e}", dir.display()),
            });
        }
    }
    Ok(dir)
}

/// Checks out `commit` (detached) in a clone whose HEAD names no commit yet.
pub async fn ensure_head(dir: &Path, commit: &str) -> Result<(), GitError> {
    if resolve(dir, "HEAD").await.is_ok() {
        return Ok(());
    }
    git(
        dir,
        &["checkout", "--quiet", "--detach", commit],
        "checkout",
        commit,
    )
    .await?;
    Ok(())
}

/// Fetches `refname` from `url` into the clone at `dir` and checks it is `commit`.
pub async fn fetch_base(
    dir: &Path,
    url: &str,
    refname: &str,
    commit: &str,
) -> Result<(), GitError> {
    let spec = format!("+{refname}:{refname}");
    git(
        dir,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            UPLOAD_PACK,
            "--",
            url,
            &spec,
        ],
        "fetch",
        url,
    )
    .await?;
    let got = resolve(dir, refname).await?;
    if got != commit {
        return Err(GitError {
            op: "fetch".into(),
            remote: url.into(),
            detail: format!("{refname} is {got}, the task names {commit}"),
        });
    }
    Ok(())
}
