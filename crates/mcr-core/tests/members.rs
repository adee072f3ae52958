//! `mcr_core::members` against real API servers: hash short-circuit, renewal in place (no
//! relist), replacement, policy denials, per-member backoff, fault isolation, the run guard.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::kubeconfig::{ExecPolicy, ExecRule, Policy};
use mcr_core::members::{
    Connection, Converge, Ensured, Error, Member, Members, MembersOptions, Workers,
};
use mcr_core::{BoxFuture, ClusterName, Engagements};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(30);

fn options() -> MembersOptions {
    MembersOptions {
        probe_timeout: Some(Duration::from_secs(10)),
        sync_timeout: Duration::from_secs(10),
        ..MembersOptions::default()
    }
}

fn connection(yaml: &str) -> Connection {
    Connection::parse(yaml.as_bytes()).unwrap()
}

fn token_kubeconfig(tc: &TestCluster) -> Connection {
    connection(&tc.kubeconfig_yaml().unwrap())
}

#[tokio::test]
async fn unchanged_renewed_in_place_then_replaced_on_server_change() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let member = TestCluster::start_https("member").await.unwrap();
    let other = TestCluster::start_https("other").await.unwrap();
    let minted = |user: &str| {
        let (yaml, _) = member
            .client_certificate_kubeconfig(user, &["system:masters"], Duration::from_secs(600))
            .unwrap();
        connection(&yaml)
    };
    let members = Members::new(options());
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let name = ClusterName::new("one");

    let first = minted("a");
    let added = members.ensure(&token, &name, &first).await.unwrap();
    assert!(matches!(added, Ensured::Added(_)), "{added:?}");
    let id = added.id();
    let again = members.ensure(&token, &name, &first).await.unwrap();
    assert_eq!(again, Ensured::Unchanged(id), "same hash: nothing done");
    assert_eq!(members.unchanged(&name, &first), Some(id));

    let cluster = members.engagements().get(&name).unwrap();
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    let lists = member.request_count("list", "configmaps");

    // New client certificate, then a bearer token: same server and CA, only credentials.
    let renewed = members.ensure(&token, &name, &minted("b")).await.unwrap();
    assert_eq!(renewed, Ensured::Renewed(id), "same instance");
    let renewed = members
        .ensure(&token, &name, &token_kubeconfig(&member))
        .await
        .unwrap();
    assert_eq!(renewed, Ensured::Renewed(id));
    assert_eq!(cluster.credentials().unwrap().status().renewals, 2);
    assert!(
        members
            .engagements()
            .get(&name)
            .unwrap()
            .same_instance(&cluster)
    );
    assert!(registry.get(&name).unwrap().same_instance(&cluster));
    assert_eq!(
        member.request_count("list", "configmaps"),
        lists,
        "no relist"
    );

    // A different server is a new instance.
    let replaced = members
        .ensure(&token, &name, &token_kubeconfig(&other))
        .await
        .unwrap();
    assert!(
        matches!(replaced, Ensured::Replaced(new) if new != id),
        "{replaced:?}"
    );
    assert!(!registry.get(&name).unwrap().same_instance(&cluster));
    token.cancel();
}

#[tokio::test]
async fn not_renewable_connections_are_replaced() {
    let member = TestCluster::start_https("member").await.unwrap();
    let members = Members::new(options());
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let name = ClusterName::new("one");
    let conn = token_kubeconfig(&member).renewable(false);
    let id = members.ensure(&token, &name, &conn).await.unwrap().id();
    let rotated = conn.clone().with_hash("rotated");
    let replaced = members.ensure(&token, &name, &rotated).await.unwrap();
    assert!(
        matches!(replaced, Ensured::Replaced(new) if new != id),
        "{replaced:?}"
    );
    token.cancel();
}

#[tokio::test]
async fn policy_denials_are_classified_and_not_retryable() {
    let member = TestCluster::start_https("member").await.unwrap();
    let kc = member.kubeconfig().unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let (server, ca) = (
        cluster.server.unwrap(),
        cluster.certificate_authority_data.unwrap(),
    );
    let with_user = |user: &str| {
        connection(&format!(
            "clusters: [{{name: c, cluster: {{server: \"{server}\", certificate-authority-data: \"{ca}\"}}}}]\n\
             users: [{{name: u, user: {user}}}]\n\
             contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
        ))
    };
    let exec = with_user(
        "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true, interactiveMode: Never}}",
    );
    let auth_provider = with_user("{auth-provider: {name: gcp}}");
    let file = with_user("{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}");
    let proxy = connection(&format!(
        "clusters: [{{name: c, cluster: {{server: \"{server}\", certificate-authority-data: \"{ca}\", proxy-url: \"http://proxy.example:3128\"}}}}]\n\
         users: [{{name: u, user: {{token: abc}}}}]\n\
         contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
    ));
    // A per-member policy allowing the command only for another server refuses it here too.
    let pinned = with_user(
        "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true, interactiveMode: Never}}",
    )
    .with_policy(Policy::default().exec(ExecPolicy::allow(
        ExecRule::command("/bin/true").servers(["elsewhere.example"]),
    )));
    // The members' policy is the default one: no plugins, files or proxies.
    let members = Members::new(options());
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    for (what, conn) in [
        ("exec", exec),
        ("auth-provider", auth_provider),
        ("file", file),
        ("proxy", proxy),
        ("pinned", pinned),
    ] {
        let err = members
            .ensure(&token, &ClusterName::new(what), &conn)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::PolicyDenied { .. }), "{what}: {err}");
        assert!(!err.is_retryable(), "{what}");
        assert_eq!(err.cluster().as_str(), what);
    }
    assert!(registry.names().is_empty());
}

#[tokio::test]
async fn a_rotation_the_policy_refuses_is_not_renewed_in_place() {
    let member = TestCluster::start_https("member").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, member.token()).unwrap();
    // The same kubeconfig with its token read from a file: only the credentials changed.
    let mut kc = member.kubeconfig().unwrap();
    for user in kc
        .auth_infos
        .iter_mut()
        .filter_map(|u| u.auth_info.as_mut())
    {
        user.token = None;
        user.token_file = Some(token_file.display().to_string());
    }
    let rotated = Connection::new(kc, None).unwrap();
    let members = Members::new(options());
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let name = ClusterName::new("one");
    let id = members
        .ensure(&token, &name, &token_kubeconfig(&member))
        .await
        .unwrap()
        .id();

    let err = members.ensure(&token, &name, &rotated).await.unwrap_err();
    assert!(matches!(err, Error::PolicyDenied { .. }), "{err}");
    assert_eq!(
        registry.get(&name).unwrap().id(),
        id,
        "the old instance stays"
    );
    assert!(members.unchanged(&name, &rotated).is_none());

    // The same rotation under a policy allowing file references is renewed in place.
    let allowed = rotated.with_policy(Policy::default().allow_file_references(true));
    let renewed = members.ensure(&token, &name, &allowed).await.unwrap();
    assert_eq!(renewed, Ensured::Renewed(id));
    token.cancel();
}

/// Records every attempt and failure per name.
#[derive(Default)]
struct Recorder {
    attempts: Mutex<BTreeMap<String, u32>>,
    retries: Mutex<BTreeMap<String, Vec<Option<Duration>>>>,
}

impl Recorder {
    fn retries(&self, name: &str) -> Vec<Option<Duration>> {
        self.retries
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .unwrap_or_default()
    }
}

#[derive(Clone, Default)]
struct Shared(Arc<Recorder>);

impl Converge for Shared {
    type Desired = Arc<str>;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Arc<str>>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            *self
                .0
                .attempts
                .lock()
                .unwrap()
                .entry(member.name().to_string())
                .or_default() += 1;
            member.ensure(&connection(member.desired())).await.map(drop)
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Arc<str>>, _error: &Error, retry_in: Option<Duration>) {
        let mut retries = self.0.retries.lock().unwrap();
        retries
            .entry(member.name().to_string())
            .or_default()
            .push(retry_in);
    }
}

fn unreachable_kubeconfig(server: &str) -> Arc<str> {
    Arc::from(format!(
        "clusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
         contexts: [{{name: x, context: {{cluster: c}}}}]\ncurrent-context: x\n"
    ))
}

#[tokio::test]
async fn each_member_backs_off_on_its_own_and_a_new_desired_state_resets_it() {
    let members = Members::new(MembersOptions {
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(80),
        probe_timeout: Some(Duration::from_secs(5)),
        ..options()
    });
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let shared = Shared::default();
    let recorder = shared.0.clone();
    let workers = Workers::new(&members, &token, shared);
    // Port 9 (discard) on localhost refuses connections: every probe fails at once.
    let bad = unreachable_kubeconfig("http://127.0.0.1:9");
    workers.ensure(&"bad-a".into(), bad.clone());
    eventually("five failures of bad-a", DEADLINE, || {
        recorder.retries("bad-a").len() >= 5
    })
    .await;
    let ms = |n| Some(Duration::from_millis(n));
    assert_eq!(
        recorder.retries("bad-a")[..5],
        [ms(20), ms(40), ms(80), ms(80), ms(80)]
    );

    // Another failing member starts its own backoff from the beginning.
    workers.ensure(&"bad-b".into(), bad.clone());
    eventually("two failures of bad-b", DEADLINE, || {
        recorder.retries("bad-b").len() >= 2
    })
    .await;
    assert_eq!(recorder.retries("bad-b")[..2], [ms(20), ms(40)]);

    // A new desired state resets bad-a's backoff.
    let before = recorder.retries("bad-a").len();
    workers.ensure(
        &"bad-a".into(),
        unreachable_kubeconfig("http://127.0.0.2:9"),
    );
    eventually("bad-a retried after the change", DEADLINE, || {
        recorder.retries("bad-a")[before..].contains(&ms(20))
    })
    .await;
    workers.shutdown().await;
    assert!(registry.names().is_empty());
}

#[tokio::test]
async fn a_hung_member_blocks_neither_another_member_nor_shutdown() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let accept = {
        let held = held.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                held.lock().unwrap().push(socket);
            }
        })
    };
    let member = TestCluster::start_https("member").await.unwrap();
    let members = Members::new(MembersOptions {
        // Long enough that the hung member stays hung for the whole test.
        probe_timeout: Some(Duration::from_secs(3600)),
        ..options()
    });
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let shared = Shared::default();
    let recorder = shared.0.clone();
    let workers = Workers::new(&members, &token, shared);
    workers.ensure(
        &"hung".into(),
        unreachable_kubeconfig(&format!("http://{addr}")),
    );
    eventually("the hung member connected", DEADLINE, || {
        !held.lock().unwrap().is_empty()
    })
    .await;
    let good: Arc<str> = Arc::from(member.kubeconfig_yaml().unwrap());
    workers.ensure(&"good".into(), good);
    eventually("the good member engaged", DEADLINE, || {
        registry.names() == [ClusterName::new("good")]
    })
    .await;
    assert!(
        recorder.retries("hung").is_empty(),
        "still hung, never failed"
    );

    // Removing a member ends its worker and its cluster.
    workers.remove(&"good".into());
    eventually("good removed", DEADLINE, || registry.names().is_empty()).await;

    // Shutdown does not wait for the hung probe.
    tokio::time::timeout(DEADLINE, workers.shutdown())
        .await
        .expect("shutdown is not held up by a hung member");
    accept.abort();
}

#[tokio::test]
async fn a_second_run_is_refused_and_ending_the_run_removes_every_member() {
    let member = TestCluster::start_https("member").await.unwrap();
    let members = Members::new(options());
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let guard = members.start_run("test").unwrap();
    let err = members.start_run("test").unwrap_err();
    assert!(
        matches!(err, mcr_core::Error::AlreadyRunning { ref provider } if provider == "test"),
        "{err}"
    );
    members
        .ensure(&token, &"one".into(), &token_kubeconfig(&member))
        .await
        .unwrap();
    assert_eq!(members.names(), ["one"]);
    drop(guard);
    assert!(members.names().is_empty(), "the run's members are removed");
    eventually("disengaged", DEADLINE, || registry.names().is_empty()).await;
    let _again = members.start_run("test").unwrap();
}

/// Panics once per name on its first attempt, then brings the member up.
#[derive(Clone, Default)]
struct PanicsOnce(Arc<Mutex<BTreeMap<String, u32>>>);

impl Converge for PanicsOnce {
    type Desired = Arc<str>;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Arc<str>>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let attempt = {
                let mut attempts = self.0.lock().unwrap();
                let n = attempts.entry(member.name().to_string()).or_default();
                *n += 1;
                *n
            };
            if attempt == 1 {
                panic!("a provider bug on outside input");
            }
            member.ensure(&connection(member.desired())).await.map(drop)
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, _: &Member<Arc<str>>, _: &Error, _: Option<Duration>) {}
}

/// A provider's attempt that panics costs that member one retry with backoff, reported in its
/// status; the worker, and so the member, is not lost.
#[tokio::test]
async fn a_panicking_attempt_is_retried_and_reported() {
    let tc = TestCluster::start_https("panicky").await.unwrap();
    let members = Members::new(MembersOptions {
        // Long enough to see the failure reported before the retry.
        backoff_initial: Duration::from_millis(500),
        ..options()
    });
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let reconcile = PanicsOnce::default();
    let workers = Workers::new(&members, &token, reconcile.clone());
    let kubeconfig: Arc<str> = Arc::from(tc.kubeconfig_yaml().unwrap());
    workers.ensure(&"panicky".into(), kubeconfig);
    eventually("the panic reported as the member's failure", DEADLINE, || {
        members.member_statuses().iter().any(|s| {
            matches!(&s.state, mcr_core::MemberState::Failed { reason, retry_in: Some(_) }
                if reason.contains("panicked") && reason.contains("a provider bug on outside input"))
        })
    })
    .await;
    eventually("engaged after the panic", DEADLINE, || {
        registry.names() == [ClusterName::new("panicky")]
    })
    .await;
    assert_eq!(reconcile.0.lock().unwrap().get("panicky"), Some(&2));
    workers.shutdown().await;
    token.cancel();
}
