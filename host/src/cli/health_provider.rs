//! `crewbox health --provider NAME`: what a configured OpenAI-compatible server's
//! llama.cpp `/props` says ([`crewbox::Repository::probe_provider`]), rendered: a chat
//! template without tool support (agents could never act), its context window and its
//! slots.

use serde_json::{Value, json};

use crewbox::types::{ProbeOutcome, ProviderProbe, ServerProps};

/// What the probe found, rendered.
pub(crate) struct ProviderHealth {
    /// The report as JSON.
    pub json: Value,
    /// The report as lines of text.
    pub lines: Vec<String>,
    /// Whether what it found stops agents from working (unreachable, tools not rendered).
    pub failed: bool,
}

/// Renders what the probe of one provider found.
pub(crate) fn render(probe: &ProviderProbe) -> ProviderHealth {
    let name = &probe.name;
    let failed = probe.stops_agents();
    match &probe.outcome {
        ProbeOutcome::NotProbed => ProviderHealth {
            json: json!({"name": name, "probed": false,
                "note": "only OpenAI-compatible servers publish /props"}),
            lines: vec![format!(
                "provider {name}: not probed (only OpenAI-compatible servers publish /props)"
            )],
            failed,
        },
        ProbeOutcome::Unreachable { props_url, error } => ProviderHealth {
            json: json!({"name": name, "props_url": props_url, "probed": true,
                "reachable": false, "error": error}),
            lines: vec![format!(
                "provider {name} ({props_url}): not reachable: {error}"
            )],
            failed,
        },
        ProbeOutcome::NoProps { props_url } => ProviderHealth {
            json: json!({"name": name, "props_url": props_url, "probed": true,
                "reachable": true, "props": null}),
            lines: vec![format!(
                "provider {name} ({props_url}): no llama.cpp /props (another server): tool \
                 support is checked on the first call (a prompt far smaller than the tool \
                 schemas fails the agent)"
            )],
            failed,
        },
        ProbeOutcome::Props {
            props_url,
            props,
            context_tokens,
            max_concurrent,
        } => ProviderHealth {
            json: json!({"name": name, "props_url": props_url, "probed": true,
                "reachable": true, "props": props, "tools_supported": props.supports_tools}),
            lines: props_lines(
                &format!("provider {name} ({props_url})"),
                props,
                *context_tokens,
                *max_concurrent,
            ),
            failed,
        },
    }
}

/// What llama.cpp's `/props` says, line by line, with the setting to change when the
/// provider's does not match.
fn props_lines(
    head: &str,
    p: &ServerProps,
    context_tokens: Option<u64>,
    max_concurrent: Option<usize>,
) -> Vec<String> {
    let mut lines = vec![format!(
        "{head}: llama.cpp{}{}",
        p.build
            .as_deref()
            .map(|b| format!(" {b}"))
            .unwrap_or_default(),
        p.model
            .as_deref()
            .map(|m| format!(", model {m}"))
            .unwrap_or_default()
    )];
    lines.push(match p.supports_tools {
        Some(true) => "  tools: the chat template renders them".to_owned(),
        Some(false) => "  tools: NOT SUPPORTED by the chat template \
             (chat_template_caps.supports_tools = false): agents would get no tools. Start \
             llama-server with --jinja and a template that renders tools (--chat-template-file)"
            .to_owned(),
        None => "  tools: /props does not say (no chat_template_caps)".to_owned(),
    });
    if let Some(n) = p.n_ctx {
        let hint = match context_tokens {
            Some(set) if set <= n => format!("context_tokens = {set} fits"),
            Some(set) => format!("context_tokens = {set} is more than the server holds: set {n}"),
            None => format!("set context_tokens = {n} so compaction keeps requests inside it"),
        };
        lines.push(format!("  context: n_ctx = {n} tokens ({hint})"));
    }
    if let Some(slots) = p.total_slots {
        let hint = match max_concurrent {
            Some(m) if m as u64 <= slots => format!("max_concurrent = {m}"),
            _ => format!(
                "more calls at once wait without a response head: set max_concurrent = {slots}"
            ),
        };
        lines.push(format!("  slots: {slots} ({hint})"));
    }
    lines
}
