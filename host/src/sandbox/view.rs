//! What a sandboxed process sees of the filesystem: pure planning, no system calls.
//!
//! The view is built on an empty root, so everything not listed here does not exist
//! for the process (deny by default, for reads as well as writes):
//! - the system trees (`/usr`, `/etc`, `/bin`, `/lib*`, `/opt`, `/nix` where present),
//!   read-only, with root-readable secrets in `/etc` masked;
//! - a fresh `/proc` (its own pid namespace) and a minimal `/dev`: no terminal, and a
//!   bounded `/dev/shm`;
//! - the workspace, writable when the agent may write, with `.git` and `.crewbox`
//!   read-only (a missing `.crewbox` is shown as an empty read-only directory, so it
//!   cannot be planted either, unless the user lets agents change it), and the git
//!   directories it points to read-only;
//! - `$HOME` and `/tmp` backed by the agent's private directories, writable;
//! - toolchain directories (`CARGO_HOME`, `RUSTUP_HOME`) read-only, credentials masked;
//! - the paths the user lists in `[sandbox] read` / `write`.
//!
//! Hidden by construction: the user's real home (`~/.ssh`, `~/.config/crewbox`…), the
//! crewbox state directory (other agents' worktrees, the store), the main checkout
//! (only its `.git` is shown), `/run` and `/var` (daemon sockets: docker, dbus, databases),
//! `/sys`, the host's `/tmp`.

use std::path::{Path, PathBuf};

use super::policy::Mount;

/// Top-level system entries shown read-only when present (a symlink is shown as one).
pub const SYSTEM_ROOTS: &[&str] = &[
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc", "/opt", "/nix",
];

/// Files readable by root that are masked (shown empty) even inside visible trees.
pub const MASKED_SYSTEM_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/security/opasswd",
];

/// Device nodes the process gets (bound from the host's `/dev`). No terminal: the
/// process has no controlling terminal (its own session), no `/dev/tty`, no `/dev/pts`.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Devices the process may write to.
pub const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Names inside a workspace that stay read-only even when the workspace is writable.
pub const PROTECTED_IN_WORKSPACE: &[&str] = &[".git", ".crewbox"];

/// The host facts every view shares (computed once per process).
#[derive(Clone, Debug, Default)]
pub struct HostLayout {
    /// System entries as found: binds for directories, symlinks as they are.
    pub system: Vec<Mount>,
    /// Files masked with an empty file (system secrets, toolchain credentials).
    pub masked: Vec<PathBuf>,
    /// Directories hidden wherever a visible tree contains them (state dir, user config).
    pub hidden: Vec<PathBuf>,
    /// `$HOME` as the process sees it (backed by its private directory).
    pub home: PathBuf,
    /// Toolchain directories, shown read-only: (as named, canonical).
    pub toolchains: Vec<(PathBuf, PathBuf)>,
    /// Extra read-only paths from the user's config (canonical).
    pub extra_read: Vec<PathBuf>,
    /// Extra writable paths from the user's config (canonical).
    pub extra_write: Vec<PathBuf>,
    /// The directory holding the resolver configuration when `/etc/resolv.conf` points
    /// outside `/etc` (shown only with network access).
    pub resolver_dir: Option<PathBuf>,
    /// Device nodes present on the host.
    pub devices: Vec<PathBuf>,
}

/// The agent's workspace as the view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceView {
    /// Its root (canonical).
    pub root: PathBuf,
    /// Whether the agent may write there.
    pub writable: bool,
    /// Existing entries of the root that stay read-only (`.git`, `.crewbox`).
    pub protected: Vec<PathBuf>,
    /// Missing entries of the root that may not be created (`.crewbox`): an empty
    /// read-only directory is shown there.
    pub sealed: Vec<PathBuf>,
    /// Git directories it needs that live elsewhere (a linked worktree's git dir and the
    /// main repository's common dir), read-only.
    pub git_dirs: Vec<PathBuf>,
}

/// One agent's part of the view.
#[derive(Clone, Debug)]
pub struct AgentView<'a> {
    /// The workspace, if the process works in one.
    pub workspace: Option<&'a WorkspaceView>,
    /// Backs `$HOME`.
    pub private_home: &'a Path,
    /// Backs `/tmp`.
    pub private_tmp: &'a Path,
    /// Whether the process shares the host's network.
    pub network: bool,
    /// Read-only paths for this process only (a `command` provider's own `read`).
    pub extra_read: &'a [PathBuf],
    /// Single files shown read-only for this process only: (where, host file).
    pub extra_files: &'a [(PathBuf, PathBuf)],
    /// The size of its `/dev/shm`, bytes.
    pub shm_size: u64,
    /// Whether it may write the user's `[sandbox] write` paths: only a process of an
    /// agent that may write (a read-only agent's servers and calls see them read-only).
    pub extra_write: bool,
}

/// The view's mounts plus the paths the process may write beneath / to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Mounts in the order they are made.
    pub mounts: Vec<Mount>,
    /// Writable trees.
    pub writable: Vec<PathBuf>,
    /// Writable single files (devices).
    pub writable_files: Vec<PathBuf>,
}

/// How mounts at the same depth stack (later layers land on top).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    System,
    Private,
    Toolchain,
    Extra,
    Workspace,
    Hidden,
    Protected,
    Masked,
}

fn depth(path: &Path) -> usize {
    path.components().count()
}

fn bind(path: &Path, source: &Path, write: bool) -> Mount {
    Mount::Bind {
        path: path.to_owned(),
        source: source.to_owned(),
        write,
    }
}

/// Plans the view for one process.
pub fn plan(host: &HostLayout, agent: &AgentView<'_>) -> Plan {
    let mut entries: Vec<(Layer, Mount)> = Vec::new();
    let mut writable = Vec::new();
    for m in &host.system {
        entries.push((Layer::System, m.clone()));
    }
    // Trees whose host content is shown as it is (where hidden and masked paths matter).
    let mut visible: Vec<PathBuf> = host
        .system
        .iter()
        .filter(|m| matches!(m, Mount::Bind { .. }))
        .map(|m| m.path().to_owned())
        .collect();

    let root = Path::new("/");
    entries.push((
        Layer::System,
        Mount::Proc {
            path: root.join("proc"),
        },
    ));
    entries.push((
        Layer::System,
        Mount::Tmpfs {
            path: root.join("dev"),
            write: false,
            size: None,
        },
    ));
    for dev in &host.devices {
        entries.push((Layer::System, bind(dev, dev, true)));
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        entries.push((
            Layer::System,
            Mount::Symlink {
                path: root.join("dev").join(name),
                target: target.into(),
            },
        ));
    }
    let shm = root.join("dev/shm");
    entries.push((
        Layer::System,
        Mount::Tmpfs {
            path: shm.clone(),
            write: true,
            size: Some(agent.shm_size),
        },
    ));
    writable.push(shm);

    let tmp = root.join("tmp");
    entries.push((Layer::Private, bind(&tmp, agent.private_tmp, true)));
    writable.push(tmp);
    entries.push((Layer::Private, bind(&host.home, agent.private_home, true)));
    writable.push(host.home.clone());

    for (named, canonical) in &host.toolchains {
        entries.push((Layer::Toolchain, bind(canonical, canonical, false)));
        visible.push(canonical.clone());
        if named != canonical {
            entries.push((
                Layer::Toolchain,
                Mount::Symlink {
                    path: named.clone(),
                    target: canonical.clone(),
                },
            ));
        }
    }
    for path in host.extra_read.iter().chain(agent.extra_read) {
        entries.push((Layer::Extra, bind(path, path, false)));
        visible.push(path.clone());
    }
    for path in &host.extra_write {
        entries.push((Layer::Extra, bind(path, path, agent.extra_write)));
        visible.push(path.clone());
        if agent.extra_write {
            writable.push(path.clone());
        }
    }
    for (path, source) in agent.extra_files {
        entries.push((Layer::Extra, bind(path, source, false)));
    }
    if agent.network
        && let Some(dir) = &host.resolver_dir
    {
        entries.push((Layer::Extra, bind(dir, dir, false)));
    }
    if let Some(ws) = agent.workspace {
        entries.push((Layer::Workspace, bind(&ws.root, &ws.root, ws.writable)));
        visible.push(ws.root.clone());
        if ws.writable {
            writable.push(ws.root.clone());
        }
        for path in ws.protected.iter().chain(&ws.git_dirs) {
            entries.push((Layer::Protected, bind(path, path, false)));
        }
        for path in &ws.sealed {
            entries.push((
                Layer::Protected,
                Mount::Tmpfs {
                    path: path.clone(),
                    write: false,
                    size: None,
                },
            ));
        }
    }
    let is_visible = |p: &Path| visible.iter().any(|v| p.starts_with(v));
    for path in &host.hidden {
        if is_visible(path) {
            entries.push((
                Layer::Hidden,
                Mount::Tmpfs {
                    path: path.clone(),
                    write: false,
                    size: None,
                },
            ));
        }
    }
    for path in &host.masked {
        if is_visible(path) {
            entries.push((Layer::Masked, bind(path, Path::new("/dev/null"), false)));
        }
    }

    // Parents before children; at one path the higher layer wins (the lower is dropped).
    entries.sort_by_key(|(layer, m)| (depth(m.path()), *layer));
    let mut mounts: Vec<Mount> = Vec::with_capacity(entries.len());
    for (_, m) in entries {
        mounts.retain(|earlier| earlier.path() != m.path());
        mounts.push(m);
    }
    let writable_files = host
        .devices
        .iter()
        .filter(|d| WRITABLE_DEVICES.iter().any(|w| Path::new(w) == d.as_path()))
        .cloned()
        .collect();
    writable.sort();
    writable.dedup();
    Plan {
        mounts,
        writable,
        writable_files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostLayout {
        HostLayout {
            system: vec![
                Mount::Symlink {
                    path: "/bin".into(),
                    target: "usr/bin".into(),
                },
                bind(Path::new("/usr"), Path::new("/usr"), false),
                bind(Path::new("/etc"), Path::new("/etc"), false),
            ],
            masked: vec!["/etc/shadow".into(), "/h/.cargo/credentials.toml".into()],
            hidden: vec![
                "/h/.local/state/crewbox".into(),
                "/h/.config/crewbox".into(),
            ],
            home: "/h".into(),
            toolchains: vec![("/h/.cargo".into(), "/h/.cargo".into())],
            extra_read: vec![],
            extra_write: vec![],
            resolver_dir: Some("/run/systemd/resolve".into()),
            devices: vec!["/dev/null".into(), "/dev/urandom".into()],
        }
    }

    fn ws(root: &str, writable: bool) -> WorkspaceView {
        WorkspaceView {
            root: root.into(),
            writable,
            protected: vec![Path::new(root).join(".git")],
            sealed: vec![Path::new(root).join(".crewbox")],
            git_dirs: vec!["/repo/.git".into()],
        }
    }

    fn agent<'a>(ws: Option<&'a WorkspaceView>, network: bool) -> AgentView<'a> {
        AgentView {
            workspace: ws,
            private_home: Path::new("/s/a1/home"),
            private_tmp: Path::new("/s/a1/tmp"),
            network,
            extra_read: &[],
            extra_files: &[],
            shm_size: 64 << 20,
            extra_write: true,
        }
    }

    fn position(plan: &Plan, path: &str) -> usize {
        plan.mounts
            .iter()
            .position(|m| m.path() == Path::new(path))
            .unwrap_or_else(|| panic!("{path} not in the view: {:#?}", plan.mounts))
    }

    #[test]
    fn the_users_write_paths_are_read_only_for_a_process_that_may_not_write() {
        let mut h = host();
        h.extra_write = vec!["/cache".into()];
        for may in [true, false] {
            let mut a = agent(None, false);
            a.extra_write = may;
            let plan = plan(&h, &a);
            let mount = plan
                .mounts
                .iter()
                .find(|m| m.path() == Path::new("/cache"))
                .unwrap();
            assert!(
                matches!(mount, Mount::Bind { write, .. } if *write == may),
                "{mount:?}"
            );
            assert_eq!(plan.writable.contains(&PathBuf::from("/cache")), may);
        }
    }

    #[test]
    fn worktree_under_home_is_writable_its_git_is_not_and_the_checkout_is_hidden() {
        let w = ws("/h/.local/state/crewbox/r/worktrees/a1", true);
        let plan = plan(&host(), &agent(Some(&w), false));
        // The private home comes first, the worktree over it, .git over that.
        let home = position(&plan, "/h");
        let tree = position(&plan, "/h/.local/state/crewbox/r/worktrees/a1");
        let git = position(&plan, "/h/.local/state/crewbox/r/worktrees/a1/.git");
        assert!(home < tree && tree < git);
        assert_eq!(
            plan.mounts[home],
            bind(Path::new("/h"), Path::new("/s/a1/home"), true)
        );
        assert!(matches!(
            &plan.mounts[git],
            Mount::Bind { write: false, .. }
        ));
        assert!(matches!(
            &plan.mounts[position(&plan, "/repo/.git")],
            Mount::Bind { write: false, .. }
        ));
        // Only the main repository's .git is shown, not its checkout.
        assert!(!plan.mounts.iter().any(|m| m.path() == Path::new("/repo")));
        // The state dir is not under a visible tree (home is private): nothing to hide.
        assert!(
            !plan
                .mounts
                .iter()
                .any(|m| m.path() == Path::new("/h/.local/state/crewbox"))
        );
        assert_eq!(
            plan.writable,
            [
                PathBuf::from("/dev/shm"),
                "/h".into(),
                "/h/.local/state/crewbox/r/worktrees/a1".into(),
                "/tmp".into()
            ]
        );
        assert_eq!(plan.writable_files, [PathBuf::from("/dev/null")]);
        // No network: the resolver directory stays out.
        assert!(!plan.mounts.iter().any(|m| m.path().starts_with("/run")));
    }

    #[test]
    fn secrets_inside_visible_trees_are_masked_or_hidden() {
        let mut h = host();
        h.extra_read.push("/h/.config".into());
        let w = ws("/repo", false);
        let plan = plan(&h, &agent(Some(&w), true));
        assert_eq!(
            plan.mounts[position(&plan, "/etc/shadow")],
            bind(Path::new("/etc/shadow"), Path::new("/dev/null"), false)
        );
        assert_eq!(
            plan.mounts[position(&plan, "/h/.cargo/credentials.toml")],
            bind(
                Path::new("/h/.cargo/credentials.toml"),
                Path::new("/dev/null"),
                false
            )
        );
        // ~/.config is shown on request, but crewbox's own config dir inside it is not.
        assert!(position(&plan, "/h/.config") < position(&plan, "/h/.config/crewbox"));
        assert_eq!(
            plan.mounts[position(&plan, "/h/.config/crewbox")],
            Mount::Tmpfs {
                path: "/h/.config/crewbox".into(),
                write: false,
                size: None,
            }
        );
        // A read-only agent's workspace is not writable; network shows the resolver.
        assert!(!plan.writable.contains(&PathBuf::from("/repo")));
        position(&plan, "/run/systemd/resolve");
    }

    #[test]
    fn the_workspace_wins_over_a_same_path_entry_and_paths_are_unique() {
        let mut h = host();
        h.extra_read.push("/repo".into());
        let w = ws("/repo", true);
        let plan = plan(&h, &agent(Some(&w), false));
        let at_repo: Vec<_> = plan
            .mounts
            .iter()
            .filter(|m| m.path() == Path::new("/repo"))
            .collect();
        assert_eq!(
            at_repo,
            [&bind(Path::new("/repo"), Path::new("/repo"), true)]
        );
        let mut paths: Vec<_> = plan.mounts.iter().map(|m| m.path()).collect();
        let n = paths.len();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), n);
    }
}
