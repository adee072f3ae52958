//! Picking a backend: the explicit choice, the real backend's fleet cap and its emulator-only
//! hooks. Runs under either `MCR_ENVTEST`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use mcr_envtest::{Backend, Error, Fleet, TestCluster, real};

#[tokio::test]
async fn an_explicit_backend_wins_over_the_environment() {
    let fleet = Fleet::builder()
        .backend(Backend::Emulator)
        .clusters(2)
        .start()
        .await
        .unwrap();
    assert_eq!(fleet.backend(), Backend::Emulator);
    assert!(
        fleet
            .clusters()
            .iter()
            .all(|c| c.backend() == Backend::Emulator)
    );
}

#[tokio::test]
async fn a_real_fleet_over_the_cap_is_refused_before_anything_starts() {
    let err = Fleet::builder()
        .backend(Backend::Real)
        .clusters(real::MAX_FLEET + 1)
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::FleetTooLarge { requested, max } if requested == real::MAX_FLEET + 1 && max == real::MAX_FLEET),
        "{err}"
    );
    assert!(err.to_string().contains("require_emulator"), "{err}");
}

#[tokio::test]
async fn emulator_only_hooks_name_themselves_on_a_real_cluster() {
    let cluster = TestCluster::start("hooks").await.unwrap();
    assert_eq!(cluster.backend(), mcr_envtest::backend());
    let compact = catch_unwind(AssertUnwindSafe(|| cluster.compact()));
    let counters = catch_unwind(AssertUnwindSafe(|| cluster.request_count("get", "pods")));
    if cluster.backend() == Backend::Emulator {
        assert!(compact.is_ok() && counters.is_ok());
        return;
    }
    for (hook, result) in [("compact", compact.map(|_| 0)), ("request_count", counters)] {
        let panic = result.expect_err("an emulator-only hook must panic on a real cluster");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.contains(hook) && message.contains("emulator-only"),
            "{message}"
        );
    }
    // The hooks both backends offer still work.
    cluster.set_latency(None);
    cluster
        .client()
        .apiserver_version()
        .await
        .expect("a real cluster answers through its proxy");
}

#[tokio::test]
async fn an_admission_configuration_needs_the_real_backend() {
    // On the real backend the option starts a real control plane: mcr-webhook's
    // tests/auth.rs uses it there.
    if !mcr_envtest::require_emulator("checks the emulator's refusal of the option") {
        return;
    }
    let missing = std::path::Path::new("/nonexistent/admission.yaml");
    let Err(err) = TestCluster::start_with_admission_config("a", missing).await else {
        panic!("the emulator runs no admission plugins, yet a cluster started");
    };
    assert!(matches!(err, Error::RealOnly(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "an admission configuration needs a real control plane (MCR_ENVTEST=real)"
    );
}
