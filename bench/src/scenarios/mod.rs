//! The scenarios. Each has a `child` half (runs in `mcr-bench run-one`, measures, returns
//! JSON) and a `run` half (in the parent: starts children, summarizes into a
//! [`Scenario`](crate::report::Scenario)).

pub mod compare;
pub mod credentials;
pub mod engage;
pub mod envtest;
pub mod fairness;
pub mod fairness_remote;
pub mod fleet_compare;
pub mod go_peer;
pub mod https;
pub mod instructions;
pub mod multicore;
pub mod priority;
pub mod scale;
pub mod shard;
pub mod shard_peer;
pub mod watches;
