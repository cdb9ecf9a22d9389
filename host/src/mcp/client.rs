//! One connection to one server, through the official SDK (`rmcp`): a stdio server is
//! started inside the process sandbox and spoken to over the sandbox's pipes (rmcp's
//! async read/write transport); an HTTP server is reached with rmcp's streamable HTTP
//! client over crewbox's own reqwest client. Its tool list is kept and refreshed when
//! the server says it changed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::model::{
    ClientRequest, CustomRequest, CustomResult, ElicitRequestParams, ElicitResult, ServerResult,
};
#[expect(
    deprecated,
    reason = "sampling and roots are counted (and refused), never served"
)]
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult, ListRootsResult};
use rmcp::service::{
    MaybeSendFuture, NotificationContext, Peer, RequestContext, RoleClient, RunningService,
};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::McpError;
use super::config::{McpServer, Transport};
use super::tools::{self, Offer};
use crate::sandbox::{AgentSandbox, EnvPolicy, Program, SandboxedChild};

/// The longest line read from a stdio server: a larger answer fails the call waiting
/// on it at once with [`McpError::TooLarge`] (see [`lines`](super::lines)); a larger
/// message without an id is dropped.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// The most requests a server may make of crewbox in a connection's life (pings,
/// sampling, roots, elicitation, its own methods): past it the connection is dropped.
pub const MAX_SERVER_REQUESTS: u64 = 1_000;
/// The most `tools/list` pages read from one server.
const MAX_LIST_PAGES: usize = 32;
/// The most tools read from one server's listing (the offer keeps
/// [`tools::MAX_TOOLS`] of them).
const MAX_LISTED_TOOLS: usize = 4 * tools::MAX_TOOLS;
/// The most bytes of tool definitions (JSON) read from one server's listing.
const MAX_LISTED_BYTES: usize = 16 * 1024 * 1024;

/// How much of a stdio server's stderr is kept for error messages.
const STDERR_TAIL: usize = 4 * 1024;

/// Where a stdio server runs: a sandbox of its own over the agent's worktree.
pub struct StdioHost {
    /// The sandbox (its scope: the worktree, writable or not, network or not).
    pub sandbox: Arc<AgentSandbox>,
}

/// The SDK's client handler: notes `tools/list_changed`.
#[derive(Clone, Default)]
struct Handler {
    changed: Arc<AtomicBool>,
    /// Requests the server made of crewbox.
    requests: Arc<std::sync::atomic::AtomicU64>,
    /// Cancelled once the server made more than [`MAX_SERVER_REQUESTS`].
    flooded: CancellationToken,
}

impl Handler {
    /// Counts one request the server made of crewbox. crewbox answers none of them
    /// with anything (no sampling, no roots, no elicitation), and each answer waits in
    /// memory while the server does not read: past the bound the connection is done.
    fn count(&self) {
        if self.requests.fetch_add(1, Ordering::Relaxed) + 1 > MAX_SERVER_REQUESTS {
            self.flooded.cancel();
        }
    }
}

impl ClientHandler for Handler {
    fn ping(
        &self,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<(), ErrorData>> + MaybeSendFuture + '_ {
        self.count();
        ClientHandler::ping(&(), context)
    }

    #[expect(deprecated, reason = "a request crewbox counts and refuses")]
    fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<CreateMessageResult, ErrorData>> + MaybeSendFuture + '_ {
        self.count();
        ClientHandler::create_message(&(), params, context)
    }

    /// crewbox declares no `roots` capability, so `roots/list` is a method it does not
    /// have (the SDK answered an empty list, which a server may read as "no directory
    /// allowed" rather than "none declared"). A server's directory is its sandbox's.
    #[expect(deprecated, reason = "a request crewbox counts and refuses")]
    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorData>> + MaybeSendFuture + '_ {
        self.count();
        std::future::ready(Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "roots/list: crewbox declares no roots capability",
            None,
        )))
    }

    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + MaybeSendFuture + '_ {
        self.count();
        ClientHandler::create_elicitation(&(), request, context)
    }

    fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<CustomResult, ErrorData>> + MaybeSendFuture + '_ {
        self.count();
        ClientHandler::on_custom_request(&(), request, context)
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("crewbox", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A live connection.
pub struct Client {
    server: Arc<McpServer>,
    service: RunningService<RoleClient, Handler>,
    changed: Arc<AtomicBool>,
    flooded: CancellationToken,
    offer: Offer,
    /// The stdio server's process (its whole tree dies when this is dropped, or is
    /// ended and waited for by [`Client::close`]).
    child: Option<SandboxedChild>,
    stderr: Arc<Mutex<Vec<u8>>>,
    _host: Option<StdioHost>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server.name)
            .finish()
    }
}

/// How long [`Client::close`] waits for a killed server's process tree to be gone.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn stderr_tail(buf: &Mutex<Vec<u8>>) -> String {
    let b = buf.lock().unwrap_or_else(|e| e.into_inner());
    let text = crate::text::from_bytes(&b);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(
            "; its stderr ended with: {}",
            crate::redact::clean(text).replace('\n', " | ")
        )
    }
}

impl Client {
    /// Starts (stdio, inside `host`) or reaches (HTTP) `server`, waits for its
    /// `initialize` answer and lists its tools, all within its startup timeout.
    pub async fn connect(
        server: Arc<McpServer>,
        host: Option<StdioHost>,
    ) -> Result<Self, McpError> {
        let started = tokio::time::Instant::now();
        let timeout = server.startup_timeout;
        let handler = Handler::default();
        let changed = handler.changed.clone();
        let flooded = handler.flooded.clone();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        // What a stdio server wrote on stdout that was no message crewbox could read.
        let dropped = super::lines::Dropped::default();
        let fail = |message: String| McpError::Start {
            server: server.name.clone(),
            message: crate::redact::clean_owned(message),
        };
        let (service, child) = match &server.transport {
            Transport::Stdio {
                command,
                args,
                env,
                pass_env,
            } => {
                let host = host.as_ref().ok_or_else(|| {
                    fail("a stdio server needs a process sandbox to run in".into())
                })?;
                // A provider's key never reaches a server, whoever wrote its definition:
                // not as a variable, not on its command line (which every process of
                // the machine can read).
                let sandbox = host.sandbox.sandbox();
                if let Some(k) = env.iter().find(|(k, v)| sandbox.carries_key(k, v)) {
                    return Err(fail(format!(
                        "`env.{}` would give the server a model provider's key; crewbox never \
                         passes one to an MCP server",
                        crate::text::escape(&k.0)
                    )));
                }
                // Said, not silently left out: the listing would name it as passed.
                if let Some(name) = pass_env.iter().find(|name| {
                    let value = std::env::var(name.as_str()).unwrap_or_default();
                    sandbox.carries_key(name, &value)
                }) {
                    return Err(fail(format!(
                        "`pass_env` names `{}`, a model provider's key variable (or one that \
                         holds a key); crewbox never passes one to an MCP server",
                        crate::text::escape(name)
                    )));
                }
                if let Some(i) = std::iter::once(command)
                    .chain(args)
                    .position(|a| sandbox.carries_key("", a))
                {
                    let what = if i == 0 {
                        "`command`".to_owned()
                    } else {
                        format!("`args[{}]`", i - 1)
                    };
                    return Err(fail(format!(
                        "{what} holds a model provider's key; crewbox never passes one to an \
                         MCP server"
                    )));
                }
                let mut argv = vec![command.clone()];
                argv.extend(args.iter().cloned());
                let mut spawn = host
                    .sandbox
                    .command(Program::Argv(argv))
                    .env(EnvPolicy {
                        pass: pass_env.clone(),
                        allow_named_keys: false,
                    })
                    .piped_stdin();
                for (k, v) in env {
                    spawn = spawn.set_env(k, v);
                }
                let mut child = spawn.spawn().await.map_err(|e| fail(e.to_string()))?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err(fail("the server's pipes were not set up".into()));
                };
                if let Some(mut err) = child.stderr.take() {
                    let keep = stderr.clone();
                    tokio::spawn(async move {
                        let mut chunk = vec![0u8; 4096];
                        while let Ok(n @ 1..) = err.read(&mut chunk).await {
                            let mut b = keep.lock().unwrap_or_else(|e| e.into_inner());
                            b.extend_from_slice(&chunk[..n]);
                            let excess = b.len().saturating_sub(STDERR_TAIL);
                            b.drain(..excess);
                        }
                    });
                }
                let stdout = super::lines::bounded(
                    stdout,
                    MAX_LINE_BYTES,
                    super::lines::Reader::Client(dropped.clone()),
                );
                // Past the bound above, every line is within it (or its replacement).
                let transport = AsyncRwTransport::new_client(stdout, stdin)
                    .with_max_line_length(MAX_LINE_BYTES + 1024);
                let served = tokio::time::timeout(timeout, handler.serve(transport)).await;
                match served {
                    Ok(Ok(service)) => (service, Some(child)),
                    Ok(Err(e)) => {
                        child.kill_tree();
                        let status = tokio::time::timeout(
                            std::time::Duration::from_millis(500),
                            child.wait(),
                        )
                        .await;
                        let output = String::from_utf8_lossy(
                            &stderr.lock().unwrap_or_else(|e| e.into_inner()),
                        )
                        .into_owned();
                        if let Ok(Ok(status)) = status
                            && let Some(failure) = child.setup_failure(&status, &output)
                        {
                            return Err(fail(
                                host.sandbox.sandbox().describe_failure(failure).to_string(),
                            ));
                        }
                        return Err(fail(format!(
                            "`{command}` did not complete the MCP handshake: {e}{}{}",
                            dropped.said(),
                            stderr_tail(&stderr)
                        )));
                    }
                    Err(_) => {
                        child.kill_tree();
                        return Err(fail(format!(
                            "`{command}` did not answer `initialize` within {} s \
                             (`startup_timeout_s`){}{}",
                            timeout.as_secs(),
                            dropped.said(),
                            stderr_tail(&stderr)
                        )));
                    }
                }
            }
            Transport::Http {
                url,
                headers,
                bearer_token_env,
            } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let var = |name: &str| {
                    std::env::var(name).map_err(|_| {
                        fail(format!(
                            "the environment variable `{name}` is not set (it holds a header of \
                             this server)"
                        ))
                    })
                };
                let mut custom = HashMap::new();
                for (h, env) in headers {
                    let value = var(env)?;
                    crate::redact::register(&value);
                    let name = reqwest::header::HeaderName::from_bytes(h.as_bytes())
                        .map_err(|e| fail(format!("header `{h}`: {e}")))?;
                    let mut value =
                        reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                            fail(format!("the value of `{env}` is not a valid header value"))
                        })?;
                    value.set_sensitive(true);
                    custom.insert(name, value);
                }
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                if let Some(env) = bearer_token_env {
                    let token = var(env)?;
                    crate::redact::register(&token);
                    config = config.auth_header(token);
                }
                let client = crate::tls::client_builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| fail(format!("cannot build an HTTP client: {e}")))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service = tokio::time::timeout(timeout, handler.serve(transport))
                    .await
                    .map_err(|_| {
                        fail(format!(
                            "{url} did not answer `initialize` within {} s (`startup_timeout_s`)",
                            timeout.as_secs()
                        ))
                    })?
                    .map_err(|e| fail(format!("{url}: {}", super::http_error::start_error(&e))))?;
                (service, None)
            }
        };
        // A version crewbox does not speak is refused, as the protocol asks of a
        // client (the SDK took any string).
        if let Some(info) = service.peer().peer_info()
            && !rmcp::model::ProtocolVersion::KNOWN_VERSIONS.contains(&info.protocol_version)
        {
            let known: Vec<String> = rmcp::model::ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .map(ToString::to_string)
                .collect();
            return Err(fail(format!(
                "the server answered with protocol version `{}`, which crewbox does not speak \
                 (it speaks {})",
                crate::text::escape(&info.protocol_version.to_string()),
                known.join(", ")
            )));
        }
        let mut client = Self {
            server: server.clone(),
            service,
            changed,
            flooded,
            offer: Offer::default(),
            child,
            stderr,
            _host: host,
        };
        let left = timeout.saturating_sub(started.elapsed());
        let offer = tokio::time::timeout(left, client.list())
            .await
            .map_err(|_| {
                fail(format!(
                    "the server did not list its tools within {} s (`startup_timeout_s`){}",
                    timeout.as_secs(),
                    stderr_tail(&client.stderr)
                ))
            })?
            .map_err(|why| fail(format!("{why}{}", stderr_tail(&client.stderr))))?;
        client.offer = offer;
        Ok(client)
    }

    /// Lists the server's tools, page after page, within [`MAX_LIST_PAGES`] pages and
    /// [`MAX_LISTED_TOOLS`] tools of at most [`MAX_LISTED_BYTES`] in all: what a server
    /// pages on past that is not read (a warning says so), so no server makes crewbox
    /// hold more than that.
    /// `Err` says why the listing failed (redacted).
    async fn list(&self) -> Result<Offer, String> {
        let failed = |message: String| crate::redact::clean_owned(message);
        let (mut raw, mut bytes, mut cut) = (Vec::<Value>::new(), 0usize, None);
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        for page in 1..=MAX_LIST_PAGES {
            let (tools, next_cursor) = self
                .list_page(cursor.take())
                .await
                .map_err(|e| failed(format!("tools/list failed: {e}")))?;
            for value in tools {
                let len = serde_json::to_string(&value).map_or(0, |t| t.len());
                if raw.len() >= MAX_LISTED_TOOLS || bytes + len > MAX_LISTED_BYTES {
                    cut = Some(format!(
                        "the server listed more than {MAX_LISTED_TOOLS} tools or \
                         {} MiB of them; the rest were not read",
                        MAX_LISTED_BYTES >> 20
                    ));
                    break;
                }
                bytes += len;
                raw.push(value);
            }
            match next_cursor {
                Some(next) if cut.is_none() => {
                    if !seen.insert(next.clone()) {
                        cut = Some(
                            "the server's tool pages go round in a circle; listing stopped".into(),
                        );
                        break;
                    }
                    if page == MAX_LIST_PAGES {
                        cut = Some(format!(
                            "the server lists its tools in more than {MAX_LIST_PAGES} pages; \
                             the rest were not read"
                        ));
                    }
                    cursor = Some(next);
                }
                _ => break,
            }
        }
        let mut offer = tools::offer(&self.server.name, &raw, cut.clone(), |n| {
            self.server.tools.allows(n)
        });
        // A name in `enabled_tools` or `disabled_tools` the server does not list (a typo
        // left a server with no tools in silence); not said of a listing cut short.
        if cut.is_none() {
            let listed: std::collections::HashSet<&str> = raw
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .collect();
            let filter = &self.server.tools;
            for (key, names) in [
                (
                    "enabled_tools",
                    filter.enabled.as_deref().unwrap_or_default(),
                ),
                ("disabled_tools", filter.disabled.as_slice()),
            ] {
                for name in names.iter().filter(|n| !listed.contains(n.as_str())) {
                    offer.warnings.push(format!(
                        "server `{}`: `{key}` names `{}`, which the server does not list",
                        self.server.name,
                        crate::text::escape(name)
                    ));
                }
            }
        }
        for w in &offer.warnings {
            tracing::warn!(server = %self.server.name, "{w}");
        }
        Ok(offer)
    }

    /// One page of `tools/list`, read as JSON rather than through the SDK's types: one
    /// tool the SDK cannot type (no `inputSchema`, or a string for one — servers in the
    /// wild send both) would fail the whole page, and with it every tool of the server.
    /// Each tool is checked on its own when offered ([`tools::offer`]).
    async fn list_page(
        &self,
        cursor: Option<String>,
    ) -> Result<(Vec<Value>, Option<String>), String> {
        let params = cursor.map(|c| serde_json::json!({ "cursor": c }));
        let answer = self
            .service
            .peer()
            .send_request(ClientRequest::CustomRequest(CustomRequest::new(
                "tools/list",
                params,
            )))
            .await
            .map_err(|e| e.to_string())?;
        let mut page = match answer {
            ServerResult::CustomResult(CustomResult(v)) => v,
            typed => serde_json::to_value(&typed).map_err(|e| e.to_string())?,
        };
        let Some(tools) = page.get_mut("tools").map(Value::take) else {
            return Err("the answer has no `tools`".into());
        };
        let Value::Array(tools) = tools else {
            return Err("`tools` is not a list".into());
        };
        let next = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok((tools, next))
    }

    /// Ends a stdio server's whole process tree and waits (within [`CLOSE_WAIT`]) until
    /// it is gone: what its tools started in the background dies with it before
    /// crewbox works on the agent's worktree as the user (a process left running could
    /// swap a directory for a link to the host while crewbox committed the worktree).
    pub async fn close(mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill_tree();
            if tokio::time::timeout(CLOSE_WAIT, child.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    server = %self.server.name,
                    "MCP server's processes did not end within {} s of being killed",
                    CLOSE_WAIT.as_secs()
                );
            }
        }
    }

    /// Whether the server is gone (its process ended or its transport closed), or
    /// done for (it made more requests of crewbox than [`MAX_SERVER_REQUESTS`]).
    pub fn is_gone(&mut self) -> bool {
        self.service.is_transport_closed()
            || self.service.is_closed()
            || self.flooded.is_cancelled()
    }

    /// The tools offered, refreshed first if the server said they changed (within its
    /// startup timeout, as the first listing). A server that does not list them again
    /// keeps offering the tools it listed before, with a warning saying why (its old
    /// tools still answer, as servers go); one that went away meanwhile fails.
    pub async fn offer(&mut self) -> Result<&Offer, McpError> {
        if self.changed.swap(false, Ordering::SeqCst) {
            let within = self.server.startup_timeout;
            let why = match tokio::time::timeout(within, self.list()).await {
                Ok(Ok(offer)) => {
                    self.offer = offer;
                    return Ok(&self.offer);
                }
                Ok(Err(_)) if self.is_gone() => {
                    return Err(McpError::Gone {
                        server: self.server.name.clone(),
                    });
                }
                Ok(Err(why)) => why,
                Err(_) => format!(
                    "it did not list them within {} s (`startup_timeout_s`)",
                    within.as_secs()
                ),
            };
            tracing::warn!(
                server = %self.server.name,
                "MCP server `{}` said its tools changed, and listing them again failed: {why}; \
                 its earlier tools are offered{}",
                self.server.name,
                stderr_tail(&self.stderr)
            );
        }
        Ok(&self.offer)
    }

    /// A handle to make calls with while the connection is shared.
    pub fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// What a call waits on: the peer and the flood.
    pub fn caller(&self) -> Caller {
        Caller {
            peer: self.peer(),
            flooded: self.flooded.clone(),
        }
    }

    /// What the server's stderr last said (stdio), for an error.
    pub fn stderr_note(&self) -> String {
        stderr_tail(&self.stderr)
    }
}

/// A connection's peer and its flood, for one call.
pub struct Caller {
    peer: Peer<RoleClient>,
    flooded: CancellationToken,
}

impl Caller {
    /// Whether its server made more requests of crewbox than it may.
    pub fn flooded(&self) -> bool {
        self.flooded.is_cancelled()
    }
}

/// Calls `tool` through `caller` within `server`'s call timeout. A timeout drops the
/// request, which sends `notifications/cancelled`; a progress notification extends
/// nothing. An answer over the size limit, or one that does not read as JSON, fails the
/// call at once (see [`lines`](super::lines)), not when its timeout fires.
pub async fn call(
    server: &McpServer,
    caller: &Caller,
    tool: &str,
    arguments: serde_json::Map<String, Value>,
) -> Result<String, McpError> {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    let answered = tokio::select! {
        a = tokio::time::timeout(server.call_timeout, caller.peer.call_tool(params)) => a,
        () = caller.flooded.cancelled() => {
            return Err(McpError::Tool {
                server: server.name.clone(),
                tool: tool.to_owned(),
                message: format!(
                    "the server made more than {MAX_SERVER_REQUESTS} requests of its own \
                     (crewbox grants none: no sampling, roots or elicitation); it was stopped"
                ),
            });
        }
    };
    let tool_err = |message: String| McpError::Tool {
        server: server.name.clone(),
        tool: tool.to_owned(),
        message: crate::redact::clean_owned(message),
    };
    match answered {
        Err(_) => Err(McpError::Timeout {
            server: server.name.clone(),
            tool: tool.to_owned(),
            secs: server.call_timeout.as_secs(),
        }),
        Ok(Err(rmcp::ServiceError::McpError(e))) => match super::lines::refused_by_crewbox(&e) {
            Some(super::lines::TOO_LARGE_ANSWER) => Err(McpError::TooLarge {
                server: server.name.clone(),
                tool: tool.to_owned(),
                max_mib: MAX_LINE_BYTES >> 20,
            }),
            // What crewbox said of an answer it could not read.
            Some(_) => Err(tool_err(e.message.into_owned())),
            None => Err(tool_err(format!(
                "the server answered with error {}: {}",
                e.code.0, e.message
            ))),
        },
        Ok(Err(rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_))) => {
            Err(McpError::Gone {
                server: server.name.clone(),
            })
        }
        Ok(Err(e)) => Err(tool_err(e.to_string())),
        Ok(Ok(result)) => {
            let value = serde_json::to_value(&result)
                .map_err(|e| tool_err(format!("unreadable result: {e}")))?;
            tools::render_result(&value).map_err(|text| McpError::Tool {
                server: server.name.clone(),
                tool: tool.to_owned(),
                message: text,
            })
        }
    }
}
