//! Where traces are exported: resolved from the user's `[telemetry]` table and the
//! standard `OTEL_*` environment variables — never from a repository (`telemetry` is
//! a user-only key, see `trust::rules`). Telemetry is off unless an endpoint is set.

use crate::config::user::TelemetryFile;

/// The traces path beneath a base endpoint (the OTLP/HTTP convention).
const TRACES_PATH: &str = "/v1/traces";

/// A resolved export target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpTarget {
    /// The full traces URL.
    pub traces_endpoint: String,
    /// Where the endpoint came from (an environment variable or the user's config).
    pub origin: &'static str,
    /// Headers sent with every export (values are secrets: registered for redaction).
    pub headers: Vec<(String, String)>,
    /// The `service.name` resource attribute.
    pub service_name: String,
}

/// Why the telemetry settings cannot be used (export stays off; the CLI warns).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TelemetryError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("{origin}: the OTLP endpoint `{endpoint}` is not an http:// or https:// URL")]
    Endpoint {
        /// Where it was set.
        origin: &'static str,
        /// The value (redacted when shown).
        endpoint: String,
    },
    /// A header entry is not `name=value`.
    #[error("{origin}: a header entry is not `name=value` (entries are comma separated)")]
    Header {
        /// Which variable held it.
        origin: String,
    },
}

/// Resolves the export target from the user's table and `env` (a lookup of environment
/// variables). Environment variables win over the file, so one invocation can point
/// elsewhere; `OTEL_SDK_DISABLED=true` turns export off.
pub fn resolve(
    file: &TelemetryFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<OtlpTarget>, TelemetryError> {
    let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let (endpoint, origin) = if let Some(e) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        (e, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    } else if let Some(e) = set("OTEL_EXPORTER_OTLP_ENDPOINT") {
        (traces_url(&e), "OTEL_EXPORTER_OTLP_ENDPOINT")
    } else if let Some(e) = file
        .otlp_endpoint
        .as_deref()
        .filter(|e| !e.trim().is_empty())
    {
        (traces_url(e), "[telemetry] otlp_endpoint")
    } else {
        return Ok(None);
    };
    let endpoint = endpoint.trim().to_owned();
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(TelemetryError::Endpoint { origin, endpoint });
    }
    let mut headers = Vec::new();
    if let Some(var) = &file.otlp_headers_env
        && let Some(text) = set(var)
    {
        headers.extend(parse_headers(&text, var)?);
    }
    for var in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    ] {
        if let Some(text) = set(var) {
            for (k, v) in parse_headers(&text, var)? {
                headers.retain(|(have, _)| !have.eq_ignore_ascii_case(&k));
                headers.push((k, v));
            }
        }
    }
    let service_name = set("OTEL_SERVICE_NAME")
        .or_else(|| file.service_name.clone())
        .unwrap_or_else(|| "crewbox".to_owned());
    Ok(Some(OtlpTarget {
        traces_endpoint: endpoint,
        origin,
        headers,
        service_name,
    }))
}

/// A base endpoint's traces URL.
fn traces_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        base.to_owned()
    } else {
        format!("{base}{TRACES_PATH}")
    }
}

/// `k=v,k2=v2` with percent-encoded values left as written (the OTel format).
fn parse_headers(text: &str, origin: &str) -> Result<Vec<(String, String)>, TelemetryError> {
    text.split(',')
        .filter(|e| !e.trim().is_empty())
        .map(|entry| {
            let (k, v) = entry
                .split_once('=')
                .ok_or_else(|| TelemetryError::Header {
                    origin: origin.to_owned(),
                })?;
            let k = k.trim();
            if k.is_empty() {
                return Err(TelemetryError::Header {
                    origin: origin.to_owned(),
                });
            }
            Ok((k.to_owned(), v.trim().to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn file(endpoint: Option<&str>, headers_env: Option<&str>) -> TelemetryFile {
        TelemetryFile {
            otlp_endpoint: endpoint.map(str::to_owned),
            otlp_headers_env: headers_env.map(str::to_owned),
            service_name: None,
        }
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert_eq!(resolve(&file(None, None), &with(&[])), Ok(None));
        assert_eq!(
            resolve(&file(Some(" "), None), &with(&[("OTEL_SERVICE_NAME", "x")])),
            Ok(None)
        );
    }

    #[test]
    fn environment_wins_over_the_file_and_the_signal_variable_is_used_as_is() {
        let f = file(Some("http://file:4318"), None);
        let t = resolve(&f, &with(&[])).unwrap().unwrap();
        assert_eq!(t.traces_endpoint, "http://file:4318/v1/traces");
        assert_eq!(t.service_name, "crewbox");
        let env = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318/")]);
        let t = resolve(&f, &env).unwrap().unwrap();
        assert_eq!(t.traces_endpoint, "http://env:4318/v1/traces");
        assert_eq!(t.origin, "OTEL_EXPORTER_OTLP_ENDPOINT");
        let env = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://sig:1/custom"),
            ("OTEL_SERVICE_NAME", "ci"),
        ]);
        let t = resolve(&f, &env).unwrap().unwrap();
        assert_eq!(t.traces_endpoint, "http://sig:1/custom");
        assert_eq!(t.service_name, "ci");
        let off = with(&[("OTEL_SDK_DISABLED", "TRUE")]);
        assert_eq!(resolve(&f, &off), Ok(None));
    }

    #[test]
    fn headers_come_from_the_named_variable_then_the_standard_ones() {
        let f = file(Some("https://c"), Some("MY_OTLP_AUTH"));
        let env = with(&[
            ("MY_OTLP_AUTH", "authorization=Bearer s3cret, x-team=a"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "X-Team=b"),
        ]);
        let t = resolve(&f, &env).unwrap().unwrap();
        assert_eq!(
            t.headers,
            vec![
                ("authorization".to_owned(), "Bearer s3cret".to_owned()),
                ("X-Team".to_owned(), "b".to_owned())
            ]
        );
        let bad = with(&[("MY_OTLP_AUTH", "no-equals-sign")]);
        assert!(matches!(
            resolve(&f, &bad),
            Err(TelemetryError::Header { origin }) if origin == "MY_OTLP_AUTH"
        ));
    }

    #[test]
    fn only_http_urls() {
        let f = file(Some("file:///etc/passwd"), None);
        assert!(matches!(
            resolve(&f, &with(&[])),
            Err(TelemetryError::Endpoint { .. })
        ));
    }
}
