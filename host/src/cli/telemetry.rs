//! Traces over OpenTelemetry (OTLP), off by default: on when the standard environment names
//! an endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or the
//! config's `telemetry.otlp_endpoint` does, unless `OTEL_SDK_DISABLED=true`. Each `telemetry`
//! key stands for its variable, which wins when it is set. `OTEL_EXPORTER_OTLP_PROTOCOL` is
//! `http/protobuf` (the default) or `grpc` (`http/json` is refused with a warning, and tracing
//! stays off; gRPC's client runs on a one-thread runtime of its own, kept with the provider),
//! `OTEL_SERVICE_NAME` (default `skillhost`) and `OTEL_RESOURCE_ATTRIBUTES` describe the
//! process, `OTEL_TRACES_SAMPLER` / `_ARG` sample, `OTEL_BSP_*` tune the batch.
//!
//! The library's `tracing` spans (the turn, each LLM request, each tool call, each approval
//! wait) become OpenTelemetry spans through `tracing-opentelemetry`. Export is batched on the
//! SDK's own thread with a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048) that drops
//! rather than grows, so a slow or failing receiver never blocks a turn: [`Bounded`] keeps the
//! count of spans queued or being exported and drops (and counts, in
//! `skillhost_trace_spans_dropped_total`) a span that would go past the bound, so the SDK's
//! own queue never overflows uncounted; spans a receiver refused are counted there too.
//! [`Telemetry::shutdown`] flushes what finished before the process exits (SIGTERM included:
//! serving returns first).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter, SpanProcessor};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The tracer provider, while traces are on.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// The runtime of the gRPC client's connections (`grpc` only).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Telemetry {
    const OFF: Telemetry = Telemetry { provider: None, runtime: None };

    /// Exports what is left and stops the exporter (bounded by `OTEL_BSP_EXPORT_TIMEOUT`).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: traces: the last spans could not be exported: {e}");
        }
        if let Some(runtime) = self.runtime {
            runtime.shutdown_background();
        }
    }
}

/// The OTLP exporter over `protocol`, and the runtime it needs (gRPC).
fn exporter(
    grpc: bool,
    endpoint: Option<String>,
) -> Result<(opentelemetry_otlp::SpanExporter, Option<tokio::runtime::Runtime>), String> {
    if !grpc {
        let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary);
        if let Some(base) = endpoint {
            // The config's endpoint is a base, as OTEL_EXPORTER_OTLP_ENDPOINT is.
            builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
        }
        return builder.build().map(|e| (e, None)).map_err(|e| e.to_string());
    }
    // tonic's channel spawns its connections on the runtime it is made in; the batch thread
    // then only awaits their answers.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("skillhost-otlp")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the gRPC client's runtime: {e}"))?;
    let exporter = {
        let _inside = runtime.enter();
        let mut builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
        if let Some(base) = endpoint {
            builder = builder.with_endpoint(base);
        }
        builder.build().map_err(|e| e.to_string())?
    };
    Ok((exporter, Some(runtime)))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The OpenTelemetry layer the environment (or the config's `telemetry`) asks for, if any,
/// and its provider. Problems are warnings on stderr: tracing is an aid, never a reason not
/// to serve.
pub fn layer<S>(
    config: &skillhost::config::Telemetry,
) -> (Option<tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>>, Telemetry)
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let off = (None, Telemetry::OFF);
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return off;
    }
    let from_env = env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    if !from_env && config.otlp_endpoint.is_none() {
        return off;
    }
    let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .or_else(|| config.protocol.clone());
    let grpc = match protocol.as_deref() {
        None | Some("http/protobuf") => false,
        Some("grpc") => true,
        Some(other) => {
            eprintln!(
                "warning: traces are off: OTEL_EXPORTER_OTLP_PROTOCOL `{other}` is not supported by this build (use http/protobuf or grpc)"
            );
            return off;
        }
    };
    let endpoint = if from_env { None } else { config.otlp_endpoint.clone() };
    let (exporter, runtime) = match exporter(grpc, endpoint) {
        Ok(made) => made,
        Err(e) => {
            eprintln!("warning: traces are off: the OTLP exporter cannot start: {e}");
            return off;
        }
    };
    let mut resource = Resource::builder();
    // The config's attributes, but those the environment sets (which the builder read) win.
    let listed = env("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    let in_env: Vec<&str> = listed.split(',').filter_map(|pair| pair.split_once('=')).map(|(k, _)| k.trim()).collect();
    for (key, value) in config.resource_attributes.iter().filter(|(k, _)| !in_env.contains(&k.as_str())) {
        resource = resource.with_attribute(opentelemetry::KeyValue::new(key.clone(), value.clone()));
    }
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(config.service_name.clone().unwrap_or_else(|| "skillhost".into()));
    }
    let resource =
        resource.with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).build();
    let queued = Arc::new(AtomicUsize::new(0));
    let batch = BatchSpanProcessor::builder(Counted { inner: exporter, queued: queued.clone() }).build();
    let bounded = Bounded { inner: batch, queued, bound: queue_bound() };
    let mut provider = SdkTracerProvider::builder().with_span_processor(bounded).with_resource(resource);
    if let (None, Some(sampler)) = (env("OTEL_TRACES_SAMPLER"), config.sampler.as_deref()) {
        provider = provider.with_sampler(sampler_of(sampler, config.sampler_arg.unwrap_or(1.0)));
    }
    let provider = provider.build();
    let tracer = provider.tracer("skillhost");
    // W3C trace context in and out (the API's `traceparent`, the LLM requests').
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    (Some(tracing_opentelemetry::layer().with_tracer(tracer)), Telemetry { provider: Some(provider), runtime })
}

/// The SDK's queue size: `OTEL_BSP_MAX_QUEUE_SIZE`, as the SDK reads it, else its default.
fn queue_bound() -> usize {
    env("OTEL_BSP_MAX_QUEUE_SIZE").and_then(|v| v.trim().parse().ok()).unwrap_or(2048)
}

/// The batch processor, never given more spans than its queue holds: past `bound` spans
/// queued or being exported, a finished span is dropped here and counted.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    queued: Arc<AtomicUsize>,
    bound: usize,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.bound {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            skillhost::metrics::spans_dropped("queue_full", 1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting the spans it took off the queue and those the receiver refused.
#[derive(Debug)]
struct Counted {
    inner: opentelemetry_otlp::SpanExporter,
    queued: Arc<AtomicUsize>,
}

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        self.queued.fetch_sub(n, Ordering::AcqRel);
        if result.is_err() {
            skillhost::metrics::spans_dropped("export_failed", n as u64);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The sampler `telemetry.sampler` names (checked when the config loaded).
fn sampler_of(name: &str, ratio: f64) -> opentelemetry_sdk::trace::Sampler {
    use opentelemetry_sdk::trace::Sampler;
    match name {
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio),
        "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))),
        _ => Sampler::AlwaysOn,
    }
}
