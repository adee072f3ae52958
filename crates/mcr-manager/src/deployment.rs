//! How a deployed manager learns where it runs and how: the environment the chart
//! (`charts/mcr-controller`) sets, read into [`LeaderElection`](crate::LeaderElection) or
//! [`Sharding`] and a metrics address, so that a controller's binary needs no flags of ours.
//!
//! | variable | meaning |
//! |---|---|
//! | `MCR_NAMESPACE` | the namespace of the Leases (the chart: the release's namespace); required when a mode is set |
//! | `MCR_LEADER_ELECTION_ID` | leader election through the Lease of this name |
//! | `MCR_SHARD_GROUP` | sharding with the other replicas of this group (not with `MCR_LEADER_ELECTION_ID`) |
//! | `MCR_LEASE_DURATION_SECONDS` | lease duration, at least 2 (default 15); renew deadline 2/3 of it, renewals every 1/5 |
//! | `MCR_METRICS_BIND_ADDRESS` | serve `/metrics`, `/healthz`, `/readyz` and `/clusters` here |
//! | `MCR_WEBHOOK_BIND_ADDRESS` | where the webhook server listens (the chart: `0.0.0.0:<webhook.port>`, with `webhook.enabled`) |
//! | `MCR_WEBHOOK_CERT_DIR` | the directory of the webhook's serving certificate, `tls.crt` and `tls.key` (the chart: `/tls`) |
//! | `POD_NAME` | the replica's identity (read by [`LeaderElection::new`](crate::LeaderElection::new) and [`Sharding::new`]) |
//!
//! Unset variables leave the builder as it was; set ones that do not parse are an error that
//! names the variable. The webhook's two are not the builder's: pass them to `mcr-webhook`'s
//! `Server::bind` and `CertificateReloader::from_files` (see [`DeploymentEnv::webhook`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::{ManagerBuilder, Sharding};

/// `MCR_NAMESPACE`.
pub const NAMESPACE: &str = "MCR_NAMESPACE";
/// `MCR_LEADER_ELECTION_ID`.
pub const LEADER_ELECTION_ID: &str = "MCR_LEADER_ELECTION_ID";
/// `MCR_SHARD_GROUP`.
pub const SHARD_GROUP: &str = "MCR_SHARD_GROUP";
/// `MCR_LEASE_DURATION_SECONDS`.
pub const LEASE_DURATION_SECONDS: &str = "MCR_LEASE_DURATION_SECONDS";
/// `MCR_METRICS_BIND_ADDRESS`.
pub const METRICS_BIND_ADDRESS: &str = "MCR_METRICS_BIND_ADDRESS";
/// `MCR_WEBHOOK_BIND_ADDRESS`.
pub const WEBHOOK_BIND_ADDRESS: &str = "MCR_WEBHOOK_BIND_ADDRESS";
/// `MCR_WEBHOOK_CERT_DIR`.
pub const WEBHOOK_CERT_DIR: &str = "MCR_WEBHOOK_CERT_DIR";

/// A variable of the deployment contract that is set but unusable.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("environment variable {variable}: {reason}")]
pub struct DeploymentEnvError {
    /// The variable.
    pub variable: &'static str,
    /// Why it cannot be used.
    pub reason: String,
}

/// The deployment settings read from the environment (see the [module](self) for the
/// variables).
///
/// ```
/// use mcr_manager::DeploymentEnv;
/// let vars = [("MCR_NAMESPACE", "mcr-system"), ("MCR_LEADER_ELECTION_ID", "my-controller")];
/// let env = DeploymentEnv::from_vars(|k| {
///     vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string())
/// })
/// .unwrap();
/// assert_eq!(env.namespace.as_deref(), Some("mcr-system"));
/// assert_eq!(env.leader_election.unwrap().lease_name(), "my-controller");
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DeploymentEnv {
    /// `MCR_NAMESPACE`, also where a controller may keep its own objects.
    pub namespace: Option<String>,
    /// From `MCR_LEADER_ELECTION_ID`.
    #[cfg(feature = "leader-election")]
    pub leader_election: Option<crate::LeaderElection>,
    /// From `MCR_SHARD_GROUP`.
    pub sharding: Option<Sharding>,
    /// `MCR_METRICS_BIND_ADDRESS`.
    pub metrics_address: Option<SocketAddr>,
    /// `MCR_WEBHOOK_BIND_ADDRESS` and `MCR_WEBHOOK_CERT_DIR`, set together or not at all.
    pub webhook: Option<WebhookEnv>,
}

/// Where the deployment wants the webhook server: the chart sets both variables when
/// `webhook.enabled` is true and mounts the serving certificate at [`cert_dir`](Self::cert_dir).
///
/// ```
/// # use mcr_manager::DeploymentEnv;
/// let vars = [("MCR_WEBHOOK_BIND_ADDRESS", "0.0.0.0:9443"), ("MCR_WEBHOOK_CERT_DIR", "/tls")];
/// let env = DeploymentEnv::from_vars(|k| {
///     vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string())
/// })
/// .unwrap();
/// let webhook = env.webhook.unwrap();
/// assert_eq!(webhook.address.port(), 9443);
/// assert_eq!(webhook.cert_path(), std::path::Path::new("/tls/tls.crt"));
/// // With mcr-webhook:
/// // let certs = CertificateReloader::from_files(webhook.cert_path(), webhook.key_path())?;
/// // let server = Server::bind(webhook.address, webhooks, certs, ServerOptions::default()).await?;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WebhookEnv {
    /// `MCR_WEBHOOK_BIND_ADDRESS`: where the webhook server listens.
    pub address: SocketAddr,
    /// `MCR_WEBHOOK_CERT_DIR`: the directory holding `tls.crt` and `tls.key`.
    pub cert_dir: PathBuf,
}

impl WebhookEnv {
    /// `<cert_dir>/tls.crt`, the serving certificate (a `kubernetes.io/tls` Secret's key).
    pub fn cert_path(&self) -> PathBuf {
        self.cert_dir.join("tls.crt")
    }

    /// `<cert_dir>/tls.key`, its private key.
    pub fn key_path(&self) -> PathBuf {
        self.cert_dir.join("tls.key")
    }
}

impl DeploymentEnv {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, DeploymentEnvError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads the variables through `var` (`None`: unset); empty values count as unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, DeploymentEnvError> {
        let get = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let err = |variable, reason: String| DeploymentEnvError { variable, reason };
        let namespace = get(NAMESPACE);
        let lease = match get(LEASE_DURATION_SECONDS) {
            None => Duration::from_secs(15),
            Some(s) => match s.trim().parse::<u64>() {
                Ok(n) if n >= 2 => Duration::from_secs(n),
                _ => {
                    return Err(err(
                        LEASE_DURATION_SECONDS,
                        format!("{s:?} is not a whole number of seconds of at least 2"),
                    ));
                }
            },
        };
        let metrics_address = get(METRICS_BIND_ADDRESS)
            .map(|s| {
                s.trim().parse::<SocketAddr>().map_err(|e| {
                    err(
                        METRICS_BIND_ADDRESS,
                        format!("{s:?} is not an address: {e}"),
                    )
                })
            })
            .transpose()?;
        let webhook = match (get(WEBHOOK_BIND_ADDRESS), get(WEBHOOK_CERT_DIR)) {
            (None, None) => None,
            (Some(s), Some(dir)) => Some(WebhookEnv {
                address: s.trim().parse::<SocketAddr>().map_err(|e| {
                    err(
                        WEBHOOK_BIND_ADDRESS,
                        format!("{s:?} is not an address: {e}"),
                    )
                })?,
                cert_dir: PathBuf::from(dir),
            }),
            (Some(_), None) => {
                return Err(err(
                    WEBHOOK_BIND_ADDRESS,
                    format!("set without {WEBHOOK_CERT_DIR}, the serving certificate's directory"),
                ));
            }
            (None, Some(_)) => {
                return Err(err(
                    WEBHOOK_CERT_DIR,
                    format!("set without {WEBHOOK_BIND_ADDRESS}, where the webhook listens"),
                ));
            }
        };
        let (election, group) = (get(LEADER_ELECTION_ID), get(SHARD_GROUP));
        if election.is_some() && group.is_some() {
            return Err(err(
                SHARD_GROUP,
                format!("set together with {LEADER_ELECTION_ID}: choose one mode"),
            ));
        }
        let needs_namespace = |variable| {
            namespace.clone().ok_or_else(|| {
                err(
                    variable,
                    format!("needs {NAMESPACE}, the namespace of the Leases"),
                )
            })
        };
        #[cfg(feature = "leader-election")]
        let leader_election = match election {
            Some(id) => Some(
                crate::LeaderElection::new(id, needs_namespace(LEADER_ELECTION_ID)?)
                    .lease_duration(lease)
                    .renew_deadline(lease * 2 / 3)
                    .retry_period(lease / 5),
            ),
            None => None,
        };
        #[cfg(not(feature = "leader-election"))]
        if election.is_some() {
            return Err(err(
                LEADER_ELECTION_ID,
                "mcr-manager was built without its leader-election feature".to_owned(),
            ));
        }
        let sharding = match group {
            Some(group) => Some(
                Sharding::new(group)
                    .namespace(needs_namespace(SHARD_GROUP)?)
                    .lease_duration(lease)
                    .renew_deadline(lease * 2 / 3)
                    .renew_period(lease / 5),
            ),
            None => None,
        };
        Ok(Self {
            namespace,
            #[cfg(feature = "leader-election")]
            leader_election,
            sharding,
            metrics_address,
            webhook,
        })
    }

    /// Sets on `builder` what the environment set: leader election or sharding, and the
    /// metrics address.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) -> Result<(), mcr_manager::DeploymentEnvError> {
    /// let env = mcr_manager::DeploymentEnv::from_env()?;
    /// let mgr = env.apply(mcr_manager::Manager::builder(client)).build();
    /// # Ok(()) }
    /// ```
    pub fn apply(self, mut builder: ManagerBuilder) -> ManagerBuilder {
        #[cfg(feature = "leader-election")]
        if let Some(le) = self.leader_election {
            builder = builder.leader_election(le);
        }
        if let Some(sharding) = self.sharding {
            builder = builder.sharding(sharding);
        }
        if let Some(addr) = self.metrics_address {
            builder = builder.metrics_address(addr);
        }
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<DeploymentEnv, DeploymentEnvError> {
        DeploymentEnv::from_vars(|k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn nothing_set_changes_nothing() {
        let env = read(&[]).unwrap();
        assert!(env.namespace.is_none() && env.sharding.is_none());
        assert!(env.metrics_address.is_none());
        #[cfg(feature = "leader-election")]
        assert!(env.leader_election.is_none());
    }

    #[test]
    fn sharding_gets_the_namespace_and_lease_settings() {
        let env = read(&[
            (NAMESPACE, "mcr-system"),
            (SHARD_GROUP, "ctl"),
            (LEASE_DURATION_SECONDS, "30"),
            (METRICS_BIND_ADDRESS, "0.0.0.0:8080"),
        ])
        .unwrap();
        let s = env.sharding.unwrap();
        assert_eq!(s.group, "ctl");
        assert_eq!(s.namespace.as_deref(), Some("mcr-system"));
        assert_eq!(s.lease_duration, Duration::from_secs(30));
        assert_eq!(s.renew_deadline, Duration::from_secs(20));
        assert_eq!(s.renew_period, Duration::from_secs(6));
        s.validate().unwrap();
        assert_eq!(env.metrics_address, Some(([0, 0, 0, 0], 8080).into()));
    }

    #[cfg(feature = "leader-election")]
    #[test]
    fn leader_election_uses_the_lease_settings() {
        let env = read(&[
            (NAMESPACE, "ns"),
            (LEADER_ELECTION_ID, "ctl"),
            (LEASE_DURATION_SECONDS, "15"),
        ])
        .unwrap();
        let le = env.leader_election.unwrap();
        assert_eq!(le.lease_name(), "ctl");
        le.validate().unwrap();
        assert!(format!("{le:?}").contains("renew_deadline: 10s"), "{le:?}");
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (vars, variable) in [
            (&[(LEASE_DURATION_SECONDS, "1")][..], LEASE_DURATION_SECONDS),
            (
                &[(LEASE_DURATION_SECONDS, "15s")][..],
                LEASE_DURATION_SECONDS,
            ),
            (&[(METRICS_BIND_ADDRESS, ":8080")][..], METRICS_BIND_ADDRESS),
            (&[(SHARD_GROUP, "g")][..], SHARD_GROUP),
            (
                &[
                    (NAMESPACE, "n"),
                    (SHARD_GROUP, "g"),
                    (LEADER_ELECTION_ID, "l"),
                ][..],
                SHARD_GROUP,
            ),
            (
                &[(WEBHOOK_BIND_ADDRESS, "9443"), (WEBHOOK_CERT_DIR, "/tls")][..],
                WEBHOOK_BIND_ADDRESS,
            ),
            (
                &[(WEBHOOK_BIND_ADDRESS, "0.0.0.0:9443")][..],
                WEBHOOK_BIND_ADDRESS,
            ),
            (&[(WEBHOOK_CERT_DIR, "/tls")][..], WEBHOOK_CERT_DIR),
        ] {
            let e = read(vars).unwrap_err();
            assert_eq!(e.variable, variable, "{e}");
            assert!(e.to_string().contains(variable), "{e}");
        }
    }

    #[test]
    fn the_webhook_gets_its_address_and_certificate_files() {
        let env = read(&[
            (WEBHOOK_BIND_ADDRESS, " 0.0.0.0:9443 "),
            (WEBHOOK_CERT_DIR, "/tls"),
        ])
        .unwrap();
        let webhook = env.webhook.unwrap();
        assert_eq!(webhook.address, SocketAddr::from(([0, 0, 0, 0], 9443)));
        assert_eq!(webhook.cert_path(), PathBuf::from("/tls/tls.crt"));
        assert_eq!(webhook.key_path(), PathBuf::from("/tls/tls.key"));
        assert!(read(&[]).unwrap().webhook.is_none());
    }
}
