//! `finish {summary?}` (read, so every agent may finish): ends the agent's run.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support;
use super::{Capability, Tool, ToolContext, ToolError, ToolOutput};
use crate::provider::ToolSpec;

/// The tool's name.
pub const NAME: &str = "finish";

/// Declares the agent done, with an optional summary as its result.
#[derive(Debug, Default, Clone, Copy)]
pub struct Finish;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    summary: Option<String>,
}

#[async_trait]
impl Tool for Finish {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capability(&self) -> Capability {
        Capability::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Declare your task done. `summary` is your final result: what you did, found or decided."
                .into(),
            parameters: support::object_schema(
                json!({
                    "summary": {"type": "string", "description": "Your final result for whoever gave you the task."}
                }),
                &[],
            ),
        }
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        Ok(ToolOutput {
            content: "finished".into(),
            finish: Some(args.summary.unwrap_or_default()),
        })
    }
}
