#![doc = include_str!("../chapters/00-introduction.md")]

pub mod ch01_key_concepts {
    #![doc = include_str!("../chapters/01-key-concepts.md")]
}
pub mod ch02_first_controller {
    #![doc = include_str!("../chapters/02-first-controller.md")]
}
pub mod ch03_choosing_a_provider {
    #![doc = include_str!("../chapters/03-choosing-a-provider.md")]
}
pub mod ch04_provider_kubeconfig {
    #![doc = include_str!("../chapters/04-provider-kubeconfig.md")]
}
pub mod ch05_provider_file {
    #![doc = include_str!("../chapters/05-provider-file.md")]
}
pub mod ch06_provider_namespace {
    #![doc = include_str!("../chapters/06-provider-namespace.md")]
}
pub mod ch07_provider_kind {
    #![doc = include_str!("../chapters/07-provider-kind.md")]
}
pub mod ch08_provider_capi {
    #![doc = include_str!("../chapters/08-provider-capi.md")]
}
pub mod ch09_provider_cluster_inventory {
    #![doc = include_str!("../chapters/09-provider-cluster-inventory.md")]
}
pub mod ch10_provider_gardener {
    #![doc = include_str!("../chapters/10-provider-gardener.md")]
}
pub mod ch11_provider_multi {
    #![doc = include_str!("../chapters/11-provider-multi.md")]
}
pub mod ch12_recipe_sync_secrets {
    #![doc = include_str!("../chapters/12-recipe-sync-secrets.md")]
}
pub mod ch13_credentials {
    #![doc = include_str!("../chapters/13-credentials.md")]
}
pub mod ch14_sharding_and_leader_election {
    #![doc = include_str!("../chapters/14-sharding-and-leader-election.md")]
}
pub mod ch15_webhooks {
    #![doc = include_str!("../chapters/15-webhooks.md")]
}
pub mod ch16_testing {
    #![doc = include_str!("../chapters/16-testing.md")]
}
pub mod ch17_porting_from_kube_runtime {
    #![doc = include_str!("../chapters/17-porting-from-kube-runtime.md")]
}
pub mod ch18_porting_from_go {
    #![doc = include_str!("../chapters/18-porting-from-go.md")]
}
pub mod ch19_operations {
    #![doc = include_str!("../chapters/19-operations.md")]
}
pub mod ch20_security {
    #![doc = include_str!("../chapters/20-security.md")]
}
pub mod ch21_reliability {
    #![doc = include_str!("../chapters/21-reliability.md")]
    // The charts are inlined as SVG (rustdoc passes HTML through), so they show wherever the
    // pages are served (docs.rs included), with no image file beside them and no URL to keep
    // alive. Reading them from `bench/charts/`, outside this crate, is fine because the guide
    // is not published (`cargo package` would refuse it).
    #![doc = include_str!("../../../bench/charts/chaos-recovery.svg")]
}
pub mod ch22_performance {
    #![doc = include_str!("../chapters/22-performance.md")]
    #![doc = include_str!("../../../bench/charts/b4-scale.svg")]
    #![doc = ""]
    #![doc = include_str!("../../../bench/charts/peer-ratios.svg")]
}
pub mod ch23_deploying {
    #![doc = include_str!("../chapters/23-deploying.md")]
}
pub mod ch24_recipe_fleet_summary {
    #![doc = include_str!("../chapters/24-recipe-fleet-summary.md")]
}
