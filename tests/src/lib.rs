//! Cross-crate tests of mcr (in `tests/`) and the doc-tests of the root README: every Rust block
//! in `README.md` is compiled (and, unless marked `no_run`, run) by `cargo test -p mcr-tests --doc`.

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
