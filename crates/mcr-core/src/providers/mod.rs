//! Small providers: [`single`] (one fixed cluster), [`nop`] (no cluster) and [`clusters`]
//! (clusters added and removed by code, for tests and embedding).
//!
//! ```no_run
//! # async fn f(client: kube::Client) {
//! use std::sync::Arc;
//! use mcr_core::{Cluster, Provider, providers::single::SingleProvider};
//!
//! let provider: Arc<dyn Provider> = Arc::new(SingleProvider::new("local", Cluster::new("local", client)));
//! # }
//! ```

pub mod clusters;
pub mod nop;
pub mod single;
