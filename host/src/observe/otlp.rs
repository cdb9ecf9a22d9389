//! OTLP/HTTP (protobuf) export of crewbox's spans (feature `otlp`). Spans are batched
//! on the SDK's own thread with a blocking HTTP client, so a slow or absent collector
//! never holds up the run; at exit [`flush`] waits a bounded time and gives up.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

use super::telemetry::OtlpTarget;

/// One export request's limit (connect, send, answer).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long exit waits for the last spans to go out.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The provider spans go through, once export is set up (flushed at exit).
static PROVIDER: OnceLock<(SdkTracerProvider, String)> = OnceLock::new();

/// Why export could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up OTLP export to {endpoint}: {reason}")]
pub struct OtlpError {
    endpoint: String,
    reason: String,
}

/// The layer exporting crewbox's own spans (`run`, `agent`, `turn`, `tool`) to
/// `target`. Events (log lines) are not exported: their text is free-form; spans carry
/// only ids, names, counts and statuses (see `observe::spans`).
pub fn layer<S>(target: &OtlpTarget) -> Result<Box<dyn Layer<S> + Send + Sync>, OtlpError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let shown = crate::redact::clean_owned(target.traces_endpoint.clone());
    let fail = |reason: String| OtlpError {
        endpoint: shown.clone(),
        reason,
    };
    for (_, value) in &target.headers {
        crate::redact::register(value);
    }
    let headers: HashMap<String, String> = target.headers.iter().cloned().collect();
    // The exporter builds its own reqwest client, on the process's rustls provider.
    crate::tls::install();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(target.traces_endpoint.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .with_headers(headers)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(target.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("crewbox");
    if PROVIDER.set((provider, shown.clone())).is_err() {
        return Err(fail("export is already set up".into()));
    }
    let ours = filter_fn(|meta| meta.is_span() && meta.target().starts_with("crewbox"));
    Ok(tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false)
        .with_filter(ours)
        .boxed())
}

/// The W3C `traceparent` of `span`, when export is set up and the span is sampled
/// into a trace (written by the SDK's W3C propagator).
pub(crate) fn traceparent(span: &tracing::Span) -> Option<String> {
    use opentelemetry::propagation::TextMapPropagator as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    PROVIDER.get()?;
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Makes `span` a child of the remote span `traceparent` names (checked on the wire:
/// see `remote::task::is_traceparent`; read by the SDK's W3C propagator).
pub(crate) fn follow(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if PROVIDER.get().is_none() {
        return;
    }
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    let remote = TraceContextPropagator::new().extract(&carrier);
    if !remote.span().span_context().is_valid() {
        return;
    }
    if let Err(e) = span.set_parent(remote) {
        tracing::debug!(error = %e, "a task's trace context was not taken");
    }
}

/// The W3C header (and carrier key) of a span's trace context.
const TRACEPARENT: &str = "traceparent";

/// Sends the spans still buffered and stops export, waiting at most a few seconds
/// (a collector that is down never keeps the CLI from exiting).
pub fn flush() {
    if let Some((provider, endpoint)) = PROVIDER.get()
        && let Err(e) = provider.shutdown_with_timeout(FLUSH_TIMEOUT)
    {
        let e = crate::redact::clean_owned(e.to_string());
        crate::text::errln!(
            "crewbox: telemetry: the last spans may not have reached {endpoint}: {e}"
        );
    }
}
