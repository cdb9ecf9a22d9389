//! Remote URLs as a worker compares them: parsed and normalised, never as strings.
//!
//! `scheme://[user@]host[:port]/path`, scp-like `[user@]host:path` (ssh) and
//! `file://`/absolute paths are understood. Normalised: scheme and host lowercased, a
//! scheme's default port dropped, the user (and any password) dropped, the path's `.`,
//! `..` and duplicate slashes resolved lexically (never above its root) and a trailing
//! slash dropped. An allowed prefix matches a remote of the same scheme, host and port
//! whose path starts with the prefix's path at a segment boundary:
//! `file:///srv/remote` allows `file:///srv/remote/a.git`, never
//! `file:///srv/remote-private/a.git` or `file:///srv/remote/../private/a.git`.

use std::fmt;

/// A remote URL, normalised.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RemoteUrl {
    scheme: String,
    host: String,
    port: Option<u16>,
    segments: Vec<String>,
}

/// Why a string is not a remote URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{url}` is not a remote URL: {reason}")]
pub struct RemoteUrlError {
    /// The text, as given.
    pub url: String,
    /// What is wrong.
    pub reason: &'static str,
}

impl RemoteUrl {
    /// Parses and normalises `text`.
    pub fn parse(text: &str) -> Result<Self, RemoteUrlError> {
        let err = |reason| RemoteUrlError {
            url: text.to_owned(),
            reason,
        };
        if text.trim().is_empty() {
            return Err(err("it is empty"));
        }
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(err("it contains whitespace or control characters"));
        }
        let (scheme, rest) = if let Some((scheme, rest)) = text.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            if scheme.is_empty()
                || !scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            {
                return Err(err("its scheme is not valid"));
            }
            (scheme, rest.to_owned())
        } else if text.starts_with('/') {
            ("file".to_owned(), text.to_owned())
        } else if let Some((host, path)) = text.split_once(':') {
            // scp-like: [user@]host:path
            if host.is_empty() || host.contains('/') {
                return Err(err("it has no scheme and is not an absolute path"));
            }
            ("ssh".to_owned(), format!("{host}/{path}"))
        } else {
            return Err(err("it has no scheme and is not an absolute path"));
        };
        let (authority, path) = if scheme == "file" {
            let path = rest.strip_prefix("localhost").unwrap_or(&rest);
            if !path.starts_with('/') {
                return Err(err("a file URL needs an absolute path"));
            }
            (String::new(), path.to_owned())
        } else {
            match rest.find('/') {
                Some(i) => (rest[..i].to_owned(), rest[i..].to_owned()),
                None => (rest.clone(), String::new()),
            }
        };
        let hostport = authority
            .rsplit_once('@')
            .map_or(&authority[..], |(_, h)| h);
        // `[v6]:port`, `[v6]`, `host:port`, `host`.
        let split = match hostport.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((h, "")) => (h, None),
                Some((h, p)) => (h, Some(p.strip_prefix(':').unwrap_or(p))),
                None => return Err(err("its host is not valid")),
            },
            None => match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            },
        };
        let (host, port) = match split {
            (h, None | Some("")) => (h, None),
            (h, Some(p)) => (
                h,
                Some(
                    p.parse::<u16>()
                        .map_err(|_| err("its port is not a number"))?,
                ),
            ),
        };
        if scheme != "file" && host.is_empty() {
            return Err(err("it names no host"));
        }
        let default = match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            "ssh" | "git+ssh" | "ssh+git" => Some(22),
            "git" => Some(9418),
            _ => None,
        };
        let port = port.filter(|p| Some(*p) != default);
        let mut segments: Vec<String> = Vec::new();
        for seg in path.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    segments.pop();
                }
                s => segments.push(s.to_owned()),
            }
        }
        Ok(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
            segments,
        })
    }

    /// Whether `self` is `prefix` or beneath it (same scheme, host and port; `prefix`'s
    /// path segments are the first of `self`'s).
    pub fn within(&self, prefix: &RemoteUrl) -> bool {
        self.scheme == prefix.scheme
            && self.host == prefix.host
            && self.port == prefix.port
            && self.segments.starts_with(&prefix.segments)
    }
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        write!(f, "/{}", self.segments.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> RemoteUrl {
        RemoteUrl::parse(s).unwrap()
    }

    #[test]
    fn spellings_of_one_remote_are_one_url() {
        for s in [
            "file:///x/repo",
            "file:///x//repo/",
            "file:///x/./repo",
            "file:///x/y/../repo",
            "/x/repo",
            "file://localhost/x/repo",
        ] {
            assert_eq!(u(s), u("file:///x/repo"), "{s}");
            assert_eq!(u(s).to_string(), "file:///x/repo", "{s}");
        }
        assert_eq!(
            u("HTTPS://GitHub.com:443/org//repo.git"),
            u("https://token@github.com/org/repo.git")
        );
        assert_eq!(u("git@github.com:org/repo"), u("ssh://github.com/org/repo"));
        assert_ne!(u("file:///x/repo"), u("file:///x/repo2"));
        assert_ne!(u("https://h:8443/r"), u("https://h/r"));
    }

    #[test]
    fn a_prefix_matches_at_segment_boundaries_only() {
        let allow = u("file:///srv/remote/");
        assert!(u("file:///srv/remote/a.git").within(&allow));
        assert!(u("file:///srv/remote").within(&allow));
        assert!(!u("file:///srv/remote/../private/secret.git").within(&allow));
        assert!(!u("file:///srv/remote-private/a.git").within(&allow));
        assert!(!u("https://srv/remote/a.git").within(&allow));
        let gh = u("https://github.com/org");
        assert!(u("https://github.com/org/repo").within(&gh));
        assert!(!u("https://github.com/organisation/repo").within(&gh));
        assert!(!u("https://github.com.evil.test/org/repo").within(&gh));
        assert!(!u("https://github.com:444/org/repo").within(&gh));
    }

    #[test]
    fn what_is_no_url_is_an_error() {
        for s in [
            "",
            "   ",
            "relative/path",
            "file://relative",
            "https:///x",
            "a b",
        ] {
            assert!(RemoteUrl::parse(s).is_err(), "{s:?}");
        }
        assert!(
            RemoteUrl::parse("")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
    }
}
