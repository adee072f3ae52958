//! A reconcile error that carries a credential command's output (kube's `AuthExecRun` holds
//! the command line, its stdout and stderr) never reaches the log as it is: the manager logs
//! reconcile errors through `mcr_core::ErrorChain`, which redacts kube errors.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::Duration;

use common::{DEADLINE, Env, Logs, create_cm, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::client::AuthError;
use kube::runtime::controller::Action;
use mcr_manager::Controller;

const PLANTED: &str = "planted-secret-7f3a";

/// What a token refresh through a failing credential command returns inside kube.
fn auth_exec_run() -> kube::Error {
    kube::Error::Auth(AuthError::AuthExecRun {
        cmd: format!("/usr/bin/plugin --password {PLANTED}"),
        out: Box::new(std::process::Output {
            status: std::process::ExitStatus::from_raw(1 << 8),
            stdout: format!(r#"{{"token": "{PLANTED}"}}"#).into_bytes(),
            stderr: format!("bad password {PLANTED}").into_bytes(),
        }),
    })
}

/// The reconciler's own error type, wrapping the kube error as a source.
#[derive(Debug, thiserror::Error)]
#[error("updating the member failed")]
struct ReconcileError(#[source] kube::Error);

#[tokio::test]
async fn reconcile_errors_are_logged_redacted() {
    let logs = Logs::install("debug");
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "cm", "1").await;
    // Both shapes: the reconciler's error wrapping kube's, and kube's error itself.
    Controller::new(&env.mgr)
        .named("wrapped")
        .for_::<ConfigMap>()
        .register(
            |_: Arc<ConfigMap>, _: mcr_manager::Context<()>| async move {
                Err::<Action, _>(ReconcileError(auth_exec_run()))
            },
            |_, _: &ReconcileError, _| Action::requeue(Duration::from_secs(3600)),
            Arc::new(()),
        )
        .unwrap();
    Controller::new(&env.mgr)
        .named("bare")
        .for_::<ConfigMap>()
        .register(
            |_: Arc<ConfigMap>, _: mcr_manager::Context<()>| async move {
                Err::<Action, _>(auth_exec_run())
            },
            |_, _: &kube::Error, _| Action::requeue(Duration::from_secs(3600)),
            Arc::new(()),
        )
        .unwrap();
    let run = env.run();
    eventually("every controller's failure logged", DEADLINE, || {
        let text = logs.text();
        ["wrapped", "bare"].iter().all(|c| {
            text.lines()
                .any(|l| l.contains("reconcile failed") && l.contains(&format!("controller={c}")))
        })
    })
    .await;
    let text = logs.text();
    assert!(
        text.contains("the credential command failed"),
        "the redacted reason is logged: {text}"
    );
    assert!(!text.contains(PLANTED), "{text}");
    env.token.cancel();
    run.await.unwrap().unwrap();
}
