//! Model Context Protocol: agents use tools of the MCP servers the user configured
//! (`[mcp.servers.NAME]`), inside the same trust rules and sandbox as every other tool.
//!
//! - [`config`]: the user's servers and the default grant, checked at load.
//! - [`tools`]: what an agent sees of a server's tools (`mcp__SERVER__TOOL`, capped
//!   descriptions and schemas, at most [`tools::MAX_TOOLS`]) and of their results.
//! - [`client`]: one connection through the official SDK (`rmcp`): stdio servers are
//!   started inside the process sandbox, HTTP servers reached by crewbox itself.
//! - [`pool`]: one connection per (run, server), shared by the run's agents that were
//!   granted it, restarted once.
//! - [`project`]: a repository's `.mcp.json`, started only when the repository is
//!   trusted and the user approved the server by name.
//! - [`lines`]: the stdio framing read within bounds, both ways: an oversized or
//!   unreadable message becomes an error under its id instead of a silent drop.
//! - [`serve`]: the other direction, `crewbox mcp serve`: crewbox as an MCP server
//!   any MCP client hands work to.

pub mod client;
pub mod config;
mod http_error;
pub mod lines;
pub mod pool;
pub mod project;
pub mod schema;
pub mod serve;
pub mod tools;

pub use config::{McpServer, McpSettings};
pub use pool::{AgentMcp, Pool};

/// Why an MCP tool could not be offered or called. Every variant goes back to the
/// model as the tool's error; the agent goes on.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server could not be started or did not complete the handshake.
    #[error("MCP server `{server}` could not start: {message}")]
    Start {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// The server went away during a call.
    #[error("MCP server `{server}` exited")]
    Gone {
        /// The server.
        server: String,
    },
    /// The server went away while a call was in flight: the call is not made again.
    #[error(
        "MCP server `{server}` exited during the call of `{tool}`; the call was not made \
         again (it may have run in part); the server is started again for the next call"
    )]
    ExitedDuringCall {
        /// The server.
        server: String,
        /// The tool called.
        tool: String,
    },
    /// The server was started as often as allowed and is gone.
    #[error(
        "MCP server `{server}` is unavailable for the rest of this run (started {starts} times; \
         last: {last})"
    )]
    Unavailable {
        /// The server.
        server: String,
        /// How often it was started.
        starts: u32,
        /// The last failure.
        last: String,
    },
    /// The call took longer than `call_timeout_s`; it was cancelled.
    #[error(
        "MCP tool `{tool}` of server `{server}` timed out after {secs} s (`call_timeout_s`); \
         the call was cancelled"
    )]
    Timeout {
        /// The server.
        server: String,
        /// The server's tool name.
        tool: String,
        /// The timeout.
        secs: u64,
    },
    /// The server's answer to the call was over the size limit; it was dropped unread.
    #[error(
        "MCP tool `{tool}` of server `{server}` failed: its answer was over the {max_mib} MiB \
         limit, and it was dropped unread"
    )]
    TooLarge {
        /// The server.
        server: String,
        /// The server's tool name.
        tool: String,
        /// The limit.
        max_mib: usize,
    },
    /// The tool answered with an error (`isError`, or a JSON-RPC error).
    #[error("MCP tool `{tool}` of server `{server}` failed: {message}")]
    Tool {
        /// The server.
        server: String,
        /// The server's tool name.
        tool: String,
        /// Its text (redacted).
        message: String,
    },
    /// No such MCP tool is offered to this agent.
    #[error("unknown tool `{name}`")]
    UnknownTool {
        /// The name as called.
        name: String,
    },
}
