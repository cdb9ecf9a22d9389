//! Why a streamable-HTTP server could not be started, in words. The SDK's own message
//! names its transport's Rust types (`Transport [rmcp::transport::worker::WorkerTransport<…>]`)
//! and hides the cause behind "Client error" or "Auth required": here the cause is
//! named — a refused connection, a name that does not resolve, a 401 with its
//! challenge, a status.

use std::error::Error;

use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::transport::worker::WorkerQuitReason;

type HttpError = StreamableHttpError<reqwest::Error>;

/// The longest challenge header quoted.
const MAX_CHALLENGE: usize = 200;

/// What went wrong when crewbox's `initialize` went to an HTTP server.
pub(super) fn start_error(e: &ClientInitializeError) -> String {
    let ClientInitializeError::TransportError { error, .. } = e else {
        return e.to_string();
    };
    let inner: &(dyn Error + Send + Sync) = &*error.error;
    let http = match inner.downcast_ref::<WorkerQuitReason<HttpError>>() {
        Some(WorkerQuitReason::Fatal { error, .. }) => Some(error),
        Some(other) => return other.to_string(),
        None => inner.downcast_ref::<HttpError>(),
    };
    match http {
        Some(h) => words(h),
        None => deepest(inner),
    }
}

fn words(e: &HttpError) -> String {
    match e {
        StreamableHttpError::Client(r) => request_failed(r),
        StreamableHttpError::AuthRequired(a) => format!(
            "the server asks for authorization (HTTP 401, `WWW-Authenticate: {}`): give it a \
             token with `bearer_token_env` or `headers` in your config",
            challenge(&a.www_authenticate_header)
        ),
        StreamableHttpError::InsufficientScope(s) => format!(
            "the server refused the credentials given (HTTP 403, `WWW-Authenticate: {}`)",
            challenge(&s.www_authenticate_header)
        ),
        StreamableHttpError::HttpStatus(s) => format!("the server answered HTTP {}", s.status),
        other => other.to_string(),
    }
}

fn challenge(header: &str) -> String {
    crate::text::escape(&crate::text::cut_marked(header, MAX_CHALLENGE, "…")).into_owned()
}

/// A request that got no answer: how (cannot connect, timed out), with its deepest
/// cause ("Connection refused (os error 111)", a name that does not resolve, TLS).
fn request_failed(r: &reqwest::Error) -> String {
    let how = if r.is_connect() {
        "cannot connect"
    } else if r.is_timeout() {
        "the request timed out"
    } else if r.is_redirect() {
        "the server redirects (crewbox follows no redirect of an MCP server)"
    } else {
        "the request failed"
    };
    let cause = deepest(r);
    if cause == r.to_string() {
        how.to_owned()
    } else {
        format!("{how}: {cause}")
    }
}

/// The message of the last error in `e`'s chain of causes.
fn deepest(e: &(dyn Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}
