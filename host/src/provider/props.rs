//! llama.cpp's `GET /props`: the context window (`default_generation_settings.n_ctx`),
//! whether its chat template renders tools (`chat_template_caps.supports_tools`), the
//! model and the number of slots. Read by `crewbox health --provider NAME` and, when a
//! server seems to have dropped the tools, to name why.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::http;

/// Most bytes of a `/props` reply read (its chat template can be long).
const MAX_PROPS_BYTES: usize = 1024 * 1024;

/// What a server's `/props` says (the fields crewbox uses).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerProps {
    /// The context window of a slot, in tokens.
    pub n_ctx: Option<u64>,
    /// Whether the chat template renders tools.
    pub supports_tools: Option<bool>,
    /// The model (alias or path).
    pub model: Option<String>,
    /// Parallel slots: more requests than this wait without a response head.
    pub total_slots: Option<u64>,
    /// The server's build.
    pub build: Option<String>,
}

impl ServerProps {
    /// Reads a `/props` body; `None` when it is not one (no field crewbox knows).
    pub fn parse(body: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(body).ok()?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let p = Self {
            n_ctx: v
                .pointer("/default_generation_settings/n_ctx")
                .or_else(|| v.get("n_ctx"))
                .and_then(Value::as_u64),
            supports_tools: v
                .pointer("/chat_template_caps/supports_tools")
                .and_then(Value::as_bool),
            model: text(v.get("model_alias")).or_else(|| text(v.get("model_path"))),
            total_slots: v.get("total_slots").and_then(Value::as_u64),
            build: text(v.get("build_info")),
        };
        (p != Self::default()).then_some(p)
    }
}

/// Where a server whose API is at `base_url` (`…/v1`) publishes `/props`.
pub fn url(base_url: &str) -> String {
    let root = base_url.trim_end_matches('/');
    let root = root.strip_suffix("/v1").unwrap_or(root);
    format!("{root}/props")
}

/// Asks the server at `base_url` for its `/props`: `Ok(None)` when it has none (not
/// llama.cpp), `Err` naming why it could not be asked.
pub async fn probe(
    client: &reqwest::Client,
    base_url: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<Option<ServerProps>, String> {
    let mut request = client.get(url(base_url)).timeout(timeout);
    if let Some(key) = api_key {
        request = request.bearer_auth(key);
    }
    let response = request
        .send()
        .await
        .map_err(|e| http::transport_error(&e).to_string())?;
    if !response.status().is_success() {
        return Ok(None);
    }
    let bytes = response
        .bytes()
        .await
        .map_err(|e| http::transport_error(&e).to_string())?;
    let body = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_PROPS_BYTES)]);
    Ok(ServerProps::parse(&body))
}

/// [`probe`] with a client of its own (`crewbox health --provider`).
pub async fn ask(
    base_url: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<Option<ServerProps>, String> {
    let client = crate::tls::client_builder()
        .user_agent(concat!("crewbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    probe(&client, base_url, api_key, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_beside_the_api() {
        assert_eq!(url("http://h:8080/v1/"), "http://h:8080/props");
        assert_eq!(url("http://h:8080"), "http://h:8080/props");
    }

    #[test]
    fn props_fields_are_read_and_other_json_is_none() {
        let p = ServerProps::parse(
            r#"{"default_generation_settings":{"n_ctx":4096},"total_slots":1,
                "model_alias":"m.gguf","chat_template_caps":{"supports_tools":false}}"#,
        )
        .unwrap();
        assert_eq!(p.n_ctx, Some(4096));
        assert_eq!(p.supports_tools, Some(false));
        assert_eq!(p.model.as_deref(), Some("m.gguf"));
        assert_eq!(ServerProps::parse(r#"{"error":"not found"}"#), None);
        assert_eq!(ServerProps::parse("<html>"), None);
    }
}
