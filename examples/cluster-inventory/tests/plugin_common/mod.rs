//! The test plugin, its token files and invocation record, and profiles that point at it.
#![allow(dead_code)]

use mcr_envtest::TestCluster;
use mcr_provider_cluster_inventory::{
    ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, AccessProviders, EXEC_EXTENSION,
};
use serde_json::{Value, json};

pub const PLUGIN: &str = env!("CARGO_BIN_EXE_mcr-inventory-test-plugin");
pub const PROVIDER: &str = "test-tokens";
pub const MARKER: &str = "PLUGIN-OUTPUT-MUST-NOT-LEAK";

/// A directory with one token file per member and the plugin's invocation record.
pub struct Plugin {
    pub dir: tempfile::TempDir,
}

impl Plugin {
    pub fn new(members: &[&TestCluster]) -> Plugin {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tokens")).unwrap();
        for m in members {
            std::fs::write(dir.path().join("tokens").join(m.name()), m.token()).unwrap();
        }
        Plugin { dir }
    }

    pub fn tokens(&self) -> String {
        self.dir.path().join("tokens").display().to_string()
    }

    pub fn record(&self) -> String {
        self.dir.path().join("record.jsonl").display().to_string()
    }

    /// The arguments of the provider file's entry.
    pub fn base_args(&self) -> Vec<String> {
        vec![
            "--token-dir".into(),
            self.tokens(),
            "--record".into(),
            self.record(),
        ]
    }

    /// A provider file with one entry running the test plugin, for servers on 127.0.0.1 (the
    /// test members), whose profiles may set the test's `MCR_PLUGIN_*` variables.
    pub fn file(&self, args_policy: &str, env_policy: &str) -> AccessProviders {
        let file = json!({"providers": [{
            "name": PROVIDER,
            "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": PLUGIN,
                "args": self.base_args(),
                "env": [{"name": "MCR_PLUGIN_FROM_FILE", "value": "file"}],
                "provideClusterInfo": true,
            },
            "profileSourcedCLIArgsPolicy": args_policy,
            "profileSourcedEnvVarsPolicy": env_policy,
        }]});
        let path = self.dir.path().join("provider-file.json");
        std::fs::write(&path, file.to_string()).unwrap();
        AccessProviders::from_file(&path)
            .unwrap()
            .servers(["127.0.0.1"])
            .profile_env(["MCR_PLUGIN_FROM_FILE", "MCR_PLUGIN_EXTRA", "MCR_PLUGIN_X"])
    }

    /// Every recorded plugin run, oldest first (a line still being written is skipped).
    pub fn invocations(&self) -> Vec<Value> {
        std::fs::read_to_string(self.record())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// The `status` fields (besides conditions) of a profile reachable through the test plugin on
/// `member`; `config` becomes the plugin's `spec.cluster.config`.
pub fn access(
    member: &TestCluster,
    config: Value,
    args: Option<Value>,
    envs: Option<Value>,
) -> Value {
    let kc = member.kubeconfig().unwrap();
    let ca = kc.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .certificate_authority_data
        .clone();
    let mut extensions = vec![json!({"name": EXEC_EXTENSION, "extension": config})];
    if let Some(args) = args {
        extensions.push(json!({"name": ADDITIONAL_ARGS_EXTENSION, "extension": args}));
    }
    if let Some(envs) = envs {
        extensions.push(json!({"name": ADDITIONAL_ENVS_EXTENSION, "extension": envs}));
    }
    json!({"accessProviders": [{"name": PROVIDER, "cluster": {
        "server": member.url(),
        "certificate-authority-data": ca,
        "extensions": extensions,
    }}]})
}
