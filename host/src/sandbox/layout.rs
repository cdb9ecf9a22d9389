//! Looking at this host once: which system trees exist, where the toolchains and the
//! resolver live, what must stay hidden. The result feeds `view::plan` for every command.

use std::path::{Path, PathBuf};

use super::config::SandboxConfig;
use super::policy::Mount;
use super::view::{self, HostLayout, WorkspaceView};

/// Paths the layout needs from the caller.
#[derive(Clone, Debug, Default)]
pub struct HostPaths {
    /// The crewbox state directory (other agents' worktrees, the store).
    pub state_dir: PathBuf,
    /// The user's crewbox config directory.
    pub config_dir: Option<PathBuf>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `CARGO_HOME` / `RUSTUP_HOME` when set.
    pub cargo_home: Option<PathBuf>,
    /// See `cargo_home`.
    pub rustup_home: Option<PathBuf>,
    /// The state base holding every repository's state directory (hidden as a whole).
    pub state_base: Option<PathBuf>,
}

impl HostPaths {
    /// The paths from this process's environment.
    pub fn from_env(state_dir: &Path, config_dir: Option<PathBuf>) -> Self {
        let var = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        Self {
            state_dir: state_dir.to_owned(),
            config_dir,
            home: var("HOME"),
            cargo_home: var("CARGO_HOME"),
            rustup_home: var("RUSTUP_HOME"),
            state_base: None,
        }
    }
}

fn canonical(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}

/// Builds the host layout. Configured paths that do not exist are skipped with a warning.
pub fn discover(paths: &HostPaths, cfg: &SandboxConfig) -> HostLayout {
    let mut system = Vec::new();
    for name in view::SYSTEM_ROOTS {
        let path = Path::new(name);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    system.push(Mount::Symlink {
                        path: path.to_owned(),
                        target,
                    });
                }
            }
            Ok(meta) if meta.is_dir() => system.push(Mount::Bind {
                path: path.to_owned(),
                source: path.to_owned(),
                write: false,
            }),
            _ => {}
        }
    }
    let home = paths
        .home
        .as_deref()
        .and_then(canonical)
        .or_else(|| paths.home.clone())
        .unwrap_or_else(|| PathBuf::from("/home/agent"));
    let mut toolchains = Vec::new();
    for (named, fallback) in [
        (&paths.cargo_home, ".cargo"),
        (&paths.rustup_home, ".rustup"),
    ] {
        let named = named.clone().unwrap_or_else(|| home.join(fallback));
        if let Some(c) = canonical(&named) {
            toolchains.push((named, c));
        }
    }
    let mut masked: Vec<PathBuf> = view::MASKED_SYSTEM_FILES
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Ok(dir) = std::fs::read_dir("/etc/ssh") {
        masked.extend(
            dir.filter_map(|e| e.ok())
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.starts_with("ssh_host_") && name.ends_with("_key")
                })
                .map(|e| e.path()),
        );
    }
    for (_, dir) in &toolchains {
        masked.push(dir.join("credentials"));
        masked.push(dir.join("credentials.toml"));
    }
    masked.retain(|p| p.is_file());
    let hidden = [
        Some(&paths.state_dir),
        paths.state_base.as_ref(),
        paths.config_dir.as_ref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|p| canonical(p))
    .collect();
    let existing = |key: &str, list: &[PathBuf]| -> Vec<PathBuf> {
        list.iter()
            .filter_map(|p| {
                let c = canonical(p);
                if c.is_none() {
                    tracing::warn!(path = %p.display(), "sandbox.{key}: path does not exist; skipped");
                }
                c
            })
            .collect()
    };
    let resolver_dir = canonical(Path::new("/etc/resolv.conf"))
        .filter(|p| !p.starts_with("/etc"))
        .and_then(|p| p.parent().map(Path::to_owned));
    let devices = view::DEVICES
        .iter()
        .map(PathBuf::from)
        .filter(|d| d.exists())
        .collect();
    HostLayout {
        system,
        masked,
        hidden,
        home,
        toolchains,
        extra_read: existing("read", &cfg.read),
        extra_write: existing("write", &cfg.write),
        resolver_dir,
        devices,
    }
}

/// The workspace as the view shows it: its protected entries, and for a linked
/// worktree (whose `.git` is a file) the git directory and the common directory.
/// `.crewbox` is protected unless `crewbox_writable` (the user's grant); a missing one
/// is sealed when the workspace is writable, so a command cannot plant it.
pub fn workspace(root: &Path, writable: bool, crewbox_writable: bool) -> WorkspaceView {
    let root = canonical(root).unwrap_or_else(|| root.to_owned());
    let guarded = view::PROTECTED_IN_WORKSPACE
        .iter()
        .filter(|name| !(crewbox_writable && **name == ".crewbox"))
        .map(|name| root.join(name));
    let (protected, missing): (Vec<PathBuf>, Vec<PathBuf>) =
        guarded.partition(|p| std::fs::symlink_metadata(p).is_ok());
    let sealed = missing
        .into_iter()
        .filter(|p| writable && p.ends_with(".crewbox"))
        .collect();
    let mut git_dirs = Vec::new();
    let dot_git = root.join(".git");
    if dot_git.is_file()
        && let Ok(text) = std::fs::read_to_string(&dot_git)
        && let Some(dir) = text.trim().strip_prefix("gitdir:")
        && let Some(gitdir) = canonical(&root.join(dir.trim()))
    {
        let common = std::fs::read_to_string(gitdir.join("commondir"))
            .ok()
            .and_then(|c| canonical(&gitdir.join(c.trim())));
        match common {
            Some(common) if gitdir.starts_with(&common) => git_dirs.push(common),
            Some(common) => git_dirs.extend([common, gitdir]),
            None => git_dirs.push(gitdir),
        }
    }
    WorkspaceView {
        root,
        writable,
        protected,
        sealed,
        git_dirs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_worktree_shows_the_common_git_dir() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(main.join(".git/worktrees/a1")).unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(main.join(".git/worktrees/a1/commondir"), "../..\n").unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/a1").display()),
        )
        .unwrap();
        let view = workspace(&wt, true, false);
        let main = main.canonicalize().unwrap();
        let wt = wt.canonicalize().unwrap();
        assert_eq!(view.git_dirs, [main.join(".git")]);
        assert_eq!(view.protected, [wt.join(".git")]);
        assert_eq!(view.sealed, [wt.join(".crewbox")]);
        let plain = workspace(&main, false, false);
        assert_eq!(plain.protected, [main.join(".git")]);
        assert!(plain.git_dirs.is_empty() && plain.sealed.is_empty());
        std::fs::create_dir(main.join(".crewbox")).unwrap();
        let with = workspace(&main, true, false);
        assert_eq!(with.protected, [main.join(".git"), main.join(".crewbox")]);
        let granted = workspace(&main, true, true);
        assert_eq!(granted.protected, [main.join(".git")]);
        assert!(granted.sealed.is_empty());
    }
}
