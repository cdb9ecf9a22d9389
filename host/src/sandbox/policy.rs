//! The policy one sandboxed process runs under: plain data, decided by the host before
//! the helper starts, and applied by the helper step by step (see `helper`).
//!
//! It travels to the sandbox server over its socket as one framed JSON document (see
//! [`Policy::encode`]), so nothing of it shows in any process's environment or argv.

use std::io::{self, Read};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The first argument that makes the `crewbox` binary the sandbox helper.
pub const HELPER_ARG: &str = crate::child::Role::SandboxHelper.arg();
/// The exit code of a helper that could not set the sandbox up.
pub const SETUP_FAILED: i32 = 125;

/// Which step failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reading the policy.
    Policy,
    /// Creating namespaces and mapping ids.
    Namespaces,
    /// Building the filesystem view.
    Mounts,
    /// Bounding processes, files, CPU time.
    Limits,
    /// The private loopback.
    Network,
    /// Landlock and capabilities.
    Landlock,
    /// Starting the program.
    Exec,
}

impl Stage {
    /// The stage's name in error lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Policy => "policy",
            Stage::Namespaces => "namespaces",
            Stage::Mounts => "mounts",
            Stage::Limits => "limits",
            Stage::Network => "network",
            Stage::Landlock => "landlock",
            Stage::Exec => "exec",
        }
    }

    /// Parses a stage name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Stage::Policy,
            Stage::Namespaces,
            Stage::Mounts,
            Stage::Limits,
            Stage::Network,
            Stage::Landlock,
            Stage::Exec,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

/// Marks the start of a policy on the helper's stdin; the version changes with the format.
const FRAME_MAGIC: &str = "crewbox-sandbox-policy/1";
/// The largest policy a helper accepts (the environment is the only big part).
const MAX_POLICY_BYTES: usize = 4 << 20;

/// What the sandboxed process runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Program {
    /// `/bin/sh -c LINE`.
    Shell(String),
    /// A program (looked up on the policy's `PATH`) and its arguments.
    Argv(Vec<String>),
    /// Nothing: report what the sandbox could set up, as one JSON line (for `health`).
    Probe,
}

/// One step of building the process's view of the filesystem. Paths are absolute
/// and canonical; every entry lands at `path` inside the new root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mount {
    /// Bind `source` (a host path) at `path`, writable or read-only (recursively).
    Bind {
        /// Where it appears.
        #[serde(with = "wire_path")]
        path: PathBuf,
        /// What appears there.
        #[serde(with = "wire_path")]
        source: PathBuf,
        /// Whether writes are allowed (the mount is read-only otherwise).
        write: bool,
    },
    /// An empty directory (a fresh tmpfs): hides what is beneath, or holds mount points.
    /// `write = false` makes it read-only once everything beneath it is mounted.
    Tmpfs {
        /// Where it appears.
        #[serde(with = "wire_path")]
        path: PathBuf,
        /// Whether files may be created in it.
        write: bool,
        /// Its size in bytes (None: the kernel's default, half of RAM; only ever for
        /// read-only ones, which stay empty).
        #[serde(default)]
        size: Option<u64>,
    },
    /// A fresh `/proc` of the sandbox's own pid namespace.
    Proc {
        /// Where it appears (`/proc`).
        #[serde(with = "wire_path")]
        path: PathBuf,
    },
    /// A symbolic link (as the host has it, e.g. `/bin -> usr/bin`).
    Symlink {
        /// The link.
        #[serde(with = "wire_path")]
        path: PathBuf,
        /// What it points to.
        #[serde(with = "wire_path")]
        target: PathBuf,
    },
}

impl Mount {
    /// Where the entry appears in the view.
    pub fn path(&self) -> &std::path::Path {
        match self {
            Mount::Bind { path, .. }
            | Mount::Tmpfs { path, .. }
            | Mount::Proc { path }
            | Mount::Symlink { path, .. } => path,
        }
    }
}

/// The default memory cap of a command, MiB.
pub const DEFAULT_MEMORY_MB: u64 = 4096;
/// The default size of a command's `/dev/shm`, MiB.
pub const DEFAULT_SHM_MB: u64 = 64;

/// Resource limits of the sandboxed process tree. Zero means unbounded (but for
/// `shm_size`, which is always bounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes (threads count) alive at once in the sandbox.
    pub max_processes: u32,
    /// Largest file a process may write, in bytes.
    pub max_file_size: u64,
    /// CPU seconds per process.
    pub cpu_time_s: u64,
    /// Address space per process, in bytes (`RLIMIT_AS`).
    pub memory: u64,
    /// The size of the process's `/dev/shm`, in bytes (at least one page).
    pub shm_size: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_processes: 1024,
            max_file_size: 4 << 30,
            cpu_time_s: 1200,
            memory: DEFAULT_MEMORY_MB << 20,
            shm_size: DEFAULT_SHM_MB << 20,
        }
    }
}

/// Everything the helper needs to start one sandboxed process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// A random token: the helper prefixes its own error lines with it, so the host can
    /// tell them from anything the command prints.
    pub nonce: String,
    /// What to run.
    pub program: Program,
    /// Its working directory (inside the view).
    #[serde(with = "wire_path")]
    pub cwd: PathBuf,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Whether it shares the host's network (otherwise it gets its own, with only a
    /// private loopback).
    pub network: bool,
    /// An empty host directory the new root is built on.
    #[serde(with = "wire_path")]
    pub root_dir: PathBuf,
    /// The view, in the order it is built (parents before children).
    pub mounts: Vec<Mount>,
    /// Paths (inside the view) the process may write beneath; everything else is
    /// read-only for it whatever the mounts say.
    #[serde(with = "wire_paths")]
    pub writable: Vec<PathBuf>,
    /// Files (inside the view) it may write but not create beside: `/dev/null` and kin.
    #[serde(with = "wire_paths")]
    pub writable_files: Vec<PathBuf>,
    /// Resource limits.
    pub limits: Limits,
}

impl Policy {
    /// The policy as the helper reads it: a header line with the length, then JSON
    /// (a path that is not UTF-8 travels as its bytes).
    pub fn encode(&self) -> std::io::Result<Vec<u8>> {
        let json = serde_json::to_vec(self).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the sandbox policy cannot be encoded: {e}"),
            )
        })?;
        let mut out = format!("{FRAME_MAGIC} {}\n", json.len()).into_bytes();
        out.extend(json);
        Ok(out)
    }

    /// Reads exactly one encoded policy from `input`, leaving whatever follows unread
    /// (it becomes the sandboxed process's stdin).
    pub fn decode(input: &mut impl Read) -> io::Result<Self> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let mut header = Vec::new();
        let mut byte = [0u8; 1];
        // Byte by byte: reading ahead would swallow the command's own stdin.
        while header.len() <= FRAME_MAGIC.len() + 12 {
            if input.read(&mut byte)? == 0 {
                return Err(invalid("no policy on stdin".into()));
            }
            if byte[0] == b'\n' {
                break;
            }
            header.push(byte[0]);
        }
        let header = String::from_utf8_lossy(&header);
        let len = header
            .strip_prefix(FRAME_MAGIC)
            .and_then(|rest| rest.trim().parse::<usize>().ok())
            .filter(|&n| n <= MAX_POLICY_BYTES)
            .ok_or_else(|| invalid(format!("not a sandbox policy header: `{header}`")))?;
        let mut json = vec![0u8; len];
        input.read_exact(&mut json)?;
        serde_json::from_slice(&json).map_err(|e| invalid(format!("bad sandbox policy: {e}")))
    }
}

/// Serde for a path in the policy: a string, or its bytes when it is not UTF-8 (a
/// Unix path is bytes; a workspace may live under a directory named in Latin-1).
mod wire_path {
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        match path.to_str() {
            Some(text) => s.serialize_str(text),
            None => s.collect_seq(path.as_os_str().as_bytes()),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    pub(super) enum Wire {
        Text(String),
        Bytes(Vec<u8>),
    }

    impl From<Wire> for PathBuf {
        fn from(w: Wire) -> Self {
            match w {
                Wire::Text(t) => PathBuf::from(t),
                Wire::Bytes(b) => PathBuf::from(std::ffi::OsStr::from_bytes(&b)),
            }
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        Wire::deserialize(d).map(PathBuf::from)
    }
}

/// [`wire_path`] for a list of paths.
mod wire_paths {
    use std::path::PathBuf;

    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    struct One<'a>(&'a std::path::Path);

    impl serde::Serialize for One<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            super::wire_path::serialize(self.0, s)
        }
    }

    pub fn serialize<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(paths.len()))?;
        for p in paths {
            seq.serialize_element(&One(p))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Ok(Vec::<super::wire_path::Wire>::deserialize(d)?
            .into_iter()
            .map(PathBuf::from)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Policy {
        Policy {
            nonce: "n0nce".into(),
            program: Program::Shell("echo hi".into()),
            cwd: "/w".into(),
            env: vec![("PATH".into(), "/usr/bin".into())],
            network: false,
            root_dir: "/s/mnt".into(),
            mounts: vec![
                Mount::Tmpfs {
                    path: "/dev".into(),
                    write: false,
                    size: None,
                },
                Mount::Bind {
                    path: "/w".into(),
                    source: "/w".into(),
                    write: true,
                },
            ],
            writable: vec!["/w".into()],
            writable_files: vec!["/dev/null".into()],
            limits: Limits::default(),
        }
    }

    #[test]
    fn paths_that_are_not_utf8_travel_as_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let odd = PathBuf::from(std::ffi::OsStr::from_bytes(b"/w/caf\xe9"));
        let mut p = sample();
        p.cwd = odd.clone();
        p.writable.push(odd.clone());
        p.mounts.push(Mount::Bind {
            path: odd.clone(),
            source: odd.clone(),
            write: true,
        });
        let encoded = p.encode().unwrap();
        assert_eq!(Policy::decode(&mut &encoded[..]).unwrap(), p);
    }

    #[test]
    fn round_trips_and_leaves_what_follows_unread() {
        let mut bytes = sample().encode().unwrap();
        bytes.extend_from_slice(b"the prompt");
        let mut input = &bytes[..];
        assert_eq!(Policy::decode(&mut input).unwrap(), sample());
        assert_eq!(input, b"the prompt");
    }

    #[test]
    fn refuses_what_is_not_a_policy() {
        for bad in [
            &b""[..],
            b"hello\n{}",
            b"crewbox-sandbox-policy/1 99999999999\n",
            b"crewbox-sandbox-policy/1 2\n{}",
        ] {
            assert!(Policy::decode(&mut &bad[..]).is_err(), "{bad:?}");
        }
    }
}
