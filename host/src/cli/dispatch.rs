//! `crewbox dispatch explain`: runs a dispatcher on a prompt and shows its decision.

use std::path::PathBuf;

use super::{Context, Exit};
use crate::text::escape;
use crewbox::plugins::ExplainError;

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
        /// A dispatcher component to use instead of the configured one (`dispatcher` in
        /// your config or a trusted repository's, else the built-in `heuristic`).
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

/// Runs `crewbox dispatch …`: the dispatcher a run here would ask (the one configured
/// in the user's config or a trusted repository's, else `heuristic`), loaded as the run
/// loads it and offered the same modes, unless `--plugin` names another.
pub async fn run(ctx: Context, args: DispatchArgs) -> anyhow::Result<Exit> {
    let DispatchCommand::Explain {
        prompt,
        plugin,
        json,
    } = args.command;
    // A file named on the command line is relative to where the user is; anything
    // else is a name (a built-in, the user's or a trusted repository's plugin).
    let dispatcher = plugin.map(|p| match p.symlink_metadata().is_ok() {
        true => std::path::absolute(&p).unwrap_or(p),
        false => p,
    });
    let explained = match ctx
        .explain_dispatch(&prompt, dispatcher.map(|p| p.display().to_string()))
        .await
    {
        Ok(e) => e,
        Err(ExplainError::Dispatch(e)) => {
            errln!("crewbox: {e}");
            return Ok(match e.class() {
                crewbox::ErrorClass::PluginFault => Exit::PluginFault,
                crewbox::ErrorClass::Usage | crewbox::ErrorClass::Interrupted => Exit::Usage,
            });
        }
        Err(e) => return Err(e.into()),
    };
    let (d, answer) = (&explained.decision, &explained.answer);
    if json {
        let signals: Vec<_> = answer
            .signals
            .iter()
            .map(|s| serde_json::json!({ "name": s.name, "detail": s.detail }))
            .collect();
        let out = serde_json::json!({
            "plugin": explained.dispatcher,
            "mode": d.mode.as_str(),
            "reason": d.reason,
            "swarm_size": d.swarm_size,
            "tasks": answer.tasks,
            "signals": signals,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        // The dispatcher's words, escaped: they must not drive the terminal.
        outln!("dispatcher: {}", escape(&explained.dispatcher));
        outln!("mode:   {}", d.mode.as_str());
        outln!("reason: {}", escape(&d.reason));
        if let Some(n) = d.swarm_size {
            outln!("swarm:  {n}");
        }
        for t in &answer.tasks {
            outln!("task:   {}", escape(t));
        }
        for s in &answer.signals {
            outln!("signal: {} ({})", escape(&s.name), escape(&s.detail));
        }
    }
    Ok(Exit::Ok)
}
