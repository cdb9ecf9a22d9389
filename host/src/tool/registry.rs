//! The tool registry: what each agent is offered and the one gate every call goes through.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{
    EditFile, FileAccess, Finish, Grep, ListDir, ReadFile, RunCommand, SpawnAgent, Tool,
    ToolContext, ToolError, ToolOutput, WriteFile,
};
use crate::provider::ToolSpec;
use crate::vocab::CapSet;

/// The tools agents can call, in the order they are offered.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// What is offered per capability set, built on first use (a tool's spec never
    /// changes): every turn of every agent offers one of these.
    offered: Arc<Mutex<OfferedSets>>,
}

/// The lists built so far, by capability set (at most 32: five capabilities).
type OfferedSets = Vec<(CapSet, Arc<Offered>)>;

/// The tools an agent holding some capabilities is offered, with their hash as a
/// request's fingerprint counts it.
#[derive(Debug)]
pub(crate) struct Offered {
    /// The specs, in offering order.
    pub(crate) specs: Arc<[ToolSpec]>,
    /// [`crate::provider::replay::digest::tools_hash`] of `specs`.
    pub(crate) hash: [u8; 32],
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl ToolRegistry {
    /// Every built-in tool: read_file, list_dir, grep, write_file, edit_file,
    /// run_command, spawn_agent, finish; `.crewbox/` read-only.
    pub fn builtin() -> Self {
        Self::builtin_with(FileAccess::default())
    }

    /// The built-in tools, the file tools writing with `files` (what the user's own
    /// config grants).
    pub fn builtin_with(files: FileAccess) -> Self {
        Self {
            tools: vec![
                Arc::new(ReadFile),
                Arc::new(ListDir),
                Arc::new(Grep),
                Arc::new(WriteFile { access: files }),
                Arc::new(EditFile { access: files }),
                Arc::new(RunCommand),
                Arc::new(SpawnAgent),
                Arc::new(Finish),
            ],
            offered: Arc::default(),
        }
    }

    /// The tool called `name`, whatever its capability.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Every tool's name, in offering order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.tools.iter().map(|t| t.name())
    }

    /// Specs of the tools an agent holding `caps` may call (the only ones it is shown).
    pub fn specs_for(&self, caps: &CapSet) -> Vec<ToolSpec> {
        self.offered_to(caps).specs.to_vec()
    }

    /// What an agent holding `caps` is offered, with its hash (built once per set).
    pub(crate) fn offered_to(&self, caps: &CapSet) -> Arc<Offered> {
        let mut offered = self.offered.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, o)) = offered.iter().find(|(c, _)| c == caps) {
            return o.clone();
        }
        let specs: Vec<ToolSpec> = self
            .tools
            .iter()
            .filter(|t| caps.contains(t.capability()))
            .map(|t| t.spec())
            .collect();
        let hash = crate::provider::replay::digest::tools_hash(&specs);
        let o = Arc::new(Offered {
            specs: specs.into(),
            hash,
        });
        offered.push((*caps, o.clone()));
        o
    }

    /// Calls `name` for an agent holding `caps`: `UnknownTool` if there is no such tool,
    /// `Denied` if `caps` lacks its capability, `InvalidArgs` if `args` do not fit its
    /// schema, otherwise whatever the tool answers.
    pub async fn call(
        &self,
        name: &str,
        ctx: &ToolContext,
        args: Value,
        caps: &CapSet,
    ) -> Result<ToolOutput, ToolError> {
        let tool = self
            .get(name)
            .ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?;
        let capability = tool.capability();
        if !caps.contains(capability) {
            return Err(ToolError::Denied {
                tool: name.to_owned(),
                capability,
            });
        }
        tool.call(ctx, args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Capability;

    #[test]
    fn every_spec_is_a_closed_object_schema() {
        let registry = ToolRegistry::builtin();
        let specs = registry.specs_for(&CapSet::full());
        assert_eq!(specs.len(), 8);
        for spec in specs {
            let schema = &spec.parameters;
            assert_eq!(schema["type"], "object", "{}", spec.name);
            assert_eq!(schema["additionalProperties"], false, "{}", spec.name);
            let props = schema["properties"].as_object().unwrap();
            for required in schema["required"].as_array().unwrap() {
                assert!(
                    props.contains_key(required.as_str().unwrap()),
                    "{}",
                    spec.name
                );
            }
            assert!(!spec.description.is_empty());
        }
    }

    #[test]
    fn argument_names_are_the_documented_ones() {
        let registry = ToolRegistry::builtin();
        let expected: [(&str, &[&str], &[&str]); 8] = [
            ("read_file", &["limit", "offset", "path"], &["path"]),
            ("list_dir", &["path"], &["path"]),
            ("grep", &["glob", "path", "pattern"], &["pattern"]),
            ("write_file", &["content", "path"], &["path", "content"]),
            (
                "edit_file",
                &["new", "old", "path"],
                &["path", "old", "new"],
            ),
            ("run_command", &["command", "timeout_s"], &["command"]),
            ("spawn_agent", &["role", "task"], &["role", "task"]),
            ("finish", &["summary"], &[]),
        ];
        for (name, props, required) in expected {
            let spec = registry.get(name).unwrap().spec();
            let mut keys: Vec<_> = spec.parameters["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            keys.sort();
            assert_eq!(keys, props, "{name}");
            assert_eq!(
                spec.parameters["required"],
                serde_json::json!(required),
                "{name}"
            );
        }
    }

    /// The list offered per capability set is built once and its hash is the one a
    /// request's fingerprint computes from the list itself.
    #[test]
    fn offered_tools_are_built_once_per_set_with_the_fingerprints_hash() {
        let registry = ToolRegistry::builtin();
        let all = CapSet::read_only()
            .with(Capability::Write)
            .with(Capability::Exec)
            .with(Capability::Spawn);
        for caps in [CapSet::read_only(), all] {
            let first = registry.offered_to(&caps);
            assert!(Arc::ptr_eq(&first, &registry.offered_to(&caps)));
            assert!(Arc::ptr_eq(&first, &registry.clone().offered_to(&caps)));
            let fresh: Vec<ToolSpec> = registry
                .tools
                .iter()
                .filter(|t| caps.contains(t.capability()))
                .map(|t| t.spec())
                .collect();
            assert_eq!(*first.specs, *fresh);
            let request = crate::provider::CompletionRequest {
                agent: Default::default(),
                turn: 1,
                messages: vec![crate::provider::Message::user("fix it")],
                tools: fresh.into(),
                max_tokens: None,
                workspace: None,
                progress: None,
            };
            assert_eq!(
                crate::provider::replay::digest::digest_with(&request, first.hash),
                crate::provider::replay::digest(&request)
            );
        }
        assert_ne!(
            registry.offered_to(&CapSet::read_only()).hash,
            registry.offered_to(&all).hash
        );
    }

    #[test]
    fn specs_follow_capabilities() {
        let registry = ToolRegistry::builtin();
        let names = |caps: CapSet| -> Vec<String> {
            registry
                .specs_for(&caps)
                .into_iter()
                .map(|s| s.name)
                .collect()
        };
        assert_eq!(
            names(CapSet::read_only()),
            ["read_file", "list_dir", "grep", "finish"]
        );
        assert_eq!(
            names(CapSet::read_only().with(Capability::Exec)),
            ["read_file", "list_dir", "grep", "run_command", "finish"]
        );
        assert!(names(CapSet::EMPTY).is_empty());
        assert_eq!(registry.names().count(), 8);
    }
}
