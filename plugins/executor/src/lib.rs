//! The built-in `executor` crew role: carries out the plan with full access and,
//! on a revision, addresses the reviewer's findings.

use crewbox_plugin_sdk::{Access, Outcome, Role, RoleContext, RoleSpec};

/// The exported role.
pub struct Executor;

impl Role for Executor {
    fn spec() -> RoleSpec {
        RoleSpec {
            name: "executor".into(),
            description:
                "Makes the planned changes: edits files and runs commands in its worktree.".into(),
            access: Access::Full,
            model_hint: None,
            // The executor does the bulk of the work; the run's own limit applies.
            turn_limit: None,
        }
    }

    fn prompt(context: RoleContext) -> String {
        prompt(&context)
    }

    fn interpret(_context: RoleContext, output: String) -> Outcome {
        interpret(&output)
    }
}

/// The executor's prompt: request, plan and, for a revision, the findings to fix.
pub fn prompt(context: &RoleContext) -> String {
    let mut p = String::from(
        "You are the executor of a crew. Make the changes in your worktree: edit files, run \
         the build and tests, and fix what fails. When done, reply with a short summary of \
         what you changed and how you checked it.\n\n",
    );
    p.push_str("## Request\n");
    p.push_str(context.request.trim());
    p.push('\n');
    if !context.task.trim().is_empty() && context.task.trim() != context.request.trim() {
        p.push_str("\n## Your task\n");
        p.push_str(context.task.trim());
        p.push('\n');
    }
    if let Some(plan) = context
        .plan
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        p.push_str("\n## Plan\n");
        p.push_str(plan);
        p.push('\n');
    }
    if context.revision > 0 {
        p.push_str(&format!(
            "\n## Review findings (revision {})\nA reviewer rejected the previous attempt. Your earlier \
             changes are still in the worktree; address every finding below.\n",
            context.revision
        ));
        if context.findings.is_empty() {
            p.push_str("- (the reviewer gave no specific findings; re-check the request)\n");
        }
        for finding in &context.findings {
            p.push_str("- ");
            p.push_str(finding.trim());
            p.push('\n');
        }
    }
    p
}

/// The executor's reply is its result.
pub fn interpret(output: &str) -> Outcome {
    Outcome::Done(output.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(revision: u32, findings: &[&str]) -> RoleContext {
        RoleContext {
            request: "Add a --json flag".into(),
            task: "Add a --json flag".into(),
            plan: Some("1. Parse the flag\n2. Print JSON".into()),
            diff: None,
            findings: findings.iter().map(|f| f.to_string()).collect(),
            revision,
        }
    }

    #[test]
    fn spec_has_full_access() {
        let spec = <Executor as Role>::spec();
        assert_eq!(
            (spec.name.as_str(), spec.access),
            ("executor", Access::Full)
        );
    }

    #[test]
    fn first_attempt_gets_request_and_plan_but_no_findings() {
        let p = prompt(&context(0, &["stale"]));
        assert!(p.contains("## Request\nAdd a --json flag\n"));
        assert!(p.contains("## Plan\n1. Parse the flag\n2. Print JSON\n"));
        assert!(!p.contains("Review findings") && !p.contains("stale"));
    }

    #[test]
    fn revision_lists_every_finding() {
        let p = prompt(&context(2, &["missing test", " wrong exit code "]));
        assert!(p.contains("## Review findings (revision 2)"));
        assert!(p.contains("- missing test\n- wrong exit code\n"));
    }

    #[test]
    fn revision_without_findings_says_so() {
        assert!(prompt(&context(1, &[])).contains("no specific findings"));
    }

    #[test]
    fn reply_is_done() {
        assert_eq!(
            interpret("\nChanged src/cli.rs.\n"),
            Outcome::Done("Changed src/cli.rs.".into())
        );
    }
}

crewbox_plugin_sdk::export_role!(Executor);
