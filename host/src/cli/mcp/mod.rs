//! `crewbox mcp list|tools NAME|call NAME TOOL [JSON]`: the MCP servers agents may be
//! granted, their tools as an agent would see them, and one call for checking a setup;
//! `crewbox mcp serve` ([`serve`]): crewbox itself as an MCP server.
//!
//! A stdio server runs inside the process sandbox over the repository, read-only,
//! exactly as it would for a read-only agent (network only if the server has
//! `network = true`).

use serde_json::{Value, json};

use super::{Context, Exit};

pub mod serve;

/// Arguments of `crewbox mcp`.
#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: McpCommand,
}

/// The `mcp` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum McpCommand {
    /// List the MCP servers (state, tool count, source).
    List {
        /// Do not start the servers to count their tools.
        #[arg(long)]
        no_start: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Show a server's tools as an agent would see them.
    Tools {
        /// The server.
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool of a server (for checking a setup).
    Call {
        /// The server.
        name: String,
        /// The server's name of the tool (or `mcp__SERVER__TOOL`).
        tool: String,
        /// The arguments, a JSON object (default `{}`).
        args: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Serve this repository to MCP clients (Claude Code, Codex, …): stdio, or
    /// streamable HTTP with --http.
    Serve(serve::ServeArgs),
}

impl McpCommand {
    /// Whether the output is for programs.
    pub fn json(&self) -> bool {
        match self {
            Self::List { json, .. } | Self::Tools { json, .. } | Self::Call { json, .. } => *json,
            // stdout is the protocol's.
            Self::Serve(_) => true,
        }
    }
}

/// Runs `crewbox mcp …`.
pub async fn run(ctx: Context, args: McpArgs) -> anyhow::Result<Exit> {
    match args.command {
        McpCommand::List { no_start, json } => list(&ctx, no_start, json).await,
        McpCommand::Tools { name, json } => tools(&ctx, &name, json).await,
        McpCommand::Call {
            name,
            tool,
            args,
            json,
        } => call(&ctx, &name, &tool, args.as_deref(), json).await,
        McpCommand::Serve(args) => serve::run(ctx, args).await,
    }
}

async fn list(ctx: &Context, no_start: bool, json: bool) -> anyhow::Result<Exit> {
    let mut rows = Vec::new();
    for (name, s) in &ctx.config().mcp.servers {
        let (state, count, error) = if no_start {
            ("not started".to_owned(), None, None)
        } else {
            match ctx.mcp_server(name)?.tools().await {
                Ok((t, _)) => ("ok".to_owned(), Some(t.len()), None),
                Err(e) => ("failed".to_owned(), None, Some(e.to_string())),
            }
        };
        rows.push(json!({
            "name": name,
            "transport": s.kind(),
            "source": s.source.as_str(),
            "state": state,
            "tools": count,
            "error": error,
            "read_only": s.read_only,
            "network": s.network,
            "default": ctx.config().mcp.default.contains(name),
            "summary": s.summary(),
        }));
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"servers": rows}))?
        );
        return Ok(Exit::Ok);
    }
    if rows.is_empty() {
        outln!("no MCP servers: define them as [mcp.servers.NAME] in your user config");
        return Ok(Exit::Ok);
    }
    for r in &rows {
        let tools = r["tools"]
            .as_u64()
            .map(|n| format!("{n} tools"))
            .unwrap_or_else(|| "-".into());
        outln!(
            "{:<16} {:<6} {:<10} {:<12} {:<9} {}",
            r["name"].as_str().unwrap_or(""),
            r["transport"].as_str().unwrap_or(""),
            r["source"].as_str().unwrap_or(""),
            r["state"].as_str().unwrap_or(""),
            tools,
            r["summary"].as_str().unwrap_or("")
        );
        if let Some(e) = r["error"].as_str() {
            outln!("  {e}");
        }
    }
    Ok(Exit::Ok)
}

async fn tools(ctx: &Context, name: &str, json: bool) -> anyhow::Result<Exit> {
    // The listing logged its warnings (a cut listing, tools left out) on stderr once;
    // `--json` carries them too.
    let (tools, warnings) = ctx.mcp_server(name)?.tools().await?;
    if json {
        let list: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.agent_name,
                    "tool": t.tool,
                    "description": t.spec.description,
                    "input_schema": t.spec.parameters,
                    "read_only_hint": t.read_only_hint,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"server": name, "tools": list, "warnings": warnings})
            )?
        );
        return Ok(Exit::Ok);
    }
    for t in &tools {
        outln!("{}", t.agent_name);
        outln!("    {}", t.spec.description);
    }
    Ok(Exit::Ok)
}

async fn call(
    ctx: &Context,
    name: &str,
    tool: &str,
    args: Option<&str>,
    json: bool,
) -> anyhow::Result<Exit> {
    let server = ctx.mcp_server(name)?;
    let args: Value = match args {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("the arguments are not JSON: {e}"))?,
        None => json!({}),
    };
    let called = server.call(tool, args).await?;
    let (ok, text) = match called.result {
        Ok(t) => (true, t),
        Err(e) => (false, e.to_string()),
    };
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"server": name, "tool": called.tool, "ok": ok, "content": text})
            )?
        );
    } else if ok {
        outln!("{text}");
    } else {
        errln!("crewbox: {text}");
    }
    Ok(if ok { Exit::Ok } else { Exit::CheckFailed })
}
