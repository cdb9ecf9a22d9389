//! Streamable HTTP (the SDK's server transport) on an address the user gave:
//! loopback unless `--allow-remote`, and every request must carry
//! `Authorization: Bearer TOKEN` with the token from the environment variable the
//! user named (compared in constant time); anything else is `401`. A POST body is read
//! here first, within [`MAX_REQUEST_BYTES`](super::MAX_REQUEST_BYTES) (over it: `413`),
//! and one that is not a JSON-RPC message gets `400` with a JSON-RPC error (`-32700`
//! when it is not JSON, `-32600` with its id when it is JSON of another shape), as
//! the transport's specification asks; the SDK alone answered `415` in plain text.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{Request, Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::ids::{self, Admit, InFlight};
use super::{MAX_REQUEST_BYTES, Server};

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// Why HTTP serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A non-loopback address without `--allow-remote`.
    #[error(
        "{0} is not a loopback address: crewbox serves MCP over HTTP on 127.0.0.1 or ::1 only, \
         unless you pass --allow-remote (anyone who can reach it and has the token can run agents)"
    )]
    NotLoopback(SocketAddr),
    /// No `--token-env`.
    #[error(
        "--http needs a bearer token: put one in an environment variable and pass \
         --token-env VAR (clients send `Authorization: Bearer <token>`)"
    )]
    NoTokenEnv,
    /// The variable is unset or empty.
    #[error("--token-env {0}: the variable is not set or empty")]
    NoToken(String),
    /// The token is too short to be a secret.
    #[error("--token-env {var}: the token is {len} characters; use at least 16")]
    ShortToken {
        /// The variable.
        var: String,
        /// Its length.
        len: usize,
    },
    /// The token cannot be a secret: whitespace or control characters (a header
    /// cannot carry them as written), or too few different characters.
    #[error(
        "--token-env {var}: the token {why}; use a random one, e.g. `head -c 24 /dev/urandom | base64`"
    )]
    WeakToken {
        /// The variable.
        var: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// How to serve over HTTP.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// Whether a non-loopback address is allowed.
    pub allow_remote: bool,
    /// The environment variable holding the bearer token.
    pub token_env: Option<String>,
}

impl HttpOptions {
    /// The token, after checking the address and the variable.
    pub fn check(&self) -> Result<String, HttpError> {
        if !self.addr.ip().is_loopback() && !self.allow_remote {
            return Err(HttpError::NotLoopback(self.addr));
        }
        let var = self.token_env.as_deref().ok_or(HttpError::NoTokenEnv)?;
        let token = std::env::var(var)
            .ok()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| HttpError::NoToken(var.to_owned()))?;
        if token.chars().count() < 16 {
            return Err(HttpError::ShortToken {
                var: var.to_owned(),
                len: token.chars().count(),
            });
        }
        let weak = |why| HttpError::WeakToken {
            var: var.to_owned(),
            why,
        };
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(weak("holds whitespace or control characters"));
        }
        let distinct: std::collections::BTreeSet<char> = token.chars().collect();
        if distinct.len() < MIN_DISTINCT_TOKEN_CHARS {
            return Err(weak("repeats too few different characters to be a secret"));
        }
        crate::redact::register(&token);
        Ok(token)
    }
}

/// The fewest different characters a bearer token may have (`aaaaaaaaaaaaaaaa` is no
/// secret; 24 random bytes in base64 have about 20).
const MIN_DISTINCT_TOKEN_CHARS: usize = 8;

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Whether the request's `Origin` (sent by browsers) may reach the server: none, or a
/// loopback origin (`http://localhost:5173`, `http://127.0.0.1`, `http://[::1]`); any
/// with `--allow-remote`, where the bearer token alone guards the server. A page a
/// browser loaded from elsewhere (DNS rebinding, or the opaque `null` origin) is
/// refused, as the MCP transport asks of servers.
fn origin_allowed<B>(req: &Request<B>, allow_remote: bool) -> bool {
    let Some(origin) = req.headers().get(hyper::header::ORIGIN) else {
        return true;
    };
    if allow_remote {
        return true;
    }
    let Some(url) = origin
        .to_str()
        .ok()
        .and_then(|o| reqwest::Url::parse(o).ok())
    else {
        return false;
    };
    let host = url.host_str().unwrap_or_default();
    matches!(url.scheme(), "http" | "https")
        && (host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()))
}

/// Whether the request carries `Authorization: Bearer <token>`.
fn authorized<B>(req: &Request<B>, token: &str) -> bool {
    let Some(value) = req.headers().get(hyper::header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some(given) = value
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
        .map(|_| &value[7..])
    else {
        return false;
    };
    constant_time_eq(given, token.as_bytes())
}

type Body = BoxBody<Bytes, Infallible>;
/// The SDK's streamable HTTP service of crewbox's server.
type Mcp = StreamableHttpService<Server, Sessions>;

/// The most HTTP sessions open at once. A session ends when its client closes it
/// (`DELETE`), after 5 minutes without a request, or with the server; past the bound a
/// new `initialize` is refused until one ends (each session holds a task and its
/// queues: a client opening sessions in a loop grew the server without bound).
pub const MAX_SESSIONS: usize = 256;

/// The SDK's in-memory sessions, at most [`MAX_SESSIONS`] of them, with each
/// session's request ids in flight ([`super::ids`]): a request reusing the id of one
/// whose response stream is open is answered with an error and never reaches the SDK.
#[derive(Debug, Default)]
pub struct Sessions {
    inner: LocalSessionManager,
    /// Held while a session is counted and made, so two cannot pass the bound together.
    creating: tokio::sync::Mutex<()>,
    flights: std::sync::Mutex<std::collections::HashMap<SessionId, Arc<InFlight>>>,
}

impl Sessions {
    fn flight(&self, id: &SessionId) -> Arc<InFlight> {
        self.flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.clone())
            .or_default()
            .clone()
    }
}

/// A request in flight while its response stream lasts.
struct Flying {
    flight: Arc<InFlight>,
    key: String,
    generation: u64,
}

impl Drop for Flying {
    fn drop(&mut self) {
        self.flight.end(&self.key, Some(self.generation));
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// [`MAX_SESSIONS`] are open.
    #[error(
        "{MAX_SESSIONS} sessions are open, the most this server keeps; close one (DELETE \
         with its Mcp-Session-Id) or wait until an idle one ends"
    )]
    Full,
    /// The SDK's own error.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one = self.creating.lock().await;
        let open = self.inner.sessions.read().await;
        if open.len() >= MAX_SESSIONS {
            return Err(SessionsError::Full);
        }
        // Sessions the SDK ended (idle) keep no ids here.
        self.flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|id, _| open.contains_key(id));
        drop(open);
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        use futures::StreamExt as _;
        let flying = match &message {
            ClientJsonRpcMessage::Request(request) => {
                let flight = self.flight(id);
                let key = ids::key(&request.id);
                match flight.admit(&key) {
                    Admit::Yes(generation) => Some(Flying {
                        flight,
                        key,
                        generation,
                    }),
                    refused => {
                        let answer = ServerJsonRpcMessage::error(
                            ids::refusal(refused, &key),
                            Some(request.id.clone()),
                        );
                        let one = ServerSseMessage::from_message(answer);
                        return Ok(futures::future::Either::Left(futures::stream::iter([one])));
                    }
                }
            }
            _ => None,
        };
        let stream = self.inner.create_stream(id, message).await?;
        Ok(futures::future::Either::Right(stream.map(move |m| {
            let _in_flight = &flying;
            m
        })))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let cancelled = match &message {
            ClientJsonRpcMessage::Notification(n) => match &n.notification {
                rmcp::model::ClientNotification::CancelledNotification(c) => {
                    c.params.request_id.as_ref().map(ids::key)
                }
                _ => None,
            },
            _ => None,
        };
        self.inner.accept_message(id, message).await?;
        // Passed on first: the SDK cancels the call before its id may be used again.
        if let Some(key) = cancelled {
            self.flight(id).end(&key, None);
        }
        Ok(())
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// How long a connection may take to send a request's head.
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = code;
    response
}

/// `400` with a JSON-RPC error for a body that is not one JSON-RPC message a client
/// may send (`None` when it is): the parse error, or the shape error under the body's
/// `id` when it has one.
fn not_a_message(body: &[u8]) -> Option<Response<Body>> {
    let e = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(body).err()?;
    let (id, code, message) = match serde_json::from_slice::<serde_json::Value>(body) {
        Err(parse) => (
            serde_json::Value::Null,
            -32700,
            super::not_json(&parse.to_string()),
        ),
        Ok(value) => {
            let id = value
                .get("id")
                .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
                .cloned()
                .unwrap_or(serde_json::Value::Null);
            match super::params_error(&value) {
                Some(why) => (id, -32602, why),
                None => (
                    id,
                    -32600,
                    format!(
                        "request refused: it is not a JSON-RPC message an MCP client sends ({})",
                        super::detail(&e.to_string())
                    ),
                ),
            }
        }
    };
    Some(json_error(StatusCode::BAD_REQUEST, id, code, &message))
}

/// `code` with a JSON-RPC error under `id` as its body.
fn json_error(
    code: StatusCode,
    id: serde_json::Value,
    error: i64,
    message: &str,
) -> Response<Body> {
    let answer = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "error": {"code": error, "message": message},
    });
    let mut response = Response::new(Full::new(Bytes::from(answer.to_string())).boxed());
    *response.status_mut() = code;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The refusal of a request the session rules do not let through, or `None`: a
/// request other than `initialize` outside a session (`400`), an `initialize` inside
/// one (`400`, as over stdio: the SDK answered it as a fresh handshake in the middle of
/// the session), or one past [`MAX_SESSIONS`] (`503`: the SDK's `500` read like a
/// crash).
async fn session_refusal(
    sessions: &Sessions,
    in_session: bool,
    body: &[u8],
) -> Option<Response<Body>> {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(default)]
        id: Option<serde_json::Value>,
        #[serde(default)]
        method: Option<String>,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    if head.method.as_deref() != Some("initialize") {
        // A request outside any session: crewbox serves in sessions (their bound and
        // cancellation are per session; the SDK served a request that carried its own
        // protocol fields in `_meta` without one, around both).
        return match (&head.id, head.method.is_some(), in_session) {
            (Some(id), true, false) => Some(json_error(
                StatusCode::BAD_REQUEST,
                id.clone(),
                -32600,
                "request refused: no session (Mcp-Session-Id): send `initialize` first, then \
                 each request with the session id it answered",
            )),
            _ => None,
        };
    }
    let id = head.id.unwrap_or(serde_json::Value::Null);
    if in_session {
        return Some(json_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            "request refused: this session is initialized already (one `initialize` per \
             session; open another session without Mcp-Session-Id)",
        ));
    }
    if sessions.inner.sessions.read().await.len() >= MAX_SESSIONS {
        return Some(json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            id,
            -32000,
            &format!("request refused: {}", SessionsError::Full),
        ));
    }
    None
}

/// Hands an authorized request to the SDK; a POST body sent as JSON is read first,
/// within [`MAX_REQUEST_BYTES`], and refused unless it is a JSON-RPC message.
async fn handle(
    mcp: &Mcp,
    sessions: &Sessions,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let session = req
        .headers()
        .get(rmcp::transport::common::http_header::HEADER_SESSION_ID)
        .is_some();
    // Closing a session that is not open (never was, or closed already): `404`, as
    // for any other request naming it (the SDK answered `202`).
    if req.method() == hyper::Method::DELETE
        && let Some(id) = req
            .headers()
            .get(rmcp::transport::common::http_header::HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
        && !sessions
            .has_session(&id.to_owned().into())
            .await
            .unwrap_or(true)
    {
        return status(StatusCode::NOT_FOUND, "not found: no such session\n");
    }
    // Another method, or a body not sent as JSON (the SDK answers `415`).
    let json = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if req.method() == hyper::Method::DELETE {
        // A session closed: `200` (the SDK's `202` is a failure to clients that take
        // only `200` and `204`, as the Python SDK does, which warned on every exit).
        let mut response = mcp.handle(req).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::OK;
        }
        return response;
    }
    if req.method() != hyper::Method::POST || !json {
        return mcp.handle(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match http_body_util::Limited::new(body, MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request refused: its body is over the limit of 1048576 bytes (1 MiB)\n",
            );
        }
        Err(e) => {
            tracing::debug!(error = %e, "reading a request body failed");
            return status(
                StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            );
        }
    };
    if let Some(refused) = session_refusal(sessions, session, &bytes).await {
        return refused;
    }
    match not_a_message(&bytes) {
        Some(refused) => refused,
        None => {
            mcp.handle(Request::from_parts(parts, Full::new(bytes)))
                .await
        }
    }
}

/// Serves `server` on `addr` until `shutdown` is cancelled. Says where on stderr.
pub async fn serve(
    server: Server,
    opts: &HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), HttpError> {
    let token: Arc<str> = opts.check()?.into();
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: opts.addr,
            source,
        })?;
    let local = listener.local_addr().unwrap_or(opts.addr);
    let mut config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
        .with_cancellation_token(shutdown.child_token());
    if opts.allow_remote {
        // The bearer token guards it; a remote client names the host as it reaches it.
        config = config.disable_allowed_hosts();
    }
    let sessions = Arc::new(Sessions::default());
    let mcp: Mcp =
        StreamableHttpService::new(move || Ok(server.session()), sessions.clone(), config);
    let _ = std::io::Write::write_all(
        &mut crate::text::stderr(),
        format!("crewbox: serving MCP on http://{local}{PATH}\n").as_bytes(),
    );
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let (mcp, token, stop) = (mcp.clone(), token.clone(), shutdown.clone());
        let sessions = sessions.clone();
        let allow_remote = opts.allow_remote;
        // Each connection ends with its client, or gracefully at shutdown.
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let (mcp, token, sessions) = (mcp.clone(), token.clone(), sessions.clone());
                async move {
                    if !origin_allowed(&req, allow_remote) {
                        return Ok(status(
                            StatusCode::FORBIDDEN,
                            "forbidden: requests from a web page of another origin are refused\n",
                        ));
                    }
                    if !authorized(&req, &token) {
                        let mut r = status(StatusCode::UNAUTHORIZED, "unauthorized\n");
                        r.headers_mut().insert(
                            hyper::header::WWW_AUTHENTICATE,
                            hyper::header::HeaderValue::from_static("Bearer"),
                        );
                        return Ok::<_, Infallible>(r);
                    }
                    if req.uri().path() != PATH {
                        return Ok(status(StatusCode::NOT_FOUND, "not found: MCP is at /mcp\n"));
                    }
                    Ok(handle(&mcp, &sessions, req).await)
                }
            });
            // A client that does not send its request's head within the timeout is
            // disconnected: idle half-open connections hold no descriptor for long.
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => if let Err(e) = r {
                    tracing::debug!(error = %e, "HTTP connection ended");
                },
                () = stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_reach_a_loopback_server() {
        let req = |o: Option<&str>| {
            let mut b = Request::builder();
            if let Some(o) = o {
                b = b.header("origin", o);
            }
            b.body(()).unwrap()
        };
        for ok in [
            None,
            Some("http://localhost:5173"),
            Some("http://127.0.0.1"),
            Some("https://[::1]:8443"),
        ] {
            assert!(origin_allowed(&req(ok), false), "{ok:?}");
        }
        for bad in [
            "http://evil.example.com",
            "null",
            "http://127.0.0.1.nip.io",
            "http://localhost.evil.com",
            "file:///etc",
            "not a url",
        ] {
            assert!(!origin_allowed(&req(Some(bad)), false), "{bad}");
            assert!(origin_allowed(&req(Some(bad)), true), "{bad}");
        }
    }

    #[test]
    fn a_token_that_is_no_secret_is_refused() {
        let check = |token: &str| {
            // SAFETY: a variable only this test reads, set before it is read.
            unsafe { std::env::set_var("CREWBOX_TEST_WEAK_TOKEN", token) };
            HttpOptions {
                addr: "127.0.0.1:0".parse().unwrap(),
                allow_remote: false,
                token_env: Some("CREWBOX_TEST_WEAK_TOKEN".into()),
            }
            .check()
        };
        for weak in [
            "                ",
            "aaaaaaaaaaaaaaaa",
            "abababababababab",
            "abcdefgh ijklmnop",
        ] {
            assert!(
                matches!(check(weak), Err(HttpError::WeakToken { .. })),
                "{weak:?}"
            );
        }
        assert!(check("s3cret-token-0123456789").is_ok());
    }

    #[test]
    fn tokens_compare_equal_only_when_identical() {
        assert!(constant_time_eq(b"abcdef", b"abcdef"));
        assert!(!constant_time_eq(b"abcdef", b"abcdeg"));
        assert!(!constant_time_eq(b"abc", b"abcdef"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn the_bearer_header_is_required_and_checked() {
        let req = |h: Option<&str>| {
            let mut b = Request::builder();
            if let Some(h) = h {
                b = b.header("authorization", h);
            }
            b.body(()).unwrap()
        };
        let token = "0123456789abcdef";
        assert!(authorized(&req(Some("Bearer 0123456789abcdef")), token));
        assert!(authorized(&req(Some("bearer 0123456789abcdef")), token));
        assert!(!authorized(&req(Some("Bearer 0123456789abcdeX")), token));
        assert!(!authorized(&req(Some("Basic 0123456789abcdef")), token));
        assert!(!authorized(&req(Some("Bearer")), token));
        assert!(!authorized(&req(None), token));
    }

    #[test]
    fn a_remote_address_needs_allow_remote_and_a_token_is_required() {
        let opts = |addr: &str, allow_remote, env: Option<&str>| HttpOptions {
            addr: addr.parse().unwrap(),
            allow_remote,
            token_env: env.map(str::to_owned),
        };
        assert!(matches!(
            opts("0.0.0.0:1", false, Some("X")).check(),
            Err(HttpError::NotLoopback(_))
        ));
        assert!(matches!(
            opts("127.0.0.1:1", false, None).check(),
            Err(HttpError::NoTokenEnv)
        ));
        assert!(matches!(
            opts("127.0.0.1:1", false, Some("CREWBOX_TEST_SURELY_UNSET_VAR")).check(),
            Err(HttpError::NoToken(_))
        ));
    }
}
