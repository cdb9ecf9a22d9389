//! The git remote coordinator and workers meet at, driven through the `git` program
//! (so the user's SSH keys, agents and credential helpers work as they do for them),
//! always off the async runtime's threads, with transports limited to file, git, ssh
//! and http(s) — never `ext::` or other helpers a remote URL could name.

use std::path::{Path, PathBuf};

use tokio::process::Command;

/// Transports a remote may use.
const PROTOCOLS: &str = "file:git:ssh:http:https";

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

/// Runs `git ARGS` in `dir`; its trimmed stdout, or an error naming `op` and `remote`.
async fn git(dir: &Path, args: &[&str], op: &str, remote: &str) -> Result<String, GitError> {
    let fail = |detail: String| GitError {
        op: op.to_owned(),
        remote: remote.to_owned(),
        detail,
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_ALLOW_PROTOCOL", PROTOCOLS)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| fail(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = crate::redact::clean(err.trim()).into_owned();
        return Err(fail(err.chars().take(2000).collect()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
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
        &["push", "--quiet", "--", remote, &spec],
        "push",
        remote,
    )
    .await?;
    Ok(())
}

/// Fetches branch `branch` from `remote` into the same local branch of `repo`.
pub async fn fetch_branch(repo: &Path, remote: &str, branch: &str) -> Result<(), GitError> {
    let spec = format!("+refs/heads/{branch}:refs/heads/{branch}");
    git(
        repo,
        &["fetch", "--quiet", "--no-tags", "--", remote, &spec],
        "fetch",
        remote,
    )
    .await?;
    Ok(())
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
    let name: String = hash.iter().take(12).map(|b| format!("{b:02x}")).collect();
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
        &["clone", "--quiet", "--no-tags", "--", url, &tmp_s],
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
        &["fetch", "--quiet", "--no-tags", "--", url, &spec],
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
