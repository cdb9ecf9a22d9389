//! Recorded model exchanges and the cassette file that carries them out of a store.
//!
//! A cassette is JSON: a format name, a version, the run it was recorded from (its
//! mode, prompt and stored request — names only, never a key) and every model call of
//! the run, in order: the agent's name, its turn, the fingerprint of the request and
//! the full reply. Everything in it was read from the store, which holds rows redacted
//! already, and the text is redacted once more as it is written.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::digest::RequestDigest;
use crate::provider::Completion;

/// The `format` field of every cassette.
pub const CASSETTE_FORMAT: &str = "crewbox-cassette";

/// The cassette version this build reads and writes.
pub const CASSETTE_VERSION: u32 = 1;

/// The largest cassette read (a run's replies, megabytes at most, fit many times over).
pub const MAX_CASSETTE_BYTES: u64 = 256 * 1024 * 1024;

/// One model call as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// The calling agent's name.
    pub agent: String,
    /// Its 1-based turn (a fix round starts again at 1).
    pub turn: u32,
    /// The fingerprint of the request as sent.
    pub request: RequestDigest,
    /// The model's whole reply.
    pub reply: Completion,
}

impl From<crate::store::StoredExchange<RequestDigest, Completion>> for Exchange {
    fn from(x: crate::store::StoredExchange<RequestDigest, Completion>) -> Self {
        Self {
            agent: x.agent,
            turn: x.turn,
            request: x.request,
            reply: x.reply,
        }
    }
}

/// Reads the exchanges stored for run `run` (blocking), as a cassette holds them.
pub fn stored_exchanges(
    db: &Path,
    run: &crate::ids::RunId,
) -> Result<Vec<Exchange>, crate::store::StoreError> {
    let stored = crate::store::exchanges_blocking::<RequestDigest, Completion>(db, run)?;
    Ok(stored.into_iter().map(Exchange::from).collect())
}

/// The run a cassette was recorded from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedRun {
    /// Its id.
    pub id: String,
    /// The mode it ran in.
    pub mode: crate::vocab::Mode,
    /// How it ended.
    pub status: crate::vocab::RunStatus,
    /// Its prompt.
    pub prompt: String,
    /// Its stored request (names only, never secrets).
    pub spec: serde_json::Value,
}

/// A recorded run: what `crewbox export RUN --cassette FILE` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cassette {
    /// Always [`CASSETTE_FORMAT`].
    pub format: String,
    /// [`CASSETTE_VERSION`] when written by this build.
    pub version: u32,
    /// The run.
    pub run: RecordedRun,
    /// Every model call of the run, in the order they were made.
    pub exchanges: Vec<Exchange>,
}

/// Why a cassette could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    /// Where a cassette was to be written is something other than a regular file (a
    /// link, a directory, a FIFO, a device): writing would replace it.
    #[error(
        "cassette {}: is {what}, not a regular file; it is left as it is (give a new file's \
         path, or a regular file's to replace it)",
        path.display()
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What is there.
        what: &'static str,
    },
    /// The file cannot be read or written.
    #[error("cassette {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than a cassette may be.
    #[error("cassette {} is larger than {limit} bytes; refusing to read it", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        limit: u64,
    },
    /// The file is not JSON, or not a cassette's JSON.
    #[error("cassette {} is malformed: {detail}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        detail: String,
    },
    /// The file is a cassette of another version.
    #[error(
        "cassette {} has version {found}; this crewbox reads version {CASSETTE_VERSION} (export it again with this crewbox)",
        path.display()
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u64,
    },
}

impl Cassette {
    /// A cassette of `run` with `exchanges`.
    pub fn new(run: RecordedRun, exchanges: Vec<Exchange>) -> Self {
        Self {
            format: CASSETTE_FORMAT.into(),
            version: CASSETTE_VERSION,
            run,
            exchanges,
        }
    }

    /// Reads and checks the cassette at `path` (blocking: call it off the runtime or
    /// where config files are read).
    pub fn load(path: &Path) -> Result<Self, CassetteError> {
        let io = |source| CassetteError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let too_large = || CassetteError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_CASSETTE_BYTES,
        };
        if file.metadata().map_err(io)?.len() > MAX_CASSETTE_BYTES {
            return Err(too_large());
        }
        let mut text = Vec::new();
        // One byte past the cap tells a file at the cap from a larger one, without
        // trusting the size the file system reports (a pipe, a growing file).
        file.take(MAX_CASSETTE_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(io)?;
        if text.len() as u64 > MAX_CASSETTE_BYTES {
            return Err(too_large());
        }
        Self::parse(&text, path)
    }

    /// Parses a cassette's text; `path` names it in errors.
    pub fn parse(text: &[u8], path: &Path) -> Result<Self, CassetteError> {
        let malformed = |detail: String| CassetteError::Malformed {
            path: path.to_path_buf(),
            detail,
        };
        let value: serde_json::Value =
            serde_json::from_slice(text).map_err(|e| malformed(e.to_string()))?;
        let serde_json::Value::Object(top) = &value else {
            return Err(malformed("the top level is not a JSON object".into()));
        };
        if top.get("format").and_then(|f| f.as_str()) != Some(CASSETTE_FORMAT) {
            return Err(malformed(format!(
                "field `format` is not \"{CASSETTE_FORMAT}\" (not a crewbox cassette)"
            )));
        }
        match top.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(CASSETTE_VERSION) => {}
            Some(found) => {
                return Err(CassetteError::Version {
                    path: path.to_path_buf(),
                    found,
                });
            }
            None => {
                return Err(malformed(
                    "field `version` is missing or not a whole number".into(),
                ));
            }
        }
        let cassette: Self = serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
        for (i, x) in cassette.exchanges.iter().enumerate() {
            if x.turn == 0 || x.request.hash.len() != 64 {
                return Err(malformed(format!(
                    "exchange {i} (agent `{}`) has turn 0 or a request hash that is not a SHA-256",
                    x.agent
                )));
            }
        }
        Ok(cassette)
    }

    /// Writes the cassette to `path` (blocking), its text redacted once more: a file
    /// holds no key even if a row did.
    pub fn save(&self, path: &Path) -> Result<(), CassetteError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| CassetteError::Malformed {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        let text = crate::redact::clean(&text);
        let io = |source| CassetteError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Written beside it, then renamed over it: only a regular file (or nothing) is
        // replaced — a link, a FIFO or a device there (`/dev/stdout`, as root
        // `/dev/full`) became a regular file, and the reader or the device got nothing.
        match std::fs::symlink_metadata(path) {
            Ok(m) if !m.file_type().is_file() => {
                return Err(CassetteError::NotAFile {
                    path: path.to_path_buf(),
                    what: kind_of(&m.file_type()),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A name of its own, created new: no file of the user's is written over, and two
        // exports to one path do not share it.
        let tmp = path.with_file_name(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ));
        let written = (|| {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(io)
    }
}

/// What a directory entry that is not a regular file is, in words.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{StopReason, Usage};

    /// Probe 18: a link or a FIFO at the path became a regular file (as root, so did
    /// `/dev/full`); a regular file is replaced, and no temporary file stays.
    #[test]
    fn save_replaces_only_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let c = sample();
        for (path, what) in [(&link, "a symbolic link"), (&fifo, "a FIFO")] {
            match c.save(path) {
                Err(CassetteError::NotAFile { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        c.save(&target).unwrap();
        assert!(Cassette::load(&target).is_ok());
        let fresh = dir.path().join("new.json");
        c.save(&fresh).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    fn sample() -> Cassette {
        Cassette::new(
            RecordedRun {
                id: "r-1".into(),
                mode: crate::vocab::Mode::Single,
                status: crate::vocab::RunStatus::Completed,
                prompt: "p".into(),
                spec: serde_json::json!({}),
            },
            vec![Exchange {
                agent: "executor".into(),
                turn: 1,
                request: RequestDigest {
                    hash: "0".repeat(64),
                    messages: Vec::new(),
                    tools: "t".into(),
                    params: "p".into(),
                },
                reply: Completion {
                    thoughts: Vec::new(),
                    reasoning: String::new(),
                    text: "done".into(),
                    tool_calls: Vec::new(),
                    usage: Usage::default(),
                    stop: StopReason::EndTurn,
                },
            }],
        )
    }

    #[test]
    fn a_cassette_round_trips_and_hostile_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        sample().save(&path).unwrap();
        assert_eq!(Cassette::load(&path).unwrap(), sample());
        let p = Path::new("bad.json");
        let e = Cassette::parse(b"{not json", p).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("malformed"), "{e}");
        let e = Cassette::parse(b"[1]", p).unwrap_err().to_string();
        assert!(e.contains("not a JSON object"), "{e}");
        let e = Cassette::parse(br#"{"format":"crewbox-cassette","version":99}"#, p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("version 99"), "{e}");
        let e = Cassette::parse(br#"{"format":"other","version":1}"#, p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a crewbox cassette"), "{e}");
        let mut text = serde_json::to_value(sample()).unwrap();
        text["exchanges"][0]["turn"] = 0.into();
        let e = Cassette::parse(text.to_string().as_bytes(), p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("exchange 0"), "{e}");
    }
}
