//! Cross-crate tests of mcr (in `tests/`) and the doc-tests of every README: each Rust block in
//! the root `README.md` and in the crates' READMEs is compiled (and, unless marked `no_run`, run)
//! by `cargo test -p mcr-tests --doc`, so the documentation cannot drift from the code.

/// The root README.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Every crate's README.
#[cfg(doctest)]
pub mod crate_readmes {
    #[doc = include_str!("../../crates/mcr-core/README.md")]
    pub struct Core;
    #[doc = include_str!("../../crates/mcr-manager/README.md")]
    pub struct Manager;
    #[doc = include_str!("../../crates/mcr-envtest/README.md")]
    pub struct Envtest;
    #[doc = include_str!("../../crates/mcr-provider-file/README.md")]
    pub struct ProviderFile;
    #[doc = include_str!("../../crates/mcr-provider-kubeconfig/README.md")]
    pub struct ProviderKubeconfig;
    #[doc = include_str!("../../crates/mcr-provider-namespace/README.md")]
    pub struct ProviderNamespace;
    #[doc = include_str!("../../crates/mcr-provider-multi/README.md")]
    pub struct ProviderMulti;
}
