//! Kubeconfig parsing and the policy checks, through mcr-core's public API.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcr_core::kubeconfig::{self, ExecPolicy};

fuzz_target!(|data: &[u8]| {
    let Ok(kc) = kubeconfig::parse(data) else {
        return;
    };
    let mut contexts: Vec<Option<String>> =
        kubeconfig::contexts(&kc).into_iter().map(Some).collect();
    contexts.push(None);
    contexts.push(Some("missing".into()));
    let _ = kubeconfig::current_context(&kc);
    let policies = [
        ExecPolicy::Deny,
        ExecPolicy::AllowAll,
        ExecPolicy::AllowCommands(vec!["aws".into(), "/usr/bin/gke-gcloud-auth-plugin".into()]),
    ];
    for context in &contexts {
        let context = context.as_deref();
        for policy in &policies {
            let _ = kubeconfig::check_exec_policy(&kc, context, policy);
        }
        let _ = kubeconfig::check_file_references(&kc, context);
        let _ = kubeconfig::connection_hash(&kc, context);
    }
});
