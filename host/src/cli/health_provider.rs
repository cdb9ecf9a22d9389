//! `crewbox health --provider NAME`: asks a configured OpenAI-compatible server for
//! llama.cpp's `/props` and says what crewbox would run into: a chat template without
//! tool support (agents could never act), its context window and its slots.

use serde_json::{Value, json};

use crate::provider::config::ProviderConfig;
use crate::provider::props::{self, ServerProps};

/// How long the probe waits for the server.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the probe found.
pub(crate) struct ProviderHealth {
    /// The report as JSON.
    pub json: Value,
    /// The report as lines of text.
    pub lines: Vec<String>,
    /// Whether what it found stops agents from working (tools not rendered).
    pub failed: bool,
}

/// Probes provider `name` (configured as `cfg`).
pub(crate) async fn probe(
    name: &str,
    cfg: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> ProviderHealth {
    let ProviderConfig::Openai(c) = cfg else {
        return ProviderHealth {
            json: json!({"name": name, "probed": false,
                "note": "only OpenAI-compatible servers publish /props"}),
            lines: vec![format!(
                "provider {name}: not probed (only OpenAI-compatible servers publish /props)"
            )],
            failed: false,
        };
    };
    let url = props::url(&c.base_url);
    let key = c.api_key_env.as_deref().and_then(env).inspect(|k| {
        crate::redact::register(k);
    });
    let found = props::ask(&c.base_url, key.as_deref(), PROBE_TIMEOUT).await;
    let head = format!("provider {name} ({url})");
    match found {
        Err(e) => ProviderHealth {
            json: json!({"name": name, "props_url": url, "probed": true, "reachable": false,
                "error": e}),
            lines: vec![format!("{head}: not reachable: {e}")],
            failed: true,
        },
        Ok(None) => ProviderHealth {
            json: json!({"name": name, "props_url": url, "probed": true, "reachable": true,
                "props": null}),
            lines: vec![format!(
                "{head}: no llama.cpp /props (another server): tool support is checked on \
                 the first call (a prompt far smaller than the tool schemas fails the agent)"
            )],
            failed: false,
        },
        Ok(Some(p)) => found_props(name, &head, &url, c, &p),
    }
}

fn found_props(
    name: &str,
    head: &str,
    url: &str,
    c: &crate::provider::config::OpenaiConfig,
    p: &ServerProps,
) -> ProviderHealth {
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
    let failed = p.supports_tools == Some(false);
    lines.push(match p.supports_tools {
        Some(true) => "  tools: the chat template renders them".to_owned(),
        Some(false) => "  tools: NOT SUPPORTED by the chat template \
             (chat_template_caps.supports_tools = false): agents would get no tools. Start \
             llama-server with --jinja and a template that renders tools (--chat-template-file)"
            .to_owned(),
        None => "  tools: /props does not say (no chat_template_caps)".to_owned(),
    });
    if let Some(n) = p.n_ctx {
        let hint = match c.context_tokens {
            Some(set) if set <= n => format!("context_tokens = {set} fits"),
            Some(set) => format!("context_tokens = {set} is more than the server holds: set {n}"),
            None => format!("set context_tokens = {n} so compaction keeps requests inside it"),
        };
        lines.push(format!("  context: n_ctx = {n} tokens ({hint})"));
    }
    if let Some(slots) = p.total_slots {
        let hint = match c.max_concurrent {
            Some(m) if m as u64 <= slots => format!("max_concurrent = {m}"),
            _ => format!(
                "more calls at once wait without a response head: set max_concurrent = {slots}"
            ),
        };
        lines.push(format!("  slots: {slots} ({hint})"));
    }
    ProviderHealth {
        json: json!({"name": name, "props_url": url, "probed": true, "reachable": true,
            "props": p, "tools_supported": p.supports_tools}),
        lines,
        failed,
    }
}
