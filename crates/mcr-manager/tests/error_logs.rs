//! A failed reconcile is logged once: one WARN line naming the controller, the cluster and
//! the object, with the API server's answer summarised (code, reason, message: once), whatever
//! the reconciler's error type shows of it. A kube error shown inside the reconciler's own
//! message is summarised, and redacted, there too.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::Duration;

use common::{DEADLINE, Env, Logs, create_cm, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{Patch, PatchParams},
    client::AuthError,
    runtime::controller::Action,
};
use mcr_manager::{Context, Controller, WatchOptions};

/// A reconciler's error as users write it: kube's error shown in its own message and kept as
/// its source.
#[derive(Debug, thiserror::Error)]
enum SummaryError {
    #[error("summary not written: {0}")]
    Write(#[from] kube::Error),
}

/// Patches a ConfigMap that does not exist: the API server answers 404.
async fn write_missing(ctx: Context<()>) -> Result<Action, SummaryError> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client(), "default");
    let patch = serde_json::json!({"data": {"a": "b"}});
    api.patch("missing", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(Action::await_change())
}

#[tokio::test]
async fn a_failed_reconcile_is_one_short_warn_line() {
    let (logs, _guard) = Logs::scoped("warn");
    let env = Env::start(1).await;
    let member = env.fleet.names()[0].clone();
    create_cm(env.member(&member).client(), "trigger", "1").await;
    Controller::new(&env.mgr)
        .named("summary")
        .for_with::<ConfigMap>(WatchOptions::new().fields("metadata.name=trigger"))
        .register(
            |_: Arc<ConfigMap>, ctx: Context<()>| write_missing(ctx),
            // No retry: exactly one failure.
            |_, _: &SummaryError, _| Action::await_change(),
            Arc::new(()),
        )
        .unwrap();
    let run = env.run();
    let failed = |text: &str| {
        text.lines()
            .filter(|l| l.contains("reconcile failed"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    eventually("the failure logged", DEADLINE, || {
        !failed(&logs.text()).is_empty()
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();

    let text = logs.text();
    let lines = failed(&text);
    assert_eq!(lines.len(), 1, "one line per failed reconcile: {text}");
    let line = &lines[0];
    assert!(line.contains(" WARN "), "{line}");
    assert!(line.contains("controller=summary"), "{line}");
    assert!(line.contains(&format!("cluster={member}")), "{line}");
    assert!(line.contains("trigger"), "the object: {line}");
    assert!(line.contains("summary not written"), "{line}");
    assert!(line.contains("404 NotFound"), "code and reason: {line}");
    assert_eq!(
        line.matches("configmaps \\\"missing\\\" not found").count()
            + line.matches("configmaps \"missing\" not found").count(),
        1,
        "the API server's message once: {line}"
    );
    assert!(!line.contains("Status {"), "no dump of the Status: {line}");
    assert!(line.len() < 400, "{} bytes: {line}", line.len());
    // Nothing else at WARN about this reconcile.
    assert_eq!(
        text.lines().filter(|l| l.contains(" WARN ")).count(),
        1,
        "{text}"
    );
}

const PLANTED: &str = "planted-secret-9c1e";

/// A credential command's failure, shown inside the reconciler's own message, is redacted.
#[tokio::test]
async fn a_kube_error_shown_in_the_reconcilers_message_is_redacted() {
    let (logs, _guard) = Logs::scoped("warn");
    let env = Env::start(1).await;
    let member = env.fleet.names()[0].clone();
    create_cm(env.member(&member).client(), "trigger", "1").await;
    Controller::new(&env.mgr)
        .named("shown")
        .for_with::<ConfigMap>(WatchOptions::new().fields("metadata.name=trigger"))
        .register(
            |_: Arc<ConfigMap>, _: Context<()>| async move {
                let err = kube::Error::Auth(AuthError::AuthExecRun {
                    cmd: format!("/usr/bin/plugin --password {PLANTED}"),
                    out: Box::new(std::process::Output {
                        status: std::process::ExitStatus::from_raw(1 << 8),
                        stdout: format!(r#"{{"token": "{PLANTED}"}}"#).into_bytes(),
                        stderr: format!("bad password {PLANTED}").into_bytes(),
                    }),
                });
                Err::<Action, _>(SummaryError::from(err))
            },
            |_, _: &SummaryError, _| Action::requeue(Duration::from_secs(3600)),
            Arc::new(()),
        )
        .unwrap();
    let run = env.run();
    eventually("the failure logged", DEADLINE, || {
        logs.text().contains("reconcile failed")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    let text = logs.text();
    assert!(text.contains("the credential command failed"), "{text}");
    assert!(!text.contains(PLANTED), "{text}");
}
