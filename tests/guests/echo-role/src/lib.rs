//! A role that echoes its context, so tests can check every role call round-trips.
//!
//! `interpret` reads the reply's first word: `PASS`, `FAIL a; b`, `PLAN a; b`, or
//! anything else as `done`.

wit_bindgen::generate!({ path: "../../../wit", world: "role" });

use crewbox::plugin::types::{Access, Outcome, RoleContext, RoleSpec};
use exports::crewbox::plugin::crew_role::Guest;

struct EchoRole;

fn items(rest: &str) -> Vec<String> {
    rest.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Guest for EchoRole {
    fn spec() -> RoleSpec {
        RoleSpec {
            name: "echo".to_owned(),
            description: "Echoes its context.".to_owned(),
            access: Access::ReadOnly,
            model_hint: None,
            turn_limit: Some(3),
        }
    }

    fn prompt(context: RoleContext) -> String {
        let changed = match crewbox::plugin::workspace::changed_paths().len() {
            0 => String::new(),
            n => format!(" ({n} changed)"),
        };
        format!(
            "[r{}] {}: {}{changed}",
            context.revision, context.request, context.task
        )
    }

    fn interpret(_context: RoleContext, output: String) -> Outcome {
        if let Some(rest) = output.strip_prefix("PASS") {
            Outcome::Pass(rest.trim().to_owned())
        } else if let Some(rest) = output.strip_prefix("FAIL") {
            Outcome::Fail(items(rest))
        } else if let Some(rest) = output.strip_prefix("PLAN") {
            Outcome::Plan(items(rest))
        } else {
            Outcome::Done(output)
        }
    }
}

export!(EchoRole);
