//! The built-in `planner` crew role: reads the repository (read-only) and answers
//! with a numbered plan that the host hands to the executor.

use crewbox_plugin_sdk::{Access, Outcome, Role, RoleContext, RoleSpec};

/// Turns the planner may take: enough to look around, not to wander.
pub const TURN_LIMIT: u32 = 12;

/// The exported role.
pub struct Planner;

impl Role for Planner {
    fn spec() -> RoleSpec {
        RoleSpec {
            name: "planner".into(),
            description: "Reads the repository and writes a numbered plan; never edits files."
                .into(),
            access: Access::ReadOnly,
            model_hint: None,
            turn_limit: Some(TURN_LIMIT),
        }
    }

    fn prompt(context: RoleContext) -> String {
        prompt(&context)
    }

    fn interpret(_context: RoleContext, output: String) -> Outcome {
        interpret(&output)
    }
}

/// The planner's prompt for `context`.
pub fn prompt(context: &RoleContext) -> String {
    let mut p = String::from(
        "You are the planner of a crew. Read the repository as needed (you cannot edit files \
         or run commands) and plan the work below for an executor who will make the changes.\n\n",
    );
    p.push_str("## Request\n");
    p.push_str(context.request.trim());
    p.push('\n');
    if !context.task.trim().is_empty() && context.task.trim() != context.request.trim() {
        p.push_str("\n## Your task\n");
        p.push_str(context.task.trim());
        p.push('\n');
    }
    p.push_str(
        "\n## Answer with\nA numbered plan, one task per line (`1. …`, `2. …`). Each task must be \
         concrete and self-contained: name the files to change and how to check the result. \
         Put nothing but the plan on numbered lines.\n",
    );
    p
}

/// Reads a plan from the reply: its numbered lines, or else its bullets; with
/// neither, the whole reply is the result.
pub fn interpret(output: &str) -> Outcome {
    let numbered: Vec<String> = output.lines().filter_map(numbered_item).collect();
    if !numbered.is_empty() {
        return Outcome::Plan(numbered);
    }
    let bullets: Vec<String> = output.lines().filter_map(bullet_item).collect();
    if !bullets.is_empty() {
        return Outcome::Plan(bullets);
    }
    Outcome::Done(output.trim().to_string())
}

/// The text of a `1. task` / `1) task` line.
fn numbered_item(line: &str) -> Option<String> {
    let line = line.trim_start();
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 3 {
        return None;
    }
    let rest = line[digits..].strip_prefix(['.', ')'])?;
    item_text(rest)
}

/// The text of a `- task` / `* task` line.
fn bullet_item(line: &str) -> Option<String> {
    item_text(line.trim_start().strip_prefix(['-', '*'])?)
}

/// The item after its marker: a space must follow, and it must say something.
fn item_text(rest: &str) -> Option<String> {
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let text = rest.trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(request: &str, task: &str) -> RoleContext {
        RoleContext {
            request: request.into(),
            task: task.into(),
            plan: None,
            diff: None,
            findings: Vec::new(),
            revision: 0,
        }
    }

    #[test]
    fn spec_is_read_only() {
        let spec = <Planner as Role>::spec();
        assert_eq!(
            (spec.name.as_str(), spec.access),
            ("planner", Access::ReadOnly)
        );
        assert_eq!(spec.turn_limit, Some(TURN_LIMIT));
    }

    #[test]
    fn prompt_carries_the_request_and_asks_for_a_numbered_plan() {
        let p = prompt(&context("Add a --json flag", "Add a --json flag"));
        assert!(p.contains("## Request\nAdd a --json flag\n"));
        assert!(p.contains("numbered plan"));
        assert!(
            !p.contains("## Your task"),
            "task equal to the request is not repeated"
        );
        let p = prompt(&context("Add a --json flag", "Only the CLI part"));
        assert!(p.contains("## Your task\nOnly the CLI part"));
    }

    #[test]
    fn numbered_lines_become_tasks() {
        let reply = "Here is the plan:\n\n1. Add the flag in src/cli.rs\n2) Print JSON\n   - detail bullet\n10. Test it\n\nThat's all.";
        assert_eq!(
            interpret(reply),
            Outcome::Plan(vec![
                "Add the flag in src/cli.rs".into(),
                "Print JSON".into(),
                "Test it".into()
            ])
        );
    }

    #[test]
    fn bullets_are_used_when_nothing_is_numbered() {
        let reply = "Plan:\n- first\n* second\n-not a bullet\n- \n";
        assert_eq!(
            interpret(reply),
            Outcome::Plan(vec!["first".into(), "second".into()])
        );
    }

    #[test]
    fn reply_without_items_is_done() {
        assert_eq!(
            interpret("  Nothing to do: already done.\n"),
            Outcome::Done("Nothing to do: already done.".into())
        );
        assert_eq!(
            interpret("1.5 is a number, 2.x is not a task"),
            Outcome::Done("1.5 is a number, 2.x is not a task".into())
        );
    }
}

crewbox_plugin_sdk::export_role!(Planner);
