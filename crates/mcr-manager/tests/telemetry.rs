//! OpenTelemetry export (feature `opentelemetry`): reconcile spans reach an OTLP/HTTP collector
//! with their cluster, controller, object and trace id. The collector is an HTTP server in this
//! test that decodes what the exporter sends as the OTLP protobuf messages.

mod common;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{
    Controller,
    telemetry::{Telemetry, TelemetryError},
};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse},
    common::v1::any_value::Value,
};
use prost::Message;
use tracing_subscriber::{filter::LevelFilter, layer::SubscriberExt, util::SubscriberInitExt};

/// A span as the collector received it: its name, trace id (hex) and string attributes.
#[derive(Debug, Clone)]
struct Received {
    name: String,
    trace_id: String,
    attributes: BTreeMap<String, String>,
}

/// Spans received so far, and the service names they came from.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
    services: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    /// Serves OTLP/HTTP on 127.0.0.1 until the test ends; returns the traces URL.
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let me = me.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let me = me.clone();
                        async move { me.export(req).await }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        format!("http://{addr}/v1/traces")
    }

    async fn export(&self, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
        let path_ok = req.uri().path() == "/v1/traces";
        let proto_ok = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v == "application/x-protobuf");
        let body = req.into_body().collect().await?.to_bytes();
        if !path_ok || !proto_ok {
            return Ok(Response::builder()
                .status(400)
                .body(Full::new(Bytes::from_static(
                    b"not an OTLP/HTTP protobuf export",
                )))
                .unwrap());
        }
        let Ok(export) = ExportTraceServiceRequest::decode(body) else {
            return Ok(Response::builder()
                .status(400)
                .body(Full::new(Bytes::from_static(b"undecodable")))
                .unwrap());
        };
        for resource_spans in export.resource_spans {
            let resource = resource_spans.resource.unwrap_or_default();
            for kv in resource.attributes {
                if kv.key == "service.name" {
                    self.services.lock().unwrap().push(text(kv.value));
                }
            }
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    let received = Received {
                        name: span.name,
                        trace_id: span.trace_id.iter().map(|b| format!("{b:02x}")).collect(),
                        attributes: span
                            .attributes
                            .into_iter()
                            .map(|kv| (kv.key, text(kv.value)))
                            .collect(),
                    };
                    self.spans.lock().unwrap().push(received);
                }
            }
        }
        let answer = ExportTraceServiceResponse::default().encode_to_vec();
        Ok(Response::builder()
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(Bytes::from(answer)))
            .unwrap())
    }

    /// The received reconcile spans of `cluster`.
    fn reconciles(&self, cluster: &str) -> Vec<Received> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| {
                s.name == "reconcile"
                    && s.attributes.get("cluster").map(String::as_str) == Some(cluster)
            })
            .cloned()
            .collect()
    }
}

fn text(value: Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value) {
        Some(Value::StringValue(s)) => s,
        other => format!("{other:?}"),
    }
}

/// Exports this thread's spans through `telemetry`'s layer, and writes its log lines into the
/// returned `Logs`, until the guard drops. The tests run on current-thread runtimes, so every
/// task of theirs (the manager's reconciles included) runs on this thread; each test has its
/// own exporter.
fn install(telemetry: &Telemetry) -> (Logs, tracing::subscriber::DefaultGuard) {
    let logs = Logs::default();
    let writer = logs.clone();
    let guard = tracing_subscriber::registry()
        .with(LevelFilter::INFO)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || writer.clone()),
        )
        .with(telemetry.layer())
        .set_default();
    (logs, guard)
}

/// Like the common `record`, and logs a line inside the reconcile span.
async fn record_and_log(cm: Arc<ConfigMap>, ctx: mcr_manager::Context<Log>) -> Res {
    tracing::info!("reconciled in the test");
    record(cm, ctx).await
}

#[tokio::test]
async fn every_reconcile_span_reaches_the_collector_with_its_cluster() {
    let collector = Collector::default();
    let url = collector.start().await;
    let telemetry = Telemetry::builder("mcr-telemetry-test")
        .endpoint(url)
        .build()
        .unwrap();
    let (logs, _guard) = install(&telemetry);

    let env = Env::start(3).await;
    for c in env.fleet.clusters() {
        create_cm(c.client(), &format!("cm-of-{}", c.name()), "1").await;
    }
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record_and_log, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    let names: Vec<String> = env.fleet.names().iter().map(|n| n.to_string()).collect();
    assert_eq!(names.len(), 3);
    // The batch goes out every few seconds: wait until each cluster's reconcile has arrived.
    eventually(
        "a reconcile span of every member at the collector",
        DEADLINE,
        || names.iter().all(|n| !collector.reconciles(n).is_empty()),
    )
    .await;

    for name in &names {
        let spans = collector.reconciles(name);
        let span = spans
            .iter()
            .find(|s| {
                s.attributes
                    .get("object")
                    .is_some_and(|o| o.contains(&format!("cm-of-{name}")))
            })
            .unwrap_or_else(|| panic!("{name}: no reconcile span of its ConfigMap in {spans:#?}"));
        assert_eq!(
            span.attributes.get("controller").map(String::as_str),
            Some("configmap"),
            "{span:?}"
        );
        // The id recorded on the span (and so in its log lines) is the trace's own id.
        assert_eq!(
            span.attributes.get("trace_id"),
            Some(&span.trace_id),
            "{span:?}"
        );
        assert_eq!(span.trace_id.len(), 32, "{span:?}");
        assert_ne!(span.trace_id, "0".repeat(32), "{span:?}");
        // A log line of the reconcile shows that id: the join from logs to traces.
        let text = logs.text();
        let line = format!("trace_id={}", span.trace_id);
        assert!(
            text.lines()
                .any(|l| l.contains("reconciled in the test") && l.contains(&line)),
            "{name}: no log line with {line}:\n{text}"
        );
    }
    // No reconcile span without a cluster: each one named the cluster it ran in.
    let spans = collector.spans.lock().unwrap().clone();
    let reconciles: Vec<_> = spans.iter().filter(|s| s.name == "reconcile").collect();
    assert!(
        reconciles
            .iter()
            .all(|s| s.attributes.contains_key("cluster")),
        "{reconciles:#?}"
    );
    assert!(
        collector
            .services
            .lock()
            .unwrap()
            .iter()
            .all(|s| s == "mcr-telemetry-test"),
        "{:?}",
        collector.services.lock().unwrap()
    );

    env.token.cancel();
    run.await.unwrap().unwrap();
    // A span that ends now is only batched; shutdown sends it.
    tracing::info_span!("after-the-run", cluster = "cluster-0").in_scope(|| {});
    telemetry.shutdown().await.unwrap();
    assert!(
        collector
            .spans
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.name == "after-the-run"),
        "shutdown did not flush the last batch"
    );
}

#[tokio::test]
async fn a_collector_that_never_answers_stops_no_reconcile() {
    // Accepts connections and never answers: every export waits for its timeout.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let hold = held.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            hold.lock().unwrap().push(stream);
        }
    });
    let telemetry = Telemetry::builder("mcr-telemetry-test")
        .endpoint(url)
        // Longer than the test: the export started below hangs for all of it.
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .unwrap();
    let (_logs, _guard) = install(&telemetry);

    let env = Env::start(2).await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    // One change after another in every member. The first round's spans go out in the first
    // batch a few seconds later, whose export then hangs; the later rounds are reconciled
    // while it does.
    for round in 1..=3 {
        for c in env.fleet.clusters() {
            let value = round.to_string();
            if round == 1 {
                create_cm(c.client(), "x", &value).await;
            } else {
                update_cm(c.client(), "x", &value).await;
            }
        }
        eventually("every member reconciled this round", DEADLINE, || {
            env.fleet
                .names()
                .iter()
                .all(|n| log.contains(&format!("{n}/x={round}")))
        })
        .await;
        if round == 1 {
            eventually("the exporter connected", DEADLINE, || {
                !held.lock().unwrap().is_empty()
            })
            .await;
        }
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
    // Shutting down waits for the hung export no longer than its own bound, and says so.
    let shut = tokio::time::timeout(DEADLINE, telemetry.shutdown()).await;
    let err = shut.expect("shutdown returned").unwrap_err();
    assert!(matches!(err, TelemetryError::Shutdown(_)), "{err:?}");
}

#[test]
fn building_off_a_runtime_is_a_clear_error() {
    let err = Telemetry::builder("x").build().unwrap_err();
    assert!(matches!(err, TelemetryError::NoRuntime(_)), "{err:?}");
    assert!(err.to_string().contains("Tokio runtime"), "{err}");
}

#[tokio::test]
async fn debug_output_shows_no_credential() {
    let builder = Telemetry::builder("svc")
        .endpoint("https://otel-user:s3cret-pass@collector.example:4318/v1/traces?token=s3cret-q");
    let shown = format!("{builder:?}");
    assert!(
        shown.contains("https://collector.example:4318/v1/traces"),
        "{shown}"
    );
    let telemetry = builder.build().unwrap();
    let shown = format!("{shown} {telemetry:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(!shown.contains("otel-user"), "{shown}");
    telemetry.shutdown().await.unwrap();
}
