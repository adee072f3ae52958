//! The scripted tour: every step acts, then waits (with a deadline) for its effect.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::Manager;

use crate::controller::{ANNOTATION, Stats, short_name};

/// Polls `check` every 20 ms until it holds; fails naming `step` after `deadline`.
pub async fn wait_for<F, Fut>(step: &str, deadline: Duration, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    while !check().await {
        if start.elapsed() > deadline {
            bail!(
                "step \"{step}\" did not happen within {}s",
                deadline.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Everything the steps share.
pub struct Tour {
    pub fleet: Fleet,
    pub dir: PathBuf,
    pub mgr: Manager,
    pub stats: Arc<Stats>,
    pub deadline: Duration,
    pub removed: Vec<String>,
}

fn kubeconfig_path(dir: &Path, cluster: &str) -> PathBuf {
    dir.join(format!("{cluster}.kubeconfig"))
}

impl Tour {
    fn cluster(&self, name: &str) -> Result<&TestCluster> {
        self.fleet
            .get(name)
            .with_context(|| format!("no cluster {name}"))
    }

    fn engaged(&self) -> Vec<String> {
        let names = self.mgr.engaged_clusters();
        names
            .iter()
            .map(|n| short_name(n.as_str()).to_owned())
            .collect()
    }

    /// Waits until the provider engaged `cluster` (or, with `engaged = false`, let it go).
    pub async fn wait_engaged(&self, cluster: &str, engaged: bool) -> Result<()> {
        let step = if engaged {
            format!("the file provider engages {cluster}")
        } else {
            format!("the file provider lets {cluster} go")
        };
        wait_for(&step, self.deadline, || async {
            self.engaged().iter().any(|c| c == cluster) == engaged
        })
        .await
    }

    /// Creates ConfigMap `default/<name>` in `cluster` (as a user would, over HTTPS).
    pub async fn create_configmap(&self, cluster: &str, name: &str) -> Result<()> {
        let client = self.cluster(cluster)?.https_client().await?;
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(client, "default")
            .create(&PostParams::default(), &cm)
            .await
            .with_context(|| format!("creating default/{name} in {cluster}"))?;
        Ok(())
    }

    /// The controller's annotation on `default/<name>` in `cluster`, read through the API.
    pub async fn stamp(&self, cluster: &str, name: &str) -> Result<Option<String>> {
        let client = self.cluster(cluster)?.https_client().await?;
        let cm = Api::<ConfigMap>::namespaced(client, "default")
            .get_opt(name)
            .await?;
        Ok(cm.and_then(|cm| cm.annotations().get(ANNOTATION).cloned()))
    }

    /// Waits until `default/<name>` in `cluster` carries the annotation naming `cluster`.
    pub async fn wait_reconciled(&self, cluster: &str, name: &str) -> Result<()> {
        let step = format!("the controller reconciles default/{name} in {cluster}");
        wait_for(&step, self.deadline, || async {
            matches!(self.stamp(cluster, name).await, Ok(Some(v)) if v == cluster)
        })
        .await?;
        println!("      {cluster}: default/{name} reconciled ({ANNOTATION}={cluster})");
        Ok(())
    }

    /// Step: one ConfigMap per cluster, each reconciled.
    pub async fn configmaps_everywhere(&self, name: &str) -> Result<()> {
        let names = self.fleet.names();
        for cluster in &names {
            self.create_configmap(cluster, name).await?;
        }
        println!(
            "      created ConfigMap default/{name} in {}",
            names.join(", ")
        );
        for cluster in &names {
            self.wait_reconciled(cluster, name).await?;
        }
        Ok(())
    }

    /// Step: a new cluster starts and its kubeconfig file appears in the watched directory.
    pub async fn add_cluster(&mut self, name: &str) -> Result<()> {
        self.fleet
            .add(name)
            .await
            .context("starting a new cluster")?;
        println!("      started {name}; its kubeconfig appeared: {name}.kubeconfig");
        self.wait_engaged(name, true).await?;
        println!("      the file provider engaged {name}");
        self.create_configmap(name, "hello").await?;
        self.wait_reconciled(name, "hello").await
    }

    /// Step: a cluster's kubeconfig file is deleted (the cluster itself keeps running), the
    /// provider lets it go, and a ConfigMap created there afterwards is not reconciled.
    pub async fn remove_cluster(&mut self, name: &str, witness: &str) -> Result<()> {
        std::fs::remove_file(kubeconfig_path(&self.dir, name))
            .with_context(|| format!("deleting {name}.kubeconfig"))?;
        println!("      deleted {name}.kubeconfig ({name} itself keeps running)");
        self.wait_engaged(name, false).await?;
        self.removed.push(name.to_owned());
        println!("      the file provider let {name} go");

        self.create_configmap(name, "after-removal").await?;
        // Barrier: a change in a cluster that is still engaged goes all the way through the
        // controller. Had the removed cluster's watch been alive, its event was in the same
        // pipeline at the same time.
        self.create_configmap(witness, "barrier").await?;
        self.wait_reconciled(witness, "barrier").await?;
        if self.stamp(name, "after-removal").await?.is_some()
            || self.stats.contains(name, "default/after-removal")
        {
            bail!(
                "step \"work stops in removed {name}\" failed: default/after-removal was reconciled"
            );
        }
        println!(
            "      created default/after-removal in {name}: NOT reconciled \
             (checked after {witness}'s default/barrier was)"
        );
        Ok(())
    }

    /// The summary table: cluster, objects reconciled, state.
    pub fn summary(&self) -> String {
        let engaged = self.engaged();
        let mut rows = vec![("CLUSTER".to_owned(), "RECONCILED".to_owned(), "STATE")];
        for name in self.fleet.names() {
            let state = if engaged.contains(&name) {
                "engaged"
            } else if self.removed.contains(&name) {
                "removed"
            } else {
                "not engaged"
            };
            rows.push((name.clone(), self.stats.count(&name).to_string(), state));
        }
        render(&rows)
    }

    /// The kubectl lines for `--serve`.
    pub fn kubectl_lines(&self) -> Vec<String> {
        self.fleet
            .names()
            .iter()
            .filter(|n| !self.removed.contains(n))
            .map(|n| {
                format!(
                    "kubectl --kubeconfig {} get configmaps -w",
                    kubeconfig_path(&self.dir, n).display()
                )
            })
            .collect()
    }
}

/// Renders rows as an aligned table, one line per row, indented for the narration.
pub fn render(rows: &[(String, String, &str)]) -> String {
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(a, b, c)| {
            format!("      {a:<w0$}  {b:<w1$}  {c}")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn table_is_aligned() {
        let rows = vec![
            ("CLUSTER".to_owned(), "RECONCILED".to_owned(), "STATE"),
            ("cluster-10".to_owned(), "3".to_owned(), "engaged"),
        ];
        assert_eq!(
            render(&rows),
            "      CLUSTER     RECONCILED  STATE\n      cluster-10  3           engaged"
        );
    }
}
