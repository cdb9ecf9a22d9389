//! `crewbox audit [RUN] [--json]`: the audit chain of decisions; `crewbox audit verify`:
//! checks every link (see `store/audit.rs`).

use super::{Context, Exit};
use crate::text::escape as clean;
use crewbox::ReadError;

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
    /// An intact chain's head (`SEQ:HASH`) is printed: keep it elsewhere, and pass it
    /// back with `--anchor` to check the chain was not rewritten since.
    Verify {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// A head an earlier `verify` printed (`SEQ:HASH`), kept elsewhere: the chain
        /// must still hold that record with that hash.
        #[arg(long, value_name = "SEQ:HASH")]
        anchor: Option<crewbox::types::AuditAnchor>,
    },
}

impl AuditArgs {
    /// Whether the output is JSON.
    pub fn json(&self) -> bool {
        match &self.command {
            Some(AuditCommand::Verify { json, .. }) => *json || self.json,
            None => self.json,
        }
    }
}

/// Prints or verifies the chain.
pub async fn run(ctx: Context, args: AuditArgs) -> anyhow::Result<Exit> {
    let json = args.json();
    let nothing_ran = || -> anyhow::Result<Exit> {
        if json {
            outln!("{}", serde_json::json!({"status": "intact", "records": 0}));
        } else {
            outln!("no audit records (nothing has run here yet)");
        }
        Ok(Exit::Ok)
    };
    if let Some(AuditCommand::Verify { anchor, .. }) = args.command {
        let anchored = anchor.as_ref().map(|a| a.seq);
        let verdict = match ctx.verify_audit(anchor).await {
            Ok(verdict) => verdict,
            // No store at all: an anchor past the empty chain is lost with it.
            Err(ReadError::NoRuns) if anchored.is_some_and(|seq| seq > 0) => {
                crewbox::types::AuditVerdict::AnchorLost {
                    seq: anchored.unwrap_or_default(),
                    found: None,
                }
            }
            Err(ReadError::NoRuns) => return nothing_ran(),
            Err(e) => return Err(e.into()),
        };
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
    let records = match ctx.audit_trail(args.run.as_deref()).await {
        Ok(records) => records,
        Err(ReadError::NoRuns) => return nothing_ran(),
        Err(e) if e.is_usage() => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(e.into()),
    };
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
