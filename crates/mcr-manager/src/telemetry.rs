//! OpenTelemetry traces: mcr's `tracing` spans exported over OTLP (feature `opentelemetry`).
//!
//! [`Telemetry`] builds an OTLP/HTTP (protobuf) span exporter and hands out a
//! `tracing_subscriber` [layer](Telemetry::layer) to add to your subscriber, beside the `fmt`
//! layer. Every span then reaches the collector; mcr's `reconcile` span carries, as attributes,
//! the `cluster` it ran in, the `controller`, the `object` and its own `trace_id`, the same id
//! the collector files the trace under, so a log line of a reconcile (which shows the span's
//! fields) can be joined to its trace. [`trace_id`] gives the current span's id to your own
//! code.
//!
//! Where spans go: the endpoint given to [`TelemetryBuilder::endpoint`], else the standard
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (the `/v1/traces`
//! path is added to the latter), else `http://localhost:4318/v1/traces`. `http://` and
//! `https://` (system roots) both work; `OTEL_EXPORTER_OTLP_HEADERS` is sent as is. Spans are
//! batched and sent from a thread of their own, each request on the Tokio runtime that built
//! the exporter and bounded by [`TelemetryBuilder::timeout`]; a collector that is down loses
//! spans, never stalls a reconcile.
//!
//! Flush on shutdown with [`Telemetry::shutdown`]: spans still in the batch are lost
//! otherwise.
//!
//! ```no_run
//! use tracing_subscriber::{EnvFilter, layer::SubscriberExt, util::SubscriberInitExt};
//! use mcr_manager::telemetry::Telemetry;
//!
//! # async fn run(mgr: mcr_manager::Manager) -> Result<(), Box<dyn std::error::Error>> {
//! let telemetry = Telemetry::builder("my-operator").build()?;
//! tracing_subscriber::registry()
//!     .with(EnvFilter::new("info"))
//!     .with(tracing_subscriber::fmt::layer())
//!     .with(telemetry.layer())
//!     .init();
//! let ran = mgr.run().await;
//! telemetry.shutdown().await?; // sends what is still batched
//! ran?;
//! # Ok(())
//! # }
//! ```

use std::{fmt, sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::{
    Resource,
    trace::{SdkTracer, SdkTracerProvider},
};
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};

/// How long an export request may take when [`TelemetryBuilder::timeout`] is not called.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`Telemetry::shutdown`] waits for the last batch to be sent.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest response body read from the collector (its answer to an export is small).
const MAX_RESPONSE: usize = 64 * 1024;

/// Why the exporter could not be built or shut down.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// Not called on a Tokio runtime: the exporter sends its requests on the runtime it was
    /// built on.
    #[error("the OTLP exporter must be built on a Tokio runtime")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
    /// The system's root certificates (for `https://` endpoints) could not be read.
    #[error("reading the system root certificates for the OTLP exporter")]
    Roots(#[source] std::io::Error),
    /// The exporter rejected its configuration (an endpoint that is not a URL, say).
    #[error("building the OTLP span exporter")]
    Build(#[source] opentelemetry_otlp::ExporterBuildError),
    /// Flushing or stopping the exporter failed (the collector did not answer in time, say).
    #[error("shutting the OTLP span exporter down")]
    Shutdown(#[source] opentelemetry_sdk::error::OTelSdkError),
}

/// Settings of a [`Telemetry`]; made by [`Telemetry::builder`]. Its `Debug` output shows the
/// endpoint's scheme, host, port and path only: never user info, nor the query.
#[derive(Clone)]
pub struct TelemetryBuilder {
    service_name: String,
    endpoint: Option<String>,
    timeout: Duration,
}

impl fmt::Debug for TelemetryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let endpoint = self
            .endpoint
            .as_deref()
            .map(|url| match url.parse::<http::Uri>() {
                Ok(uri) => format!(
                    "{}://{}{}{}",
                    uri.scheme_str().unwrap_or(""),
                    uri.host().unwrap_or(""),
                    uri.port().map(|p| format!(":{p}")).unwrap_or_default(),
                    uri.path(),
                ),
                Err(_) => "<not a URL>".to_owned(),
            });
        f.debug_struct("TelemetryBuilder")
            .field("service_name", &self.service_name)
            .field("endpoint", &endpoint)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl TelemetryBuilder {
    /// Sends spans to this URL (the whole URL, `/v1/traces` included) instead of the one the
    /// `OTEL_EXPORTER_OTLP_*ENDPOINT` variables give.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// Bounds each export request (connecting, sending, reading the answer); 10 s by default.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Builds the exporter and its batching span processor. Call it on the Tokio runtime the
    /// requests should run on.
    pub fn build(self) -> Result<Telemetry, TelemetryError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(TelemetryError::NoRuntime)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(Arc::new(rustls::crypto::ring::default_provider()))
            .map_err(TelemetryError::Roots)?
            .https_or_http()
            .enable_http1()
            .build();
        let client = OtlpClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            runtime,
            timeout: self.timeout,
        };
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client)
            .with_timeout(self.timeout);
        if let Some(url) = self.endpoint {
            exporter = exporter.with_endpoint(url);
        }
        let exporter = exporter.build().map_err(TelemetryError::Build)?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name(self.service_name)
                    .build(),
            )
            .build();
        Ok(Telemetry { provider })
    }
}

/// An OTLP span exporter and the `tracing` layer that feeds it. See the [module](self).
///
/// Its `Debug` output shows nothing of the exporter's settings, whose headers
/// (`OTEL_EXPORTER_OTLP_HEADERS`) often hold a credential.
#[derive(Clone)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Starts the settings of an exporter whose spans name `service_name` as their service.
    pub fn builder(service_name: impl Into<String>) -> TelemetryBuilder {
        TelemetryBuilder {
            service_name: service_name.into(),
            endpoint: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A layer that exports every span it sees; add it to a `tracing_subscriber` registry.
    pub fn layer<S>(&self) -> OpenTelemetryLayer<S, SdkTracer>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("mcr"))
    }

    /// Sends the spans still batched and stops the exporter, waiting at most
    /// [`SHUTDOWN_TIMEOUT`]. Spans that end afterwards are dropped.
    pub async fn shutdown(self) -> Result<(), TelemetryError> {
        // The SDK blocks while the batch thread sends, and that thread's requests run on this
        // runtime: blocking one of its workers could starve them (always, on a current-thread
        // runtime), so the wait happens on the blocking pool.
        let provider = self.provider;
        let done =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT))
                .await;
        match done {
            Ok(result) => result.map_err(TelemetryError::Shutdown),
            // Only a panic in the SDK gets here; it is the SDK's, so it goes on unwinding.
            Err(joined) => std::panic::resume_unwind(joined.into_panic()),
        }
    }
}

/// The trace id of the current span as 32 hex digits, or `None` when the span is not exported
/// (no [`Telemetry::layer`] in the subscriber, or no span).
pub fn trace_id() -> Option<String> {
    span_trace_id(&tracing::Span::current())
}

fn span_trace_id(span: &tracing::Span) -> Option<String> {
    let id = span.context().span().span_context().trace_id();
    (id != opentelemetry::trace::TraceId::INVALID).then(|| id.to_string())
}

/// Records the span's own trace id in its `trace_id` field, when it is exported.
pub(crate) fn record_trace_id(span: &tracing::Span) {
    if let Some(id) = span_trace_id(span) {
        span.record("trace_id", tracing::field::display(id));
    }
}

/// The exporter's HTTP client: hyper on the runtime that built it. The SDK calls it from its
/// batch thread, which has no runtime, so each request is spawned onto that runtime.
struct OtlpClient {
    client: Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl fmt::Debug for OtlpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpClient")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let timeout = self.timeout;
        let sent = self.runtime.spawn(async move {
            let exchange = async {
                let response = client.request(request.map(Full::new)).await?;
                let (parts, body) = response.into_parts();
                let body = Limited::new(body, MAX_RESPONSE).collect().await?.to_bytes();
                Ok::<_, HttpError>(Response::from_parts(parts, body))
            };
            match tokio::time::timeout(timeout, exchange).await {
                Ok(result) => result,
                Err(_) => {
                    Err(format!("no answer from the OTLP endpoint within {timeout:?}").into())
                }
            }
        });
        sent.await?
    }
}
