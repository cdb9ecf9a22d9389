//! The servers of running agents: one connection per (run, server, worktree, write
//! access), shared by the run's agents granted that server, started on first use and
//! gone when the last of those agents ends. A server that exits is started once more;
//! after that its tools fail with an error that says so.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::McpError;
use super::client::{self, Client, StdioHost};
use super::config::{McpServer, McpSettings, Transport};
use super::tools::{self, OfferedTool};
use crate::provider::ToolSpec;
use crate::sandbox::{AgentScope, Sandbox};
use crate::vocab::{CapSet, Capability};

/// How often a server is started for one connection (the first start and one restart).
pub const MAX_STARTS: u32 = 2;

type Key = (String, String, PathBuf, bool);

/// Every connection of this process. Cheap to clone.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    settings: Arc<McpSettings>,
    sandbox: Sandbox,
    conns: Mutex<HashMap<Key, Weak<Connection>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("servers", &self.inner.settings.servers.keys())
            .finish()
    }
}

impl Default for Pool {
    fn default() -> Self {
        Self::new(Arc::default(), Sandbox::missing())
    }
}

/// Whether an agent holding `caps` may use `server`: `mcp` reaches every server it was
/// granted; a read-only agent only those the user marked `read_only = true`.
pub fn may_use(caps: CapSet, server: &McpServer) -> bool {
    caps.contains(Capability::Mcp) || (server.read_only && caps.contains(Capability::Read))
}

impl Pool {
    /// The pool over the servers of `settings`; stdio servers run in `sandbox`.
    pub fn new(settings: Arc<McpSettings>, sandbox: Sandbox) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                settings,
                sandbox,
                conns: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The servers it knows.
    pub fn settings(&self) -> &McpSettings {
        &self.inner.settings
    }

    /// The servers an agent of `run` working in `workspace` with `caps` reaches among
    /// `granted` (None when it reaches none). Unknown names are warned about and skipped.
    pub fn for_agent(
        &self,
        run: &str,
        workspace: &std::path::Path,
        granted: &[String],
        caps: CapSet,
    ) -> Option<Arc<AgentMcp>> {
        let writable = caps.contains(Capability::Write);
        let mut conns = Vec::new();
        let mut map = self.inner.conns.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, w| w.strong_count() > 0);
        let mut seen = std::collections::BTreeSet::new();
        for name in granted {
            if !seen.insert(name) {
                continue;
            }
            let Some(server) = self.inner.settings.servers.get(name) else {
                tracing::warn!(server = %name, "an agent was granted an MCP server that is not configured");
                continue;
            };
            if !may_use(caps, server) {
                continue;
            }
            let key = (
                run.to_owned(),
                name.clone(),
                workspace.to_path_buf(),
                writable,
            );
            let conn = match map.get(&key).and_then(Weak::upgrade) {
                Some(c) => c,
                None => {
                    let c = Arc::new(Connection {
                        server: Arc::new(server.clone()),
                        id: format!("mcp-{run}-{name}"),
                        workspace: workspace.to_path_buf(),
                        writable,
                        sandbox: self.inner.sandbox.clone(),
                        state: tokio::sync::Mutex::new(State::default()),
                    });
                    map.insert(key, Arc::downgrade(&c));
                    c
                }
            };
            conns.push(conn);
        }
        (!conns.is_empty()).then(|| Arc::new(AgentMcp { conns }))
    }

    /// One connection to `name` outside any run (`crewbox mcp tools|call`): a stdio
    /// server runs in `sandbox` over `workspace`, read-only.
    pub fn standalone(&self, name: &str, workspace: &std::path::Path) -> Option<Arc<Connection>> {
        let server = self.inner.settings.servers.get(name)?;
        Some(Arc::new(Connection {
            server: Arc::new(server.clone()),
            id: format!("mcp-cli-{name}"),
            workspace: workspace.to_path_buf(),
            writable: false,
            sandbox: self.inner.sandbox.clone(),
            state: tokio::sync::Mutex::new(State::default()),
        }))
    }
}

#[derive(Default)]
struct State {
    client: Option<Client>,
    starts: u32,
    last_error: Option<String>,
}

/// One server for one (run, worktree, write access).
pub struct Connection {
    server: Arc<McpServer>,
    id: String,
    workspace: PathBuf,
    writable: bool,
    sandbox: Sandbox,
    state: tokio::sync::Mutex<State>,
}

impl Connection {
    /// The server.
    pub fn server(&self) -> &McpServer {
        &self.server
    }

    /// Starts the server for the `attempt`th time. Each start has a sandbox of its own
    /// (its own private `/tmp` and home): a server that exited still has its tree's
    /// directories removed while the next one starts.
    async fn start(&self, attempt: u32) -> Result<Client, McpError> {
        let host = match &self.server.transport {
            Transport::Stdio { .. } => Some(StdioHost {
                sandbox: self.sandbox.agent(AgentScope {
                    id: format!("{}-{attempt}", self.id),
                    workspace: Some(self.workspace.clone()),
                    writable: self.writable,
                    network: self.server.network,
                }),
            }),
            Transport::Http {
                headers,
                bearer_token_env,
                ..
            } => {
                // As for a stdio server: a provider's key is never sent to an MCP server,
                // not as a header either (a `bearer_token_env` copied from a provider's
                // `api_key_env` sent it off the machine without a word).
                let vars = headers.iter().map(|(_, v)| v).chain(bearer_token_env);
                for name in vars {
                    let value = std::env::var(name).unwrap_or_default();
                    if self.sandbox.carries_key(name, &value) {
                        return Err(McpError::Start {
                            server: self.server.name.clone(),
                            message: format!(
                                "`{}` is a model provider's key variable (or holds a key); \
                                 crewbox never sends one to an MCP server",
                                crate::text::escape(name)
                            ),
                        });
                    }
                }
                None
            }
        };
        Client::connect(self.server.clone(), host).await
    }

    /// The live client, started (or restarted once) when needed.
    async fn ensure<'a>(&self, st: &'a mut State) -> Result<&'a mut Client, McpError> {
        if st.client.as_mut().is_some_and(Client::is_gone) {
            let note = st
                .client
                .take()
                .map(|c| c.stderr_note())
                .unwrap_or_default();
            tracing::warn!(server = %self.server.name, "MCP server exited{note}");
            st.last_error = Some(format!("the server exited{note}"));
        }
        if st.client.is_none() {
            if st.starts >= MAX_STARTS {
                return Err(McpError::Unavailable {
                    server: self.server.name.clone(),
                    starts: st.starts,
                    last: st.last_error.clone().unwrap_or_default(),
                });
            }
            st.starts += 1;
            match self.start(st.starts).await {
                Ok(c) => st.client = Some(c),
                Err(e) => {
                    st.last_error = Some(e.to_string());
                    return Err(e);
                }
            }
        }
        st.client.as_mut().ok_or_else(|| McpError::Gone {
            server: self.server.name.clone(),
        })
    }

    /// The tools offered (starting the server if needed).
    pub async fn offer(&self) -> Result<(Vec<OfferedTool>, Vec<String>), McpError> {
        let mut st = self.state.lock().await;
        let client = self.ensure(&mut st).await?;
        let offer = client.offer().await?;
        Ok((offer.tools.clone(), offer.warnings.clone()))
    }

    /// Calls the server's own tool `tool`.
    pub async fn call(
        &self,
        tool: &str,
        args: serde_json::Map<String, Value>,
    ) -> Result<String, McpError> {
        let caller = {
            let mut st = self.state.lock().await;
            self.ensure(&mut st).await?.caller()
        };
        let called = client::call(&self.server, &caller, tool, args).await;
        if caller.flooded() {
            // Dropped now, not at its next use: the answers it never reads are freed
            // and its process tree ends.
            let mut st = self.state.lock().await;
            if st.client.take().is_some() {
                st.last_error = Some(format!(
                    "it made more than {} requests of its own",
                    client::MAX_SERVER_REQUESTS
                ));
            }
            return called;
        }
        match called {
            Err(McpError::Gone { .. }) => {
                // Never made again: the call may have run in part before the server
                // went (a tool that writes, or one that crashes its server each time,
                // ran twice and used up the restart). The next call starts the server
                // again, if it has a start left.
                let mut st = self.state.lock().await;
                if let Some(c) = st.client.take() {
                    st.last_error = Some(format!("the server exited{}", c.stderr_note()));
                }
                Err(McpError::ExitedDuringCall {
                    server: self.server.name.clone(),
                    tool: tool.to_owned(),
                })
            }
            other => other,
        }
    }
}

/// The servers one agent reaches.
pub struct AgentMcp {
    conns: Vec<Arc<Connection>>,
}

impl AgentMcp {
    /// Ends the servers only this agent uses (others' agents keep theirs), each
    /// server's whole process tree waited for: called when the agent is done with its
    /// tools, before crewbox seals, commits or resets its worktree.
    pub async fn close(&self) {
        for c in self.conns.iter().filter(|c| Arc::strong_count(c) == 1) {
            let client = c.state.lock().await.client.take();
            if let Some(client) = client {
                client.close().await;
            }
        }
    }
}

impl std::fmt::Debug for AgentMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.conns.iter().map(|c| &c.server.name))
            .finish()
    }
}

impl AgentMcp {
    /// The names of its servers.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.conns.iter().map(|c| c.server.name.as_str())
    }

    /// The specs of every tool of its servers (servers that cannot start offer none;
    /// why is logged).
    pub async fn specs(&self) -> Vec<ToolSpec> {
        let mut out = Vec::new();
        for c in &self.conns {
            match c.offer().await {
                Ok((tools, _)) => out.extend(tools.into_iter().map(|t| t.spec)),
                Err(e) => {
                    tracing::warn!(server = %c.server.name, error = %e, "MCP server offers no tools")
                }
            }
        }
        out
    }

    /// Calls the tool the model named `agent_name`.
    pub async fn call(&self, agent_name: &str, args: Value) -> Result<String, McpError> {
        let server = tools::server_of(agent_name).ok_or_else(|| McpError::UnknownTool {
            name: agent_name.to_owned(),
        })?;
        let conn = self
            .conns
            .iter()
            .find(|c| c.server.name == server)
            .ok_or_else(|| McpError::UnknownTool {
                name: agent_name.to_owned(),
            })?;
        let (offered, _) = conn.offer().await?;
        let tool = offered
            .iter()
            .find(|t| t.agent_name == agent_name)
            .ok_or_else(|| McpError::UnknownTool {
                name: agent_name.to_owned(),
            })?;
        let args = tools::arguments(agent_name, args).map_err(|message| McpError::Tool {
            server: server.to_owned(),
            tool: tool.tool.clone(),
            message,
        })?;
        conn.call(&tool.tool, args).await
    }
}
