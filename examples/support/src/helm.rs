//! The Helm chart (`charts/mcr-controller`) on real API servers: run the assets' `helm`, render
//! the chart, and reduce rendered RBAC to what it grants, so that the chart's rules can be
//! compared with the Kustomize components that [`crate::rbac`] proves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, ensure};
use serde_json::Value;

/// The repository's `charts/mcr-controller` directory.
pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/mcr-controller")
}

/// The chart's CI values files (`ci/<name>-values.yaml`), sorted by name.
pub fn values_files() -> Result<Vec<PathBuf>> {
    let dir = chart_dir().join("ci");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|f| f.to_string_lossy().ends_with("-values.yaml"));
    files.sort();
    Ok(files)
}

/// Runs the assets' helm with `args` (and `HELM_*` state under `home`, so that nothing of the
/// user's Helm set-up is read or written), failing with its output.
pub async fn helm(home: &Path, args: &[&str]) -> Result<String> {
    let bin = mcr_envtest::real::Assets::find()?.helm.context(
        "no helm among the real assets: `cargo xtask assets` builds one into the asset \
         directory (or set TEST_ASSET_HELM)",
    )?;
    let out = tokio::process::Command::new(bin)
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .kill_on_drop(true)
        .output()
        .await
        .context("running helm")?;
    ensure!(
        out.status.success(),
        "helm {} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `helm template <release> charts/mcr-controller --namespace <namespace> -f <values> <extra>`:
/// the manifests as YAML.
pub async fn template(
    home: &Path,
    release: &str,
    namespace: &str,
    values: &Path,
    extra: &[&str],
) -> Result<String> {
    let (chart, values) = (chart_dir(), values.display().to_string());
    let chart = chart.display().to_string();
    let mut args = vec![
        "template",
        release,
        &chart,
        "--namespace",
        namespace,
        "-f",
        &values,
    ];
    args.extend(extra);
    helm(home, &args).await
}

/// Parses multi-document YAML, leaving out empty documents.
pub fn parse(yaml: &str) -> Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).context("parsing manifests")?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// What the roles among `docs` grant, without their names: for each Role and ClusterRole,
/// `<kind> <namespace>: <rules>` followed by the subjects of the bindings that refer to it,
/// with every list sorted. Two sets of manifests that grant the same to the same
/// ServiceAccounts give the same lines.
pub fn grants(docs: &[Value]) -> Vec<String> {
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let sorted = |v: &Value| {
        let mut items: Vec<String> = v
            .as_array()
            .map(|a| a.iter().map(str_of).collect())
            .unwrap_or_default();
        items.sort();
        items.join(",")
    };
    let mut subjects: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for b in docs.iter().filter(|d| {
        matches!(
            d["kind"].as_str(),
            Some("RoleBinding" | "ClusterRoleBinding")
        )
    }) {
        let ns = str_of(&b["metadata"]["namespace"]);
        let key = (
            str_of(&b["roleRef"]["kind"]),
            ns,
            str_of(&b["roleRef"]["name"]),
        );
        for s in b["subjects"].as_array().into_iter().flatten() {
            subjects.entry(key.clone()).or_default().push(format!(
                "{} {}/{}",
                str_of(&s["kind"]),
                str_of(&s["namespace"]),
                str_of(&s["name"])
            ));
        }
    }
    let mut out: Vec<String> = docs
        .iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("Role" | "ClusterRole")))
        .map(|r| {
            let (kind, ns) = (str_of(&r["kind"]), str_of(&r["metadata"]["namespace"]));
            let mut rules: Vec<String> = r["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|rule| {
                    format!(
                        "[{}] [{}] [{}]",
                        sorted(&rule["apiGroups"]),
                        sorted(&rule["resources"]),
                        sorted(&rule["verbs"])
                    )
                })
                .collect();
            rules.sort();
            let key = (kind.clone(), ns.clone(), str_of(&r["metadata"]["name"]));
            let mut bound = subjects.get(&key).cloned().unwrap_or_default();
            bound.sort();
            format!(
                "{kind} {ns}: {} bound to {}",
                rules.join(" "),
                bound.join(", ")
            )
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(yaml: &str) -> Vec<Value> {
        parse(yaml).unwrap()
    }

    const ROLE: &str = "kind: Role\nmetadata: {name: a, namespace: ns}\nrules:\n\
        - {apiGroups: [''], resources: [secrets], verbs: [watch, list]}\n---\n\
        kind: RoleBinding\nmetadata: {name: a, namespace: ns}\n\
        roleRef: {kind: Role, name: a}\nsubjects: [{kind: ServiceAccount, name: sa, namespace: ns}]\n";

    #[test]
    fn names_and_order_do_not_count() {
        let renamed = ROLE.replace("name: a", "name: b");
        let reordered = renamed.replace("[watch, list]", "[list, watch]");
        assert_eq!(grants(&docs(ROLE)), grants(&docs(&reordered)));
        assert_eq!(
            grants(&docs(ROLE)),
            ["Role ns: [] [secrets] [list,watch] bound to ServiceAccount ns/sa"]
        );
    }

    #[test]
    fn a_verb_a_namespace_or_a_subject_counts() {
        let base = grants(&docs(ROLE));
        for changed in [
            ROLE.replace("[watch, list]", "[watch, list, get]"),
            ROLE.replace("namespace: ns}\nrules", "namespace: other}\nrules"),
            ROLE.replace("name: sa", "name: other"),
            ROLE.replace(
                "roleRef: {kind: Role, name: a}",
                "roleRef: {kind: Role, name: x}",
            ),
        ] {
            assert_ne!(base, grants(&docs(&changed)), "{changed}");
        }
    }
}
