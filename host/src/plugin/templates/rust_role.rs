//! `{{name}}`: a crewbox crew role. It reviews the executor's diff read-only and
//! passes it unless the agent's reply starts with `FAIL`.

use crewbox_plugin_sdk::{Access, Outcome, Role, RoleContext, RoleSpec};

struct Reviewer;

impl Role for Reviewer {
    fn spec() -> RoleSpec {
        RoleSpec {
            name: "{{name}}".into(),
            description: "Reviews the diff and passes or lists findings.".into(),
            access: Access::ReadOnly,
            model_hint: None,
            turn_limit: Some(10),
        }
    }

    fn prompt(context: RoleContext) -> String {
        let diff = context.diff.unwrap_or_default();
        format!(
            "Review this change for: {}\n\n{diff}\n\nAnswer `PASS summary` or `FAIL finding; finding`.",
            context.request
        )
    }

    fn interpret(_context: RoleContext, output: String) -> Outcome {
        match output.trim().strip_prefix("FAIL") {
            Some(rest) => Outcome::Fail(
                rest.split(';')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
            ),
            None => Outcome::Pass(output.trim().to_string()),
        }
    }
}

crewbox_plugin_sdk::export_role!(Reviewer);
