//! `spawn_agent {role, task}` (spawn): starts a child agent and waits for its result.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, invalid};
use super::{Capability, SpawnError, Tool, ToolContext, ToolError, ToolOutput};
use crate::provider::ToolSpec;

const NAME: &str = "spawn_agent";

/// Delegates a task to a child agent through the context's [`super::Spawner`].
#[derive(Debug, Default, Clone, Copy)]
pub struct SpawnAgent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    role: String,
    task: String,
}

#[async_trait]
impl Tool for SpawnAgent {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capability(&self) -> Capability {
        Capability::Spawn
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Start a child agent with a role and a self-contained task, wait for it to finish and \
                          return its result. The child gets at most your permissions and can never spawn agents itself."
                .into(),
            parameters: support::object_schema(
                json!({
                    "role": {"type": "string", "description": "The child's role, e.g. `explorer` or `tester`."},
                    "task": {"type": "string", "description": "Everything the child needs to know to do the work."}
                }),
                &["role", "task"],
            ),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        if args.role.trim().is_empty() || args.task.trim().is_empty() {
            return Err(invalid(NAME, "`role` and `task` must not be empty"));
        }
        let Some(spawner) = &ctx.spawner else {
            return Err(ToolError::Denied {
                tool: NAME.into(),
                capability: Capability::Spawn,
            });
        };
        spawner
            .spawn_child(&ctx.agent_id, &args.role, &args.task)
            .await
            .map(ToolOutput::text)
            .map_err(|e| match e {
                SpawnError::Quota { .. } => ToolError::Failed(format!("{NAME} refused: {e}")),
                SpawnError::Failed(why) => {
                    ToolError::Failed(format!("child agent `{}` failed: {why}", args.role))
                }
            })
    }
}
