//! What the Gardener provider's test binaries share.

use std::time::Duration;

use mcr_core::credentials::RenewalOptions;
use mcr_provider_gardener::{Namespaces, Options};

/// A bound for a condition a test waits on; not a timing assertion.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Options for the project `garden-dev`, requesting credentials for `expiration` (the garden
/// may cap it), renewed at half their lifetime; retries after 100 ms up to 400 ms.
pub fn options(expiration: Duration) -> Options {
    Options {
        namespaces: Namespaces::One("garden-dev".into()),
        expiration,
        renewal: RenewalOptions {
            fraction: 0.5,
            jitter: 0.05,
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_millis(400),
            ..RenewalOptions::default()
        },
        retry_initial: Duration::from_millis(100),
        retry_max: Duration::from_millis(400),
        ..Options::default()
    }
}
