//! Kubeconfig parsing and the policy checks (exec rules with argument, server and environment
//! patterns, file references, proxies and NO_PROXY matching), through mcr-core's public API.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcr_core::kubeconfig::{self, EnvProxy, ExecPolicy, ExecRule, Policy};

fuzz_target!(|data: &[u8]| {
    let Ok(kc) = kubeconfig::parse(data) else {
        return;
    };
    let mut contexts: Vec<Option<String>> =
        kubeconfig::contexts(&kc).into_iter().map(Some).collect();
    contexts.push(None);
    contexts.push(Some("missing".into()));
    let _ = kubeconfig::current_context(&kc);

    // Patterns taken from the input itself: the first user's exec arguments and the servers,
    // so the fuzzer drives the glob matcher with both pattern and text.
    let exec = kc
        .auth_infos
        .iter()
        .filter_map(|a| a.auth_info.as_ref()?.exec.as_ref())
        .next();
    let args: Vec<String> = exec.and_then(|e| e.args.clone()).unwrap_or_default();
    let servers: Vec<String> = kc
        .clusters
        .iter()
        .filter_map(|c| c.cluster.as_ref()?.server.clone())
        .collect();
    let hosts: Vec<String> = servers
        .iter()
        .map(|s| {
            s.trim_start_matches("https://")
                .replace(['0', 'a', 'e'], "?")
                .replace('.', "*.")
        })
        .collect();
    let env_names: Vec<String> = exec
        .and_then(|e| e.env.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let policies = [
        ExecPolicy::Deny,
        ExecPolicy::AllowAll,
        ExecPolicy::allow(ExecRule::command("aws").any_args().any_server())
            .or_allow(ExecRule::command("/usr/bin/gke-gcloud-auth-plugin").servers(["*.gke.goog"])),
        ExecPolicy::allow(
            ExecRule::command("aws")
                .args(args.clone())
                .servers(servers.clone())
                .kubeconfig_env(env_names.clone()),
        ),
        ExecPolicy::allow(
            ExecRule::command("aws")
                .args_matching(args.iter().map(|a| a.replace('-', "*")))
                .servers(hosts)
                .pass_env(["PATH"]),
        )
        .or_allow(
            ExecRule::command("get-token")
                .args_matching(["*", "?", "*?*"])
                .any_server(),
        ),
    ];
    // NO_PROXY lists from the input: each cluster's proxy-url and the contexts' namespaces.
    let no_proxy: Vec<String> = kc
        .clusters
        .iter()
        .filter_map(|c| c.cluster.as_ref()?.proxy_url.clone())
        .chain(
            kc.contexts
                .iter()
                .filter_map(|c| c.context.as_ref()?.namespace.clone()),
        )
        .collect();
    for list in &no_proxy {
        let proxy = EnvProxy::new("http://proxy:3128").no_proxy(list.clone());
        for server in &servers {
            let _ = proxy.proxy_for(server);
        }
    }
    let mut full = vec![Policy::default(), Policy::trusted()];
    if let Some(list) = no_proxy.first() {
        full.push(
            Policy::default()
                .allow_file_references(true)
                .env_proxy(Some(
                    EnvProxy::new("http://proxy:3128").no_proxy(list.clone()),
                )),
        );
    }
    // Each exec policy alone (files and proxies allowed, so the exec check decides), then
    // the file references (every plugin allowed, files not).
    full.extend(
        policies
            .into_iter()
            .map(|exec| Policy::trusted().exec(exec)),
    );
    full.push(Policy::from(ExecPolicy::AllowAll));
    for context in &contexts {
        let context = context.as_deref();
        for policy in &full {
            let _ = kubeconfig::check_policy(&kc, context, policy);
        }
        let _ = kubeconfig::connection_hash(&kc, context);
    }
});
