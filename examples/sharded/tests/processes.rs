//! Three `example-sharded replica` processes over one fleet of six members, the way the
//! example is deployed: on the emulator, and on real kube-apiservers with `MCR_ENVTEST=real`
//! (run by `cargo xtask e2e`; `MCR_E2E_KUBECONFIG_DIR` points it at other clusters).
//!
//! Checked, each by waiting on a condition (bounded by [`DEADLINE`]):
//! 1. the three peer Leases are on the host and each claims the same three replicas;
//! 2. every member's ConfigMaps are stamped, and all the stamps of one member name one
//!    replica (its owner);
//! 3. the replica owning most members is killed with SIGKILL; a ConfigMap is then written in
//!    every member and stamped by one of the two survivors (the victim's members by their new
//!    owner, the others by their old one: a leaving replica's share is all that moves); the
//!    victim's Lease is collected;
//! 4. one survivor stops on SIGTERM: it exits 0 with its Lease deleted, and the last one takes
//!    every member; the last one stops when its standard input closes, and no Lease is left.
//!
//! The replicas are killed when the test drops them, and stop when its process dies (their
//! standard input closes), so a failing run leaves no process behind.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use example_support::stamp::ANNOTATION;
use example_support::{Env, client, unique};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use tokio::process::{Child, ChildStdin, Command};

const BIN: &str = env!("CARGO_BIN_EXE_example-sharded");
/// How long any awaited condition may take: generous, for real control planes on a busy machine.
const DEADLINE: Duration = Duration::from_secs(120);
/// The label of the peer Leases (its value: the group).
const GROUP_LABEL: &str = "mcr.sigs.k8s.io/shard-group";
/// The annotation with the peer set a replica has applied (`id=weight,…`).
const CLAIM: &str = "mcr.sigs.k8s.io/shard-claim";
/// Labels this test's ConfigMaps (its value: the run).
const RUN_LABEL: &str = "mcr.example/processes-run";

/// One replica process; killed when dropped.
struct Replica {
    id: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Replica {
    fn start(id: &str, group: &str, env: &Env) -> Result<Replica> {
        let mut child = Command::new(BIN)
            .arg("replica")
            .args(["--id", id, "--group", group])
            .arg("--host-kubeconfig")
            .arg(env.host_kubeconfig())
            .arg("--fleet-dir")
            .arg(env.members_dir())
            .args(["--lease-duration", "4", "--renew-deadline", "3"])
            .args(["--renew-period", "1", "--stop-on-stdin-close"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting replica {id}"))?;
        let stdin = child.stdin.take();
        Ok(Replica {
            id: id.to_owned(),
            child,
            stdin,
        })
    }

    /// Fails if the process has exited.
    fn assert_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("replica {} exited early ({status})", self.id);
        }
        Ok(())
    }

    /// SIGKILL, and reaped.
    async fn kill(&mut self) -> Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// SIGTERM (through `kill`, the command).
    async fn terminate(&mut self) -> Result<()> {
        let pid = self.child.id().context("the replica has exited")?;
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await?;
        ensure!(status.success(), "kill -TERM {pid}: {status}");
        Ok(())
    }

    /// Waits for the process to exit.
    async fn exited(&mut self) -> Result<ExitStatus> {
        tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .with_context(|| format!("replica {} did not exit within {DEADLINE:?}", self.id))?
            .map_err(Into::into)
    }
}

/// Polls `check` every 200 ms until it gives `Ok(value)`; after [`DEADLINE`], fails with
/// `what` and the last `Err(state)` it gave.
async fn until<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<std::result::Result<T, String>>>,
{
    let start = tokio::time::Instant::now();
    loop {
        let state = match check().await? {
            Ok(value) => return Ok(value),
            Err(state) => state,
        };
        if start.elapsed() > DEADLINE {
            bail!("timed out after {DEADLINE:?} waiting for {what}; last seen: {state}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The group's Leases on the host: holder -> the replicas its claim names.
async fn leases(host: &kube::Client, group: &str) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let api: Api<Lease> = Api::all(host.clone());
    let list = api
        .list(&ListParams::default().labels(&format!("{GROUP_LABEL}={group}")))
        .await?;
    let mut out = BTreeMap::new();
    for lease in list {
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .with_context(|| format!("Lease {} has no holder", lease.name_any()))?;
        let claim = lease
            .annotations()
            .get(CLAIM)
            .map(|c| {
                c.split(',')
                    .filter_map(|p| p.rsplit_once('=').map(|(id, _)| id.to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        out.insert(holder, claim);
    }
    Ok(out)
}

/// One member: its name and its ConfigMaps in `default`.
struct Member {
    name: String,
    api: Api<ConfigMap>,
}

impl Member {
    async fn create(&self, name: &str, run: &str) -> Result<()> {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(BTreeMap::from([(RUN_LABEL.to_owned(), run.to_owned())])),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        self.api.create(&PostParams::default(), &cm).await?;
        Ok(())
    }

    /// This run's ConfigMaps: name -> stamp.
    async fn stamps(&self, run: &str) -> Result<BTreeMap<String, Option<String>>> {
        let list = self
            .api
            .list(&ListParams::default().labels(&format!("{RUN_LABEL}={run}")))
            .await?;
        Ok(list
            .into_iter()
            .map(|cm| {
                let stamp = cm.annotations().get(ANNOTATION).cloned();
                (cm.name_any(), stamp)
            })
            .collect())
    }
}

/// Each member's owner, once every one of this run's ConfigMaps is stamped (`must_have` among
/// them) and all of one member's stamps name one replica of `allowed`.
async fn owners(
    members: &[Member],
    run: &str,
    must_have: &str,
    allowed: &BTreeSet<String>,
) -> Result<std::result::Result<BTreeMap<String, String>, String>> {
    let mut owners = BTreeMap::new();
    for m in members {
        let stamps = m.stamps(run).await?;
        if !stamps.contains_key(must_have) {
            return Ok(Err(format!("{}: {must_have} not listed yet", m.name)));
        }
        let by: BTreeSet<Option<&String>> = stamps.values().map(Option::as_ref).collect();
        match by.into_iter().collect::<Vec<_>>()[..] {
            [Some(owner)] if allowed.contains(owner) => {
                owners.insert(m.name.clone(), owner.clone());
            }
            _ => return Ok(Err(format!("{}: {stamps:?}", m.name))),
        }
    }
    Ok(Ok(owners))
}

fn ids(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|&s| s.to_owned()).collect()
}

#[tokio::test]
async fn replica_processes_share_the_fleet_hand_over_and_leave_cleanly() -> Result<()> {
    let env = Env::start(6).await?;
    match &env.emulated {
        Some(e) => eprintln!("clusters on the {:?} backend", e.host.backend()),
        None => eprintln!("clusters from {}", example_support::E2E_DIR_VAR),
    }
    let host = env.host_client().await?;
    let run = unique("processes");
    let group = unique("shard");
    let mut members = Vec::new();
    for m in env.members() {
        members.push(Member {
            name: m.name.clone(),
            api: Api::namespaced(client(&m.kubeconfig).await?, "default"),
        });
    }
    // Written before any replica runs: listed, not only watched.
    let before = format!("{run}-before");
    for m in &members {
        m.create(&before, &run).await?;
    }

    let mut replicas = Vec::new();
    for id in ["replica-1", "replica-2", "replica-3"] {
        replicas.push(Replica::start(id, &group, &env)?);
    }
    let all = ids(&["replica-1", "replica-2", "replica-3"]);

    // 1. Three Leases, each claiming the same three replicas: ownership has settled.
    until("three Leases claiming the same three replicas", || async {
        let leases = leases(&host, &group).await?;
        let settled =
            leases.len() == 3 && leases.iter().all(|(id, c)| all.contains(id) && *c == all);
        Ok(if settled {
            Ok(())
        } else {
            Err(format!("{leases:?}"))
        })
    })
    .await?;

    // 2. Every member's stamps name one replica, also on a ConfigMap written from now on.
    let settled = format!("{run}-settled");
    for m in &members {
        m.create(&settled, &run).await?;
    }
    let owned = until("every member stamped by one replica", || {
        owners(&members, &run, &settled, &all)
    })
    .await?;
    for r in &mut replicas {
        r.assert_running()?;
    }

    // 3. Kill -9 the replica owning most members.
    let count = |id: &str| owned.values().filter(|o| *o == id).count();
    let victim = (0..replicas.len())
        .max_by_key(|&i| count(&replicas[i].id))
        .context("no replica")?;
    let mut victim = replicas.remove(victim);
    ensure!(count(&victim.id) > 0, "{owned:?}");
    victim.kill().await?;
    let killed = tokio::time::Instant::now();
    let survivors = ids(&[&replicas[0].id, &replicas[1].id]);
    let after = format!("{run}-after-kill");
    for m in &members {
        m.create(&after, &run).await?;
    }
    let reowned = until("every member stamped by a survivor", || {
        owners(&members, &run, &after, &survivors)
    })
    .await?;
    eprintln!(
        "owners {owned:?}; {} killed; {:.1} s later {reowned:?}",
        victim.id,
        killed.elapsed().as_secs_f64()
    );
    for (member, owner) in &owned {
        if *owner != victim.id {
            assert_eq!(
                &reowned[member], owner,
                "{member} moved: {owned:?} -> {reowned:?}"
            );
        }
    }
    until("the killed replica's Lease collected", || async {
        let leases = leases(&host, &group).await?;
        let ids: BTreeSet<String> = leases.keys().cloned().collect();
        Ok(if ids == survivors {
            Ok(())
        } else {
            Err(format!("{leases:?}"))
        })
    })
    .await?;

    // 4. A clean stop on SIGTERM: exit 0, its Lease gone; the last replica takes over.
    let mut last = replicas.pop().context("no replica")?;
    let mut first = replicas.pop().context("no replica")?;
    first.terminate().await?;
    let status = first.exited().await?;
    ensure!(
        status.success(),
        "replica {} exited with {status}",
        first.id
    );
    let left: BTreeSet<String> = leases(&host, &group).await?.into_keys().collect();
    assert_eq!(left, ids(&[&last.id]), "after {} stopped", first.id);
    let alone = format!("{run}-alone");
    for m in &members {
        m.create(&alone, &run).await?;
    }
    let only_last = ids(&[&last.id]);
    until("every member stamped by the last replica", || {
        owners(&members, &run, &alone, &only_last)
    })
    .await?;
    // ... which stops when its standard input closes.
    drop(last.stdin.take());
    let status = last.exited().await?;
    ensure!(status.success(), "replica {} exited with {status}", last.id);
    let left = leases(&host, &group).await?;
    assert!(left.is_empty(), "Leases left: {left:?}");

    for m in &members {
        for name in [&before, &settled, &after, &alone] {
            m.api.delete(name, &DeleteParams::default()).await?;
        }
    }
    drop(victim);
    Ok(())
}

#[test]
fn the_replica_mode_refuses_bad_lease_settings() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("host.kubeconfig");
    std::fs::write(&kubeconfig, MINIMAL_KUBECONFIG).expect("written");
    let out = std::process::Command::new(BIN)
        .arg("replica")
        .args(["--id", "r1", "--fleet-dir"])
        .arg(dir.path())
        .arg("--host-kubeconfig")
        .arg(&kubeconfig)
        .args(["--lease-duration", "2", "--renew-deadline", "3"])
        .stdin(Stdio::null())
        .output()
        .expect("the example binary starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("lease_duration") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// A kubeconfig for a server nobody listens on (the settings are refused before any request).
const MINIMAL_KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
users:
- name: u
  user:
    token: t
";
