//! Members wanted from kubeconfigs, against real API servers: hash short-circuit, renewal in
//! place (no relist), replacement, policy denials, per-member backoff, fault isolation, a
//! panicking source, the run guard.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::kubeconfig::{ExecPolicy, ExecRule, Policy};
use mcr_core::members::{Connection, Members, MembersOptions};
use mcr_core::{
    BoxError, BoxFuture, ClusterId, ClusterName, Connect, Engagements, MemberState, Source,
};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use tokio::time::Instant;
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

/// Wants `conn` under `name` and waits until the member settled: the engaged instance's id.
async fn want(
    members: &Members,
    token: &CancellationToken,
    name: &ClusterName,
    conn: &Connection,
) -> Result<ClusterId, String> {
    members
        .want(token, name, Source::Kubeconfig(conn.clone()))
        .unwrap();
    match members.engagements().until_settled(name).await {
        Some(MemberState::Engaged) => Ok(members.engagements().get(name).unwrap().id()),
        other => Err(format!("{other:?}")),
    }
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
    let id = want(&members, &token, &name, &first).await.unwrap();
    let probes = member.request_count("get", "version");
    let again = want(&members, &token, &name, &first).await.unwrap();
    assert_eq!(again, id, "same hash: nothing done");
    assert_eq!(
        member.request_count("get", "version"),
        probes,
        "no new client"
    );

    let cluster = members.engagements().get(&name).unwrap();
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    let lists = member.request_count("list", "configmaps");

    // New client certificate, then a bearer token: same server and CA, only credentials.
    let renewed = want(&members, &token, &name, &minted("b")).await.unwrap();
    assert_eq!(renewed, id, "same instance");
    let renewed = want(&members, &token, &name, &token_kubeconfig(&member))
        .await
        .unwrap();
    assert_eq!(renewed, id);
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
    let replaced = want(&members, &token, &name, &token_kubeconfig(&other))
        .await
        .unwrap();
    assert_ne!(replaced, id);
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
    let id = want(&members, &token, &name, &conn).await.unwrap();
    let rotated = conn.clone().with_hash("rotated");
    let replaced = want(&members, &token, &name, &rotated).await.unwrap();
    assert_ne!(replaced, id);
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
        let err = want(&members, &token, &ClusterName::new(what), &conn)
            .await
            .unwrap_err();
        // Not retried: no retry scheduled.
        assert!(
            err.contains("refused by policy") && err.contains("retry_in: None"),
            "{what}: {err}"
        );
        assert!(
            err.contains(&format!("cluster \\\"{what}\\\"")),
            "{what}: {err}"
        );
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
    let id = want(&members, &token, &name, &token_kubeconfig(&member))
        .await
        .unwrap();

    let err = want(&members, &token, &name, &rotated).await.unwrap_err();
    assert!(err.contains("refused by policy"), "{err}");
    assert_eq!(
        registry.get(&name).unwrap().id(),
        id,
        "the old instance stays"
    );

    // The same rotation under a policy allowing file references is renewed in place.
    let allowed = rotated.with_policy(Policy::default().allow_file_references(true));
    let renewed = want(&members, &token, &name, &allowed).await.unwrap();
    assert_eq!(renewed, id, "renewed in place: the same instance");
    token.cancel();
}

/// A source that counts its attempts (with their virtual time), fails the first
/// `panics` of them with a panic, and answers `kubeconfig`.
struct Counted {
    key: String,
    kubeconfig: Arc<str>,
    panics: u32,
    attempts: Arc<Mutex<Vec<Instant>>>,
}

impl Connect for Counted {
    fn key(&self) -> String {
        self.key.clone()
    }

    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Box::pin(async move {
            let attempt = {
                let mut attempts = self.attempts.lock().unwrap();
                attempts.push(Instant::now());
                attempts.len() as u32
            };
            if attempt <= self.panics {
                panic!("a provider bug on outside input");
            }
            Ok(Source::Kubeconfig(connection(&self.kubeconfig)))
        })
    }
}

fn unreachable_kubeconfig(server: &str) -> Arc<str> {
    Arc::from(format!(
        "clusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
         contexts: [{{name: x, context: {{cluster: c}}}}]\ncurrent-context: x\n"
    ))
}

/// The gaps between consecutive attempts.
fn gaps(attempts: &Mutex<Vec<Instant>>) -> Vec<Duration> {
    let attempts = attempts.lock().unwrap();
    attempts.windows(2).map(|w| w[1] - w[0]).collect()
}

/// A source that always fails at once.
struct Broken;

impl Connect for Broken {
    fn key(&self) -> String {
        "broken".into()
    }
    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Box::pin(async { Err("the credentials service is down".into()) })
    }
}

/// Each member backs off on its own (on a paused clock, so the delays are exact), and a new
/// source starts again from the first delay.
#[tokio::test(start_paused = true)]
async fn each_member_backs_off_on_its_own_and_a_new_source_resets_it() {
    let members = Members::new(MembersOptions {
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(80),
        ..options()
    });
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let attempts: BTreeMap<&str, Arc<Mutex<Vec<Instant>>>> = ["bad-a", "bad-b"]
        .into_iter()
        .map(|name| (name, Arc::new(Mutex::new(Vec::new()))))
        .collect();
    let source = |name: &str| {
        let attempts = attempts[name].clone();
        Source::Connect(Arc::new(Recorded(Broken, attempts)))
    };
    members
        .want(&token, &"bad-a".into(), source("bad-a"))
        .unwrap();
    eventually("six attempts of bad-a", DEADLINE, || {
        attempts["bad-a"].lock().unwrap().len() >= 6
    })
    .await;
    let ms = Duration::from_millis;
    assert_eq!(
        gaps(&attempts["bad-a"])[..5],
        [ms(20), ms(40), ms(80), ms(80), ms(80)]
    );
    let state = members.engagements().member_state(&"bad-a".into());
    assert!(
        matches!(&state, Some(MemberState::Failed { reason, retry_in: Some(_) })
            if reason.contains("the credentials service is down")),
        "{state:?}"
    );

    // Another failing member starts its own backoff from the beginning.
    members
        .want(&token, &"bad-b".into(), source("bad-b"))
        .unwrap();
    eventually("three attempts of bad-b", DEADLINE, || {
        attempts["bad-b"].lock().unwrap().len() >= 3
    })
    .await;
    assert_eq!(gaps(&attempts["bad-b"])[..2], [ms(20), ms(40)]);

    // A new source resets bad-a's backoff.
    let again = Arc::new(Mutex::new(Vec::new()));
    let again_source = Recorded(Broken2, again.clone());
    members
        .want(
            &token,
            &"bad-a".into(),
            Source::Connect(Arc::new(again_source)),
        )
        .unwrap();
    eventually("bad-a tried twice after the change", DEADLINE, || {
        again.lock().unwrap().len() >= 2
    })
    .await;
    assert_eq!(gaps(&again)[0], ms(20));
    token.cancel();
    assert!(registry.names().is_empty());
}

/// [`Broken`] with another key.
struct Broken2;

impl Connect for Broken2 {
    fn key(&self) -> String {
        "broken-2".into()
    }
    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Broken.connect()
    }
}

/// A source that records when it is asked, then asks `S`.
struct Recorded<S>(S, Arc<Mutex<Vec<Instant>>>);

impl<S: Connect> Connect for Recorded<S> {
    fn key(&self) -> String {
        self.0.key()
    }
    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        self.1.lock().unwrap().push(Instant::now());
        self.0.connect()
    }
}

#[tokio::test]
async fn a_hung_member_blocks_neither_another_member_nor_the_end_of_the_run() {
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
    let hung = ClusterName::new("hung");
    let unreachable = connection(&unreachable_kubeconfig(&format!("http://{addr}")));
    members
        .want(&token, &hung, Source::Kubeconfig(unreachable))
        .unwrap();
    eventually("the hung member connected", DEADLINE, || {
        !held.lock().unwrap().is_empty()
    })
    .await;
    let good = ClusterName::new("good");
    want(&members, &token, &good, &token_kubeconfig(&member))
        .await
        .unwrap();
    assert_eq!(registry.names(), std::slice::from_ref(&good));
    assert_eq!(
        members.engagements().member_state(&hung),
        Some(MemberState::Pending),
        "still hung, never failed"
    );

    // Removing a member ends its cluster.
    assert!(members.remove(&good));
    assert!(registry.names().is_empty());

    // The run ends without waiting for the hung probe: its member is gone at once.
    token.cancel();
    assert!(members.member_statuses().is_empty());
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
    want(&members, &token, &"one".into(), &token_kubeconfig(&member))
        .await
        .unwrap();
    assert_eq!(members.engagements().names(), ["one"]);
    drop(guard);
    assert!(
        members.engagements().names().is_empty(),
        "the run's members are removed"
    );
    eventually("disengaged", DEADLINE, || registry.names().is_empty()).await;
    let _again = members.start_run("test").unwrap();
}

/// A source that panics costs that member one attempt, retried with backoff and reported in
/// its status; the member is not lost.
#[tokio::test]
async fn a_panicking_source_is_retried_and_reported() {
    let tc = TestCluster::start_https("panicky").await.unwrap();
    let members = Members::new(MembersOptions {
        // Long enough to see the failure reported before the retry.
        backoff_initial: Duration::from_millis(500),
        ..options()
    });
    let (token, registry) = (CancellationToken::new(), Engagements::new());
    members.bind(&registry).unwrap();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let counted = Arc::new(Counted {
        key: "panicky".into(),
        kubeconfig: Arc::from(tc.kubeconfig_yaml().unwrap()),
        panics: 1,
        attempts: attempts.clone(),
    });
    members
        .want(&token, &"panicky".into(), Source::Connect(counted))
        .unwrap();
    eventually("the panic reported as the member's failure", DEADLINE, || {
        members.member_statuses().iter().any(|s| {
            matches!(&s.state, MemberState::Failed { reason, retry_in: Some(_) }
                if reason.contains("panicked") && reason.contains("a provider bug on outside input"))
        })
    })
    .await;
    eventually("engaged after the panic", DEADLINE, || {
        registry.names() == [ClusterName::new("panicky")]
    })
    .await;
    assert_eq!(attempts.lock().unwrap().len(), 2);
    token.cancel();
}
