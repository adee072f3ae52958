//! Two provider instances split one management cluster, as in Cluster API's
//! multiple-instances proposal: `List[a, b]` and `AllExcept[a, b]`. Every cluster is engaged by
//! exactly one of them, also clusters created while both run, and the `AllExcept` instance
//! opens one cluster-wide watch whose field selector the server evaluates.

mod common;

use common::*;
use mcr_core::scope::Namespaces;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_capi::CapiVersion;

const V: CapiVersion = CapiVersion::V1Beta2;
const NAMESPACES: [&str; 5] = ["a", "b", "c", "d", "e"];

fn watches(host: &TestCluster, resource: &str) -> (u64, u64) {
    (
        host.request_count("list", resource),
        host.request_count("watch", resource),
    )
}

#[tokio::test]
async fn list_and_all_except_split_the_management_cluster() {
    init_tracing();
    let host = management().await;
    let workload = TestCluster::start_https("workload").await.unwrap();
    let kubeconfig = kubeconfig_of(&workload);
    for ns in NAMESPACES {
        create_namespace(&host.client(), ns, &[]).await;
        create_cluster(&host, V, ns, "first", true, &[]).await;
        put_secret(&host, ns, "first", Some(kubeconfig.as_bytes()), &[]).await;
        // Not ready: still delivered to the instance whose scope holds it (it gets a status).
        create_cluster(&host, V, ns, "pending", false, &[]).await;
    }
    // Request counters are emulator-only: on a real API server the watch counts go.
    let counters = !mcr_envtest::backend().is_real();
    if counters {
        host.reset_request_counts();
    }

    // The central instance first, alone, so the request counters are its own.
    let central = Running::start(
        &host,
        opts(V, Namespaces::AllExcept(vec!["a".into(), "b".into()])),
    );
    eventually("central engaged c, d, e", WAIT, || {
        ["c", "d", "e"]
            .iter()
            .all(|ns| central.has(&format!("{ns}/first")))
    })
    .await;
    if counters {
        eventually("central watches open", WAIT, || {
            watches(&host, "clusters").1 >= 1 && watches(&host, "secrets").1 >= 1
        })
        .await;
        assert_eq!(
            watches(&host, "clusters"),
            (1, 1),
            "one list and one watch of Clusters for three namespaces"
        );
        assert_eq!(
            watches(&host, "secrets"),
            (1, 1),
            "one list and one watch of Secrets"
        );
    }

    let tenants = Running::start(
        &host,
        opts(V, Namespaces::List(vec!["a".into(), "b".into()])),
    );
    eventually("tenants engaged a, b", WAIT, || {
        tenants.has("a/first") && tenants.has("b/first")
    })
    .await;
    if counters {
        eventually("tenant watches open", WAIT, || {
            watches(&host, "clusters").1 >= 3 && watches(&host, "secrets").1 >= 3
        })
        .await;
        assert_eq!(
            watches(&host, "clusters"),
            (3, 3),
            "List[a, b] opens one watch per namespace"
        );
    }

    // Clusters created while both run.
    for ns in NAMESPACES {
        create_cluster(&host, V, ns, "later", true, &[]).await;
        put_secret(&host, ns, "later", Some(kubeconfig.as_bytes()), &[]).await;
    }
    eventually("every later cluster engaged", WAIT, || {
        NAMESPACES
            .iter()
            .all(|ns| central.has(&format!("{ns}/later")) || tenants.has(&format!("{ns}/later")))
    })
    .await;

    // Exactly one owner each.
    for ns in NAMESPACES {
        for name in ["first", "later"] {
            let cluster = format!("{ns}/{name}");
            let owners = [central.has(&cluster), tenants.has(&cluster)];
            let expected = if ns == "a" || ns == "b" {
                [false, true]
            } else {
                [true, false]
            };
            assert_eq!(
                owners, expected,
                "{cluster} engaged by exactly the right instance"
            );
        }
    }
    assert_eq!(central.names().len(), 6);
    assert_eq!(tenants.names().len(), 4);

    // Server-side filtering: every Cluster the central watch delivered gets a status, and
    // none of them is in a or b (not even the not-ready ones); and the other way round.
    let seen: Vec<String> = central
        .provider
        .statuses()
        .keys()
        .map(|k| k.namespace.clone())
        .collect();
    assert_eq!(seen.len(), 9, "c, d, e: first, pending, later: {seen:?}");
    assert!(seen.iter().all(|ns| ns != "a" && ns != "b"), "{seen:?}");
    let seen: Vec<String> = tenants
        .provider
        .statuses()
        .keys()
        .map(|k| k.namespace.clone())
        .collect();
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert!(seen.iter().all(|ns| ns == "a" || ns == "b"), "{seen:?}");

    // Still one watch per instance and namespace after all that traffic.
    if counters {
        assert_eq!(watches(&host, "clusters"), (3, 3));
    }
    central.stop().await;
    tenants.stop().await;
}
