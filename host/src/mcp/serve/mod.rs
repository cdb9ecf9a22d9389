//! `crewbox mcp serve`: crewbox as an MCP server, so any MCP client (Claude Code,
//! Codex, Cursor, Goose…) can hand work to a crew of one repository, under exactly
//! the rules of the CLI (the repository is opened with [`Repository::open`]; an
//! untrusted one's config and plugins are ignored; the user's config decides
//! providers, sandbox and quotas).
//!
//! - [`tools`]: the tools (input schemas, descriptions for a model, annotations) and
//!   their arguments, checked strictly.
//! - [`ops`]: each tool on the library the CLI commands use (the same functions, the
//!   same sentences).
//! - [`runs`]: runs started here: the id at once, or waiting for the report with
//!   progress notifications; a cancelled wait stops the run, a disconnect does not.
//! - [`resources`]: `crewbox://runs/{run_id}` and `crewbox://runs/{run_id}/events`.
//! - [`limit`]: stdio requests over [`MAX_REQUEST_BYTES`] are refused with an error.
//! - [`ids`]: a request reusing the id of one in flight is refused in front of the SDK.
//! - [`http`]: streamable HTTP on loopback with a bearer token.
//!
//! The JSON-RPC framing, the handshake and both transports are the official SDK's
//! (`rmcp`); stdout carries only its messages.

pub mod http;
pub mod ids;
pub mod ops;
pub mod resources;
pub mod runs;
pub mod tools;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, CustomRequest, CustomResult, ErrorData, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, RequestId, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::lines::{self, detail};
use crate::engine::{Engine, EngineError};
use crate::repository::Repository;

/// The largest request accepted (JSON-RPC message or HTTP body), in bytes.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// Why the server could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The engine of the repository could not be opened.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The transport failed.
    #[error("MCP transport: {0}")]
    Transport(String),
    /// The HTTP listener could not be set up.
    #[error("{0}")]
    Http(#[from] http::HttpError),
}

/// The MCP server of one repository. Cheap to clone: clones share the engine, the
/// runs started here and the cancellations seen; each HTTP session is served by one of
/// [`session`](Self::session), whose cancellations are its own.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
    /// The session this clone serves (0 over stdio, where there is one).
    session: u64,
}

/// A waiting call: its session and its request id (two sessions number their requests
/// alike; one's cancellation never reaches the other's call).
type CallKey = (u64, RequestId);

struct Shared {
    repo: Repository,
    engine: Engine,
    runs: runs::InFlight,
    /// Which waiting calls a client cancelled with `notifications/cancelled` (a
    /// request whose context is cancelled without one was cut by a disconnect).
    cancelled: Mutex<Cancels>,
    cancelled_seen: Notify,
    /// The last session number given out.
    sessions: std::sync::atomic::AtomicU64,
    /// Whether a client may ask for the network for agents' commands (`run` with
    /// `network: true`): the user's choice when starting the server, never a client's.
    allow_network: bool,
}

impl Server {
    /// Opens the engine of `repo`. Runs in flight are left resumable when `shutdown`
    /// is cancelled.
    pub async fn open(repo: Repository, shutdown: CancellationToken) -> Result<Self, ServeError> {
        Self::open_with(repo, shutdown, false).await
    }

    /// [`open`](Self::open), with whether clients may ask for the network for agents'
    /// commands (`crewbox mcp serve --allow-network`); without it a `run` asking for it
    /// is refused.
    pub async fn open_with(
        repo: Repository,
        shutdown: CancellationToken,
        allow_network: bool,
    ) -> Result<Self, ServeError> {
        let engine = repo.engine(shutdown).await?;
        Ok(Self {
            shared: Arc::new(Shared {
                repo,
                engine,
                runs: runs::InFlight::default(),
                cancelled: Mutex::new(Cancels::default()),
                cancelled_seen: Notify::new(),
                sessions: std::sync::atomic::AtomicU64::new(0),
                allow_network,
            }),
            session: 0,
        })
    }

    /// A clone for a new session (HTTP): the same server, cancellations of its own.
    pub fn session(&self) -> Self {
        let n = self
            .shared
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        Self {
            shared: self.shared.clone(),
            session: n,
        }
    }

    /// Whether clients may ask for the network for agents' commands.
    pub fn allows_network(&self) -> bool {
        self.shared.allow_network
    }

    /// The engine runs are started on.
    pub fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    /// The repository served.
    pub fn repo(&self) -> &Repository {
        &self.shared.repo
    }

    /// Runs started by this server that have not ended.
    pub fn runs(&self) -> &runs::InFlight {
        &self.shared.runs
    }

    /// Serves one client over stdin/stdout until it disconnects. Runs it started
    /// are not stopped by the disconnect; [`runs`](Self::runs) says which go on.
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        use rmcp::ServiceExt as _;
        let (stdin, stdout) = rmcp::transport::stdio();
        let stdin = lines::bounded(stdin, MAX_REQUEST_BYTES, lines::Reader::Server);
        let guarded = ids::stdio(stdin, stdout);
        let served = async {
            let running = self
                .clone()
                .serve((guarded.input, guarded.output))
                .await
                .map_err(|e| ServeError::Transport(e.to_string()))?;
            running
                .waiting()
                .await
                .map_err(|e| ServeError::Transport(e.to_string()))
        }
        .await;
        // The SDK's side is closed now: its last lines are written, then reading ends.
        let _ = guarded.written.await;
        guarded.reading.abort();
        served.map(|_| ())
    }

    /// Whether the client cancelled request `id` (rather than disconnecting): waits a
    /// moment for its `notifications/cancelled`, which follows the token.
    async fn client_cancelled(&self, id: &RequestId) -> bool {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            let seen = self.shared.cancelled_seen.notified();
            if self.take_cancelled(id) {
                return true;
            }
            if tokio::time::timeout_at(deadline, seen).await.is_err() {
                return self.take_cancelled(id);
            }
        }
    }

    fn take_cancelled(&self, id: &RequestId) -> bool {
        self.cancels().cancelled.remove(&(self.session, id.clone()))
    }

    fn cancels(&self) -> std::sync::MutexGuard<'_, Cancels> {
        self.shared
            .cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks call `id` of this session as one that waits (a `run` or `resume` with
    /// `wait`) until the guard drops: only such calls' cancellations are kept, and only
    /// while they last, so the set never outgrows the calls in flight. `None` when a
    /// call of this session with the same id waits already (JSON-RPC ids are unique
    /// among a client's requests in flight; the second could never be told apart).
    fn waiting(&self, id: RequestId) -> Option<Waiting> {
        let key = (self.session, id);
        if !self.cancels().waiting.insert(key.clone()) {
            return None;
        }
        Some(Waiting {
            server: self.clone(),
            key,
        })
    }
}

/// The calls that wait, and those of them their client cancelled.
#[derive(Default)]
struct Cancels {
    waiting: HashSet<CallKey>,
    cancelled: HashSet<CallKey>,
}

impl Cancels {
    /// Records a client's cancellation of `key`; whether it was kept (a cancellation
    /// of a call that does not wait, has ended, never was or is another session's is
    /// not).
    fn note(&mut self, key: CallKey) -> bool {
        self.waiting.contains(&key) && self.cancelled.insert(key)
    }

    /// Call `key` ended: nothing of it is kept.
    fn end(&mut self, key: &CallKey) {
        self.waiting.remove(key);
        self.cancelled.remove(key);
    }
}

/// A call that waits, until dropped (see [`Server::waiting`]).
struct Waiting {
    server: Server,
    key: CallKey,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.server.cancels().end(&self.key);
    }
}

/// Text for a client, as the CLI prints it: every secret masked, and every character
/// that must not reach a terminal raw (C0 and C1 controls, bidi overrides, …) written as
/// an escape (`\u009b`), newlines and tabs kept. In JSON text such an escape is a JSON
/// escape of the same character (serde_json escapes C0 controls itself).
pub(crate) fn inert(text: &str) -> String {
    crate::text::escape_block(&crate::redact::clean(text)).into_owned()
}

/// A tool's error (`isError`), with the text the CLI prints.
pub(crate) fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(inert(&text.into()))])
}

/// A tool's result: pretty JSON as text.
pub(crate) fn tool_json(value: &serde_json::Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    CallToolResult::success(vec![ContentBlock::text(inert(&text))])
}

impl rmcp::ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("crewbox", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "crewbox runs crews of AI coding agents on the git repository {}, in a sandbox, \
             and leaves their work on branches. Start with `run` (a prompt; mode `crew` plans, \
             executes and reviews), follow it with `status` and `events`, review the change \
             with `diff`, and merge the branch yourself.",
            self.repo().root().display()
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = tools::ToolName::parse(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}` (tools: {})",
                    crate::text::escape(&tools::shown(&request.name)),
                    tools::ToolName::ALL
                        .iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            ));
        };
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let result = match ops::call(self, tool, args, &request.meta, context).await {
            Ok(result) => result,
            Err(e) => tool_error(e.to_string()),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resources::list(self, request).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(self, &request.uri).await.map(Into::into)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(lines::refusal(&request)
            .or_else(|| malformed_params(&request))
            .unwrap_or_else(|| {
                ErrorData::new(
                    rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "unknown method `{}`",
                        crate::text::escape(&tools::shown(&request.method))
                    ),
                    None,
                )
            }))
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(id) = notification.request_id {
            let kept = self.cancels().note((self.session, id));
            if kept {
                self.shared.cancelled_seen.notify_waiters();
            }
        }
    }
}

/// The error message for a request that does not read as JSON, the parser's `message`
/// passed on as [`detail`] does.
pub(crate) fn not_json(message: &str) -> String {
    format!(
        "request refused: it does not read as JSON ({})",
        detail(message)
    )
}

/// Why a request that is JSON-RPC in form (`jsonrpc` 2.0, a string `method`) has
/// params no MCP method takes — a list, a scalar, a `_meta` that is no object — for an
/// `-32602` naming the method (JSON-RPC allows list params; the SDK's types refused
/// the whole message as no JSON-RPC message, `-32600`); `None` otherwise.
pub(crate) fn params_error(message: &serde_json::Value) -> Option<String> {
    if message.get("jsonrpc").and_then(serde_json::Value::as_str) != Some("2.0") {
        return None;
    }
    let method = message.get("method")?.as_str()?;
    let params = message.get("params")?;
    let shown = crate::text::escape(&crate::text::cut_marked(method, 64, "…")).into_owned();
    match params {
        serde_json::Value::Object(o) if o.get("_meta").is_some_and(|m| !m.is_object()) => Some(
            format!("invalid params of `{shown}`: `_meta` must be an object"),
        ),
        serde_json::Value::Object(_) | serde_json::Value::Null => None,
        _ => Some(format!(
            "invalid params of `{shown}`: MCP params are an object (named members), not a \
             list or a value"
        )),
    }
}

/// The methods the protocol defines for a client's requests.
const PROTOCOL_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// A request for a method the protocol defines whose params did not read as that
/// method's (the SDK hands such a request on as a custom one): an invalid-params error
/// naming the method and what is wrong, where "unknown method" would mislead.
fn malformed_params(request: &CustomRequest) -> Option<ErrorData> {
    use rmcp::model::{
        CallToolRequestParams, InitializeRequestParams, PaginatedRequestParams,
        ReadResourceRequestParams,
    };
    fn why<T: serde::de::DeserializeOwned>(params: serde_json::Value) -> Option<String> {
        serde_json::from_value::<T>(params)
            .err()
            .map(|e| e.to_string())
    }
    let method = request.method.as_str();
    if !PROTOCOL_METHODS.contains(&method) {
        return None;
    }
    let params = request.params.clone().unwrap_or(serde_json::Value::Null);
    let detail = match method {
        "tools/call" => why::<CallToolRequestParams>(params),
        "resources/read" => why::<ReadResourceRequestParams>(params),
        "initialize" => why::<InitializeRequestParams>(params),
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            why::<Option<PaginatedRequestParams>>(params)
        }
        _ => None,
    }
    .unwrap_or_else(|| "they are not what the protocol defines for it".into());
    Some(ErrorData::invalid_params(
        format!(
            "the params of `{method}` do not read: {}",
            self::detail(&detail)
        ),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellations_are_kept_only_for_waiting_calls_and_only_while_they_last() {
        let mut c = Cancels::default();
        // Thousands of cancellations of calls that do not wait keep nothing.
        for n in 0..10_000 {
            assert!(!c.note((1, RequestId::Number(n))));
        }
        assert!(c.cancelled.is_empty());
        let id = (1, RequestId::Number(7));
        c.waiting.insert(id.clone());
        // Another session's request of the same number is another call.
        assert!(!c.note((2, RequestId::Number(7))));
        assert!(c.note(id.clone()));
        assert!(c.cancelled.contains(&id));
        c.end(&id);
        assert!(c.waiting.is_empty() && c.cancelled.is_empty());
        // After its end, a late cancellation is not kept either.
        assert!(!c.note(id));
        assert!(c.cancelled.is_empty());
    }
}
