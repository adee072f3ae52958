//! Deterministic simulation of mcr's sharding protocol and engagement table.
//!
//! The real code runs: `mcr_manager::Manager` in sharded mode (its coordinator and peer
//! protocol), the real `mcr_core::Engagements` table, real providers
//! (`mcr_core::providers::clusters::ClustersProvider`, `mcr_provider_namespace`), a real
//! controller, and real kube clients speaking HTTP to the `mcr-envtest` emulator in process.
//! Only the host, the clock and the network are simulated: every replica is a tokio runtime
//! with a paused clock, driven step by step on one thread; requests travel over a simulated
//! wire to the emulator; one seed draws the fault plan, the network's choices and the order
//! things happen in. After every step the invariants (see [`Invariant`]) are checked; a
//! failure prints the seed and the trace, and `cargo xtask sim --seed S` replays it.
//!
//! See the crate README for how to run it, what it covers, and what stays nondeterministic.

mod check;
mod clock;
mod logs;
mod model;
mod net;
mod plan;
mod regressions;
mod replica;
mod tap;
mod trace;
mod wire;
mod world;

pub use check::{Bounds, Invariant, Violation};
pub use clock::Ms;
pub use logs::logs;
pub use net::{Partition, WatchFaults};
pub use plan::{Event, Fault, Plan, Scenario};
pub use regressions::REGRESSIONS;
pub use replica::{Kind, Timings};
pub use trace::Trace;
pub use wire::Path;
pub use world::{BOUNDS, Options, Outcome, TIMINGS, run};
