//! What `crewbox mcp list|tools|call` asks: one of the user's MCP servers, started the
//! way a run starts it (a stdio server in the process sandbox over the repository,
//! read-only), its tools as agents would see them, and one call. Typed answers, typed
//! errors; the binary only renders them.

use std::sync::Arc;

use serde_json::Value;

use crate::mcp::McpError;
use crate::mcp::pool::{Connection, Pool};
use crate::mcp::tools::OfferedTool;
use crate::sandbox::SandboxError;

use super::Repository;

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpUseError {
    /// The user's config defines no server of that name.
    #[error(
        "`{name}` is not one of your MCP servers ({}); define it as [mcp.servers.{name}] in your user config",
        if known.is_empty() { "none is configured".to_owned() } else { known.join(", ") }
    )]
    NoSuchServer {
        /// The name asked for.
        name: String,
        /// The servers configured.
        known: Vec<String>,
    },
    /// The process sandbox a stdio server runs in cannot be set up.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The server does not offer that tool.
    #[error("server `{server}` offers no tool `{tool}` (see `crewbox mcp tools {server}`)")]
    NoSuchTool {
        /// The server.
        server: String,
        /// The tool asked for.
        tool: String,
    },
    /// The arguments are not a JSON object.
    #[error("{0}")]
    Arguments(String),
    /// The server did not start, or did not list its tools.
    #[error(transparent)]
    Server(#[from] McpError),
}

/// A connection to one of the user's MCP servers, outside any run
/// ([`Repository::mcp_server`]); started on first use.
pub struct McpConnection {
    name: String,
    conn: Arc<Connection>,
}

/// What one call of a tool gave ([`McpConnection::call`]).
#[derive(Debug)]
pub struct McpCall {
    /// The server's own name of the tool called.
    pub tool: String,
    /// Its text, or the server's error.
    pub result: Result<String, McpError>,
}

impl McpConnection {
    /// The tools the server offers, as agents would see them, and what was wrong with
    /// the ones left out.
    pub async fn tools(&self) -> Result<(Vec<OfferedTool>, Vec<String>), McpError> {
        self.conn.offer().await
    }

    /// Calls `tool` (the server's name for it, or the name agents call) with `args`
    /// (a JSON object, or null for none). A tool the server does not offer, or
    /// arguments that are not an object, are errors; what the tool answers, failure
    /// included, is the call's result.
    pub async fn call(&self, tool: &str, args: Value) -> Result<McpCall, McpUseError> {
        let (tools, _) = self.conn.offer().await?;
        let found = tools
            .iter()
            .find(|t| t.tool == tool || t.agent_name == tool)
            .ok_or_else(|| McpUseError::NoSuchTool {
                server: self.name.clone(),
                tool: tool.to_owned(),
            })?;
        let args = crate::mcp::tools::arguments(&found.agent_name, args)
            .map_err(McpUseError::Arguments)?;
        let result = self.conn.call(&found.tool, args).await;
        Ok(McpCall {
            tool: found.tool.clone(),
            result,
        })
    }
}

impl Repository {
    /// A connection to the user's MCP server `name`, started on first use as a run
    /// starts it: a stdio server runs in this repository's process sandbox over the
    /// repository, read-only.
    pub fn mcp_server(&self, name: &str) -> Result<McpConnection, McpUseError> {
        let settings = &self.config.mcp;
        let unknown = || McpUseError::NoSuchServer {
            name: name.to_owned(),
            known: settings.servers.keys().cloned().collect(),
        };
        // Checked before the sandbox is set up for it.
        if !settings.servers.contains_key(name) {
            return Err(unknown());
        }
        let pool = Pool::new(Arc::new(settings.clone()), self.sandbox()?);
        let conn = pool.standalone(name, self.root()).ok_or_else(unknown)?;
        Ok(McpConnection {
            name: name.to_owned(),
            conn,
        })
    }
}
