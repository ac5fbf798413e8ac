//! Traces over OpenTelemetry (OTLP), off by default: on when the standard environment names
//! an endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless
//! `OTEL_SDK_DISABLED=true`. `OTEL_EXPORTER_OTLP_PROTOCOL` is `http/protobuf` (the default;
//! `grpc` and `http/json` are refused with a warning, and tracing stays off),
//! `OTEL_SERVICE_NAME` (default `skillhost`) and `OTEL_RESOURCE_ATTRIBUTES` describe the
//! process, `OTEL_TRACES_SAMPLER` / `_ARG` sample, `OTEL_BSP_*` tune the batch.
//!
//! The library's `tracing` spans (the turn, each LLM request, each tool call, each approval
//! wait) become OpenTelemetry spans through `tracing-opentelemetry`. Export is batched on the
//! SDK's own thread with a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048) that drops
//! rather than grows, so a slow or failing receiver never blocks a turn; [`Telemetry::shutdown`]
//! flushes what finished before the process exits (SIGTERM included: serving returns first).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The tracer provider, while traces are on.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports what is left and stops the exporter (bounded by `OTEL_BSP_EXPORT_TIMEOUT`).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: traces: the last spans could not be exported: {e}");
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The OpenTelemetry layer the environment asks for, if any, and its provider. Problems are
/// warnings on stderr: tracing is an aid, never a reason not to serve.
pub fn layer<S>() -> (Option<tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>>, Telemetry)
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let off = (None, Telemetry { provider: None });
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return off;
    }
    if env("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() {
        return off;
    }
    let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match protocol.as_deref() {
        None | Some("http/protobuf") => {}
        Some(other) => {
            eprintln!(
                "warning: traces are off: OTEL_EXPORTER_OTLP_PROTOCOL `{other}` is not supported by this build (use http/protobuf)"
            );
            return off;
        }
    }
    let exporter =
        match opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary).build() {
            Ok(exporter) => exporter,
            Err(e) => {
                eprintln!("warning: traces are off: the OTLP exporter cannot start: {e}");
                return off;
            }
        };
    let mut resource = Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("skillhost");
    }
    let resource =
        resource.with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).build();
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
    let tracer = provider.tracer("skillhost");
    // W3C trace context in and out (the API's `traceparent`, the LLM requests').
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    (Some(tracing_opentelemetry::layer().with_tracer(tracer)), Telemetry { provider: Some(provider) })
}
