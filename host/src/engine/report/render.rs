//! The report as text for terminals.

use std::fmt::Write;

use super::details::{EvaluatorKind, ReflectDetails};
use super::{AgentReport, ModeDetails, RunReport};
use crate::event::{Artifact, ReviewVerdict, VerdictOutcome};
use crate::ids::AgentId;
use crate::text::{escape, escape_block};

/// Renders `r`: the run line, the decision, one line per agent, verdicts, branches,
/// the crew review, swarm conflicts and the result. Every text a model, a plugin, a
/// worker or a repository wrote (names, errors, branches, a dispatcher's reason,
/// validators' words, review findings, the result) is escaped: it must not drive the
/// terminal or forge lines of the report.
pub(super) fn text(r: &RunReport) -> String {
    let mut s = String::new();
    let reason = r.exit_reason.map(|e| e.as_str()).unwrap_or("-");
    if r.interrupted {
        let _ = writeln!(
            s,
            "run {}  mode {}  status interrupted  (finish it with `crewbox resume {}`)",
            r.run_id, r.mode, r.run_id
        );
    } else {
        let _ = writeln!(
            s,
            "run {}  mode {}  status {}  ({reason})",
            r.run_id, r.mode, r.status
        );
    }
    if let Some(team) = &r.team {
        let _ = writeln!(s, "team: {}", escape(team));
    }
    if let Some(d) = &r.details.decision {
        // An explicit choice's reason is its source again: said once.
        let reason = escape(&d.reason);
        if reason.trim().is_empty() || reason == d.source.as_str() {
            let _ = writeln!(s, "decision: {} ({})", d.mode, d.source);
        } else {
            let _ = writeln!(s, "decision: {} ({}, {reason})", d.mode, d.source);
        }
    }
    if let Some(f) = &r.details.fault {
        let _ = writeln!(s, "fault: {}: {}", escape(&f.step), escape(&f.fault));
    }
    for (a, depth) in tree_order(&r.agents) {
        let indent = "  ".repeat(depth);
        let _ = writeln!(
            s,
            "  {indent}{} {:<10} {:<9} turns {:>2}  tools {:>3}  tokens {}/{}  {} ms{}",
            a.id,
            escape(&a.name),
            a.state.as_str(),
            a.turns,
            a.tool_calls,
            a.tokens.input,
            a.tokens.output,
            a.duration_ms,
            a.error
                .as_deref()
                .map(|e| format!("  error: {}", escape(e)))
                .unwrap_or_default()
        );
    }
    for a in &r.agents {
        for v in &a.verdicts {
            let (outcome, failed) = match &v.outcome {
                VerdictOutcome::Passed { .. } => ("passed", Vec::new()),
                VerdictOutcome::Failed { verdict } => (
                    "failed",
                    verdict.results.iter().filter(|c| !c.passed).collect(),
                ),
                VerdictOutcome::Error { .. } => ("error", Vec::new()),
                VerdictOutcome::Fault { .. } => ("fault", Vec::new()),
            };
            // A file named like a built-in is told apart by where it came from.
            let validator = match v.source.as_str() {
                "builtin" | "" => escape(&v.validator).into_owned(),
                source => format!("{} ({})", escape(&v.validator), escape(source)),
            };
            let _ = writeln!(
                s,
                "  verdict  {:<12} round {} {:<15} {outcome}",
                escape(&a.name),
                v.round,
                validator
            );
            for c in failed {
                let _ = writeln!(
                    s,
                    "           ✗ {}: {}",
                    escape(&c.criterion),
                    escape(&c.detail)
                );
            }
        }
        if let Some(Artifact::Branch(b)) = &a.branch {
            let _ = writeln!(
                s,
                "  branch   {:<12} {} ({} commit(s))",
                escape(&a.name),
                escape(&b.branch),
                b.commits.len()
            );
        }
        // The agent named these files: escaped, one line each.
        for l in &a.left_out {
            let _ = writeln!(
                s,
                "  left out {:<12} {} ({})",
                a.name,
                escape(&l.path),
                l.reason
            );
        }
        if a.left_out_more > 0 {
            let _ = writeln!(
                s,
                "  left out {:<12} … and {} more",
                a.name, a.left_out_more
            );
        }
    }
    if let Some(i) = &r.details.integration {
        if let Some(b) = &i.branch {
            let _ = writeln!(
                s,
                "integration {} ({} commit(s) since {})",
                escape(&b.branch),
                b.commits.len(),
                escape(b.base.get(..12).unwrap_or(&b.base))
            );
        }
        for (member, branch, files) in i.conflicts() {
            let _ = writeln!(
                s,
                "  merge-conflict {}: {} kept, not merged ({})",
                escape(member),
                escape(branch),
                escape(&files.join(", "))
            );
        }
    }
    match &r.details.mode {
        Some(ModeDetails::Crew(crew)) => {
            if let Some(exec) = &crew.execution
                && let Some(v) = &exec.verdict
            {
                let _ = writeln!(
                    s,
                    "review: {} after {} revision(s)",
                    v.label(),
                    exec.revisions
                );
                if let ReviewVerdict::Fail { findings } = v {
                    for f in findings {
                        let _ = writeln!(s, "  - {}", escape(f));
                    }
                }
            }
        }
        Some(ModeDetails::Swarm(swarm))
            if !swarm.conflicts.is_empty() || !swarm.not_run.is_empty() =>
        {
            if !swarm.conflicts.is_empty() {
                let _ = writeln!(s, "conflicts: {}", escape(&swarm.conflicts.join(", ")));
            }
            for why in &swarm.not_run {
                let _ = writeln!(s, "not run: {}", escape(why));
            }
        }
        Some(ModeDetails::Reflect(reflect)) => {
            iterations(&mut s, reflect);
            if !reflect.unread_messages.is_empty() {
                let _ = writeln!(
                    s,
                    "messages no iteration took in: {}",
                    reflect.unread_messages.len()
                );
                for m in &reflect.unread_messages {
                    let _ = writeln!(s, "  - {}", escape(m));
                }
            }
        }
        Some(ModeDetails::Orchestrate(o)) if o.workers_used == 0 => {
            let nudge = if o.nudged {
                " (even after the nudge)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "no worker ran: the orchestrator assigned none{nudge}; its own answer stands"
            );
        }
        Some(
            ModeDetails::Single(_)
            | ModeDetails::Swarm(_)
            | ModeDetails::Members(_)
            | ModeDetails::Orchestrate(_),
        )
        | None => {}
    }
    if let Some(result) = &r.result {
        let _ = writeln!(s, "\nresult:\n{}", escape_block(result.trim_end()));
    }
    s
}

/// The agents depth first, each under the agent that started it (workers under their
/// orchestrator), siblings in creation order; an agent whose parent is not in the run
/// is a root.
pub(crate) fn tree_order(agents: &[AgentReport]) -> Vec<(&AgentReport, usize)> {
    let ids: std::collections::HashSet<_> = agents.iter().map(|a| &a.id).collect();
    let mut out = Vec::with_capacity(agents.len());
    fn visit<'a>(
        agents: &'a [AgentReport],
        parent: Option<&AgentId>,
        ids: &std::collections::HashSet<&AgentId>,
        depth: usize,
        out: &mut Vec<(&'a AgentReport, usize)>,
    ) {
        for a in agents {
            let own_parent = a.parent.as_ref().filter(|p| ids.contains(p) && *p != &a.id);
            if own_parent == parent {
                out.push((a, depth));
                // Ids are unique, so each agent is visited once and the walk ends.
                if depth < agents.len() {
                    visit(agents, Some(&a.id), ids, depth + 1, out);
                }
            }
        }
    }
    visit(agents, None, &ids, 0, &mut out);
    out
}

/// One line per reflect iteration: score, trend, stall warning, errors; then the best.
fn iterations(s: &mut String, r: &ReflectDetails) {
    let _ = writeln!(
        s,
        "iterations: {} of at most {} (goal score {}, judged by the {})",
        r.iterations.len(),
        r.max_iterations,
        r.threshold,
        match r.evaluator {
            EvaluatorKind::Evaluator => "evaluator",
            EvaluatorKind::Orchestrator => "orchestrator",
        }
    );
    for it in &r.iterations {
        let score = match it.score {
            Some(v) if it.score_defaulted => format!("score {v} (unreadable, assumed)"),
            Some(v) => format!("score {v}"),
            None => "no score".to_owned(),
        };
        let trend = match it.trend {
            Some(Some(t)) => format!("  {t}"),
            Some(None) | None => String::new(),
        };
        let mut flags = String::new();
        if it.complete {
            flags.push_str("  complete");
        }
        if it.stall_warning {
            flags.push_str("  ⚠ stall warning");
        }
        if let Some(e) = &it.error {
            let _ = write!(flags, "  error: {}", escape(e));
        }
        let _ = writeln!(s, "  #{:<2} {score}{trend}{flags}", it.iteration);
    }
    if let Some(best) = r.best_iteration {
        let _ = writeln!(s, "  best: iteration {best}");
    }
}
