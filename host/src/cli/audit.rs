//! `crewbox audit [RUN] [--json]`: the audit chain of decisions; `crewbox audit verify`:
//! checks every link (see `store/audit.rs`).

use super::{Context, Exit};
use crate::text::escape as clean;

/// Arguments of `crewbox audit`.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    /// `verify`: check the chain instead of printing it.
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    /// Only this run's records (id or unique prefix).
    pub run: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The subcommands of `crewbox audit`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AuditCommand {
    /// Check every link of the chain: reports the first edited record (broken link),
    /// missing record (gap) or cut-off tail (truncation). Exits 1 when one is found.
    Verify {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

impl AuditArgs {
    /// Whether the output is JSON.
    pub fn json(&self) -> bool {
        match &self.command {
            Some(AuditCommand::Verify { json }) => *json || self.json,
            None => self.json,
        }
    }
}

/// Prints or verifies the chain.
pub async fn run(ctx: Context, args: AuditArgs) -> anyhow::Result<Exit> {
    let json = args.json();
    let Some(store) = ctx.store_if_exists()? else {
        if json {
            outln!("{}", serde_json::json!({"status": "intact", "records": 0}));
        } else {
            outln!("no audit records (nothing has run here yet)");
        }
        return Ok(Exit::Ok);
    };
    if let Some(AuditCommand::Verify { .. }) = args.command {
        let verdict = store.audit_verify().await?;
        if json {
            outln!("{}", serde_json::to_string(&verdict)?);
        } else {
            outln!("{verdict}");
        }
        return Ok(if verdict.intact() {
            Exit::Ok
        } else {
            Exit::CheckFailed
        });
    }
    let run = match &args.run {
        Some(id) => match super::lookup::run(&store, id).await? {
            Ok(r) => Some(r.id),
            Err(exit) => return Ok(exit),
        },
        None => None,
    };
    let records = store.audit_records(run.as_ref()).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&records)?);
        return Ok(Exit::Ok);
    }
    for r in &records {
        let about = match (&r.run_id, &r.agent_id) {
            (Some(run), Some(agent)) => format!("{run} {agent}"),
            (Some(run), None) => run.clone(),
            (None, Some(agent)) => agent.clone(),
            (None, None) => "-".into(),
        };
        outln!(
            "{:>6} {} {:<20} {} {} {}",
            r.seq,
            r.at,
            clean(&r.kind),
            clean(&about),
            clean(&r.data.to_string()),
            &r.hash[..12.min(r.hash.len())]
        );
    }
    Ok(Exit::Ok)
}
