//! `crewbox dispatch explain`: runs a dispatcher on a prompt and shows its decision.

use std::path::PathBuf;

use super::Exit;
use super::plugin::{resolve, runtime};
use crate::plugin::discover::Found;
use crate::plugin::{DispatchRequest, Grants, Mode, PluginKind};
use crate::text::escape;

/// `crewbox dispatch …`.
#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: DispatchCommand,
}

/// The `dispatch` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum DispatchCommand {
    /// Shows which mode a prompt would run in, and why.
    Explain {
        /// The prompt.
        prompt: String,
        /// A dispatcher component to use instead of the built-in `heuristic`.
        #[arg(long)]
        plugin: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

impl DispatchArgs {
    /// Whether the output is JSON.
    pub fn json(&self) -> bool {
        match &self.command {
            DispatchCommand::Explain { json, .. } => *json,
        }
    }
}

/// The mode's name as printed and configured.
fn mode_name(mode: Mode) -> &'static str {
    crewbox::Mode::from(mode).as_str()
}

/// Runs `crewbox dispatch …`.
pub async fn run(args: DispatchArgs) -> anyhow::Result<Exit> {
    let DispatchCommand::Explain {
        prompt,
        plugin,
        json,
    } = args.command;
    let spec = plugin.map_or_else(|| "heuristic".to_owned(), |p| p.display().to_string());
    let lookup = spec.clone();
    let found = match tokio::task::spawn_blocking(move || resolve(&lookup)).await? {
        Ok(Some(found)) => found,
        Ok(None) => {
            errln!(
                "no dispatcher `{}`: not a file, a built-in or a discovered plugin",
                escape(&spec)
            );
            return Ok(Exit::Usage);
        }
        Err(e) => {
            errln!("{}", escape(&format!("{e:#}")));
            return Ok(Exit::Usage);
        }
    };
    let Found {
        name,
        source,
        bytes,
    } = found;
    let rt = runtime()?;
    let plugin = match rt
        .load(
            &name,
            source,
            bytes,
            Grants::defaults_for(PluginKind::Dispatcher),
            None,
        )
        .await
    {
        Ok(p) => p,
        Err(e) => {
            errln!("{}", escape(&e.to_string()));
            return Ok(Exit::Usage);
        }
    };
    let request = DispatchRequest {
        prompt,
        team: None,
        // Every mode, in the order offered to dispatchers.
        available_modes: crewbox::Mode::ALL.iter().map(|m| Mode::from(*m)).collect(),
    };
    let d = match plugin.decide(&request).await {
        Ok(d) => d,
        Err(fault) => {
            errln!("{}", escape(&fault.to_string()));
            return Ok(Exit::PluginFault);
        }
    };
    if json {
        let signals: Vec<_> = d
            .signals
            .iter()
            .map(|s| serde_json::json!({ "name": s.name, "detail": s.detail }))
            .collect();
        let out = serde_json::json!({
            "plugin": name,
            "mode": mode_name(d.mode),
            "reason": d.reason,
            "swarm_size": d.swarm_size,
            "tasks": d.tasks,
            "signals": signals,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        // The dispatcher's words, escaped: they must not drive the terminal.
        outln!("mode:   {}", mode_name(d.mode));
        outln!("reason: {}", escape(&d.reason));
        if let Some(n) = d.swarm_size {
            outln!("swarm:  {n}");
        }
        for t in &d.tasks {
            outln!("task:   {}", escape(t));
        }
        for s in &d.signals {
            outln!("signal: {} ({})", escape(&s.name), escape(&s.detail));
        }
    }
    Ok(Exit::Ok)
}
