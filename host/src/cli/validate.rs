//! `crewbox validate`: runs one validator on an agent output and prints the verdict.

use std::path::PathBuf;

use serde::Deserialize;

use super::Exit;
use crate::text::escape;
use crewbox::plugins::{AgentOutput, AgentStatus, Plugins, ValidateError, verdict};

/// `crewbox validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The validator: a built-in or discovered name, or a component file.
    #[arg(long)]
    pub plugin: String,
    /// The agent output, a JSON file: `{agent_id?, role?, task?, status?, reply}`.
    #[arg(long)]
    pub output: PathBuf,
    /// The workspace the validator may read.
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// A criterion (repeatable); none means the validator's defaults.
    #[arg(long)]
    pub criteria: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The agent output file.
#[derive(Deserialize)]
struct OutputFile {
    #[serde(default)]
    agent_id: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    task: String,
    #[serde(default)]
    status: Option<String>,
    reply: String,
}

fn parse_status(s: Option<&str>) -> Option<AgentStatus> {
    Some(match s.unwrap_or("completed") {
        "completed" => AgentStatus::Completed,
        "steered" => AgentStatus::Steered,
        "stopped" => AgentStatus::Stopped,
        "error" => AgentStatus::Error,
        _ => return None,
    })
}

/// Runs `crewbox validate`: exit 0 pass, 1 failed (or could not judge), 2 usage, 3 fault.
pub async fn run(args: ValidateArgs) -> anyhow::Result<Exit> {
    let text = match tokio::fs::read_to_string(&args.output).await {
        Ok(t) => t,
        Err(e) => {
            errln!("cannot read {}: {e}", args.output.display());
            return Ok(Exit::Usage);
        }
    };
    let file: OutputFile = match serde_json::from_str(&text) {
        Ok(f) => f,
        Err(e) => {
            errln!("{}: not an agent output: {e}", args.output.display());
            return Ok(Exit::Usage);
        }
    };
    let Some(status) = parse_status(file.status.as_deref()) else {
        errln!(
            "{}: unknown status (completed, steered, stopped, error)",
            args.output.display()
        );
        return Ok(Exit::Usage);
    };
    let output = AgentOutput {
        agent_id: file.agent_id,
        role: file.role,
        task: file.task,
        status,
        reply: file.reply,
    };
    let plugins = tokio::task::spawn_blocking(Plugins::here).await??;
    let validated = match plugins
        .validate(&args.plugin, &output, args.workspace, &args.criteria)
        .await
    {
        Ok(v) => v,
        Err(e @ ValidateError::Interrupted(_)) => return Err(e.into()),
        Err(e) => {
            errln!("{}", escape(&e.to_string()));
            return Ok(Exit::Usage);
        }
    };
    let (name, source) = (validated.name, validated.source);
    let (exit, json) = match validated.outcome {
        Ok(Ok(v)) => {
            // The one verdict rule (the engine's): the flag and every criterion.
            let passed = verdict::passes(&v);
            let results: Vec<_> = v
                .results
                .iter()
                .map(|r| serde_json::json!({ "criterion": r.criterion, "passed": r.passed, "detail": r.detail }))
                .collect();
            let json = serde_json::json!({
                "plugin": name, "source": source, "judged": true, "passed": passed,
                "flag": v.passed, "results": results, "fix_prompt": v.fix_prompt,
            });
            if !args.json {
                outln!(
                    "{} ({} {source})",
                    if passed { "PASS" } else { "FAIL" },
                    escape(&name)
                );
                if !v.passed && v.results.iter().all(|r| r.passed) {
                    outln!("  the validator failed the work without naming a failed criterion");
                }
                for r in &v.results {
                    outln!(
                        "  [{}] {}: {}",
                        if r.passed { "ok" } else { "!!" },
                        escape(&r.criterion),
                        escape(&r.detail)
                    );
                }
                if let Some(fix) = &v.fix_prompt {
                    outln!("fix: {}", escape(fix));
                }
            }
            (if passed { Exit::Ok } else { Exit::CheckFailed }, json)
        }
        Ok(Err(reason)) => {
            if !args.json {
                outln!("could not judge: {}", escape(&reason));
            }
            (
                Exit::CheckFailed,
                serde_json::json!({ "plugin": name, "source": source, "judged": false, "passed": false, "error": reason }),
            )
        }
        Err(fault) => {
            errln!("{}", escape(&fault.to_string()));
            (
                Exit::PluginFault,
                serde_json::json!({ "plugin": name, "source": source, "judged": false, "passed": false, "fault": fault.to_string() }),
            )
        }
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&json)?);
    }
    Ok(exit)
}
