"""A scenario with the official Kubernetes Python client (the `kubernetes` package).

Run by tests/python_client.rs against an mcr-envtest cluster (emulator or kube-apiserver):
    python3 scenario.py <kubeconfig> <namespace>
It exits non-zero, with the failing step, when a request fails or an answer is not what
kube-apiserver gives. No node runs anything, so Pods stay Pending on both servers.
"""

import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

DEADLINE = 60


def step(name):
    print(f"python client: {name}", flush=True)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_status(status, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ApiException as err:
        expect(err.status == status, f"{call.__name__}: {err.status} instead of {status}: {err.body}")
        return
    raise AssertionError(f"{call.__name__}: succeeded instead of {status}")


def pod(name, labels=None):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"app": "py"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="busybox")]),
    )


def main(kubeconfig, ns):
    config.load_kube_config(config_file=kubeconfig)
    api = client.ApiClient()
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    policy = client.PolicyV1Api(api)

    step("namespace")
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    expect(core.read_namespace(ns).status.phase == "Active", "a new namespace is Active")

    step("the kubernetes Service")
    svc = core.read_namespaced_service("kubernetes", "default")
    expect(svc.spec.ports[0].port == 443, f"kubernetes Service port: {svc.spec.ports}")

    step("Pod create, defaults")
    created = core.create_namespaced_pod(ns, pod("web"))
    expect(created.spec.restart_policy == "Always", f"restartPolicy {created.spec.restart_policy}")
    expect(created.spec.dns_policy == "ClusterFirst", f"dnsPolicy {created.spec.dns_policy}")
    expect(created.spec.termination_grace_period_seconds == 30, "terminationGracePeriodSeconds")
    expect(created.status.phase == "Pending", f"phase {created.status.phase}")
    expect_status(409, core.create_namespaced_pod, ns, pod("web"))
    invalid = client.V1Pod(metadata=client.V1ObjectMeta(name="empty"), spec=client.V1PodSpec(containers=[]))
    expect_status(422, core.create_namespaced_pod, ns, invalid)

    step("Pod patch (the client's default patch type) and status")
    patched = core.patch_namespaced_pod("web", ns, {"metadata": {"labels": {"tier": "front"}}})
    expect(patched.metadata.labels == {"app": "py", "tier": "front"}, f"labels {patched.metadata.labels}")
    status = core.patch_namespaced_pod_status(
        "web", ns, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    expect(any(c.type == "Ready" for c in status.status.conditions or []), "status condition")
    after = core.read_namespaced_pod("web", ns)
    expect(after.metadata.labels.get("tier") == "front", "status patch kept the labels")

    step("Pod watch from a resourceVersion")
    rv = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod("worker"))
    seen = []
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=DEADLINE
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if ("ADDED", "worker") in seen:
            w.stop()
    expect(("ADDED", "worker") in seen, f"watch events {seen}")

    step("Pod eviction")
    policy_body = client.V1Eviction(metadata=client.V1ObjectMeta(name="worker", namespace=ns))
    core.create_namespaced_pod_eviction("worker", ns, policy_body)
    gone = time.monotonic() + DEADLINE
    while time.monotonic() < gone:
        try:
            core.read_namespaced_pod("worker", ns)
            time.sleep(0.2)
        except ApiException as err:
            expect(err.status == 404, f"read after eviction: {err.status}")
            break
    else:
        raise AssertionError("the evicted Pod was not deleted")

    step("Services: ClusterIP allocation, defaults, headless")
    service = core.create_namespaced_service(
        ns,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1ServiceSpec(
                selector={"app": "py"}, ports=[client.V1ServicePort(port=80, target_port=8080)]
            ),
        ),
    )
    expect(service.spec.type == "ClusterIP", f"type {service.spec.type}")
    expect(service.spec.cluster_ip not in (None, "", "None"), f"clusterIP {service.spec.cluster_ip}")
    expect(service.spec.ports[0].protocol == "TCP", "port protocol")
    expect(service.spec.session_affinity == "None", "sessionAffinity")
    headless = core.create_namespaced_service(
        ns,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="headless"),
            spec=client.V1ServiceSpec(cluster_ip="None", selector={"app": "py"},
                                      ports=[client.V1ServicePort(port=80)]),
        ),
    )
    expect(headless.spec.cluster_ip == "None", f"headless clusterIP {headless.spec.cluster_ip}")
    names = sorted(s.metadata.name for s in core.list_namespaced_service(ns).items)
    expect(names == ["headless", "web"], f"services {names}")

    step("ServiceAccount token (TokenRequest)")
    core.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="robot")))
    token = core.create_namespaced_service_account_token(
        "robot", ns, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    )
    expect(token.status.token.count(".") == 2, "a JWT-shaped token")
    expect(token.status.expiration_timestamp is not None, "expirationTimestamp")

    step("RBAC: Role, RoleBinding, ClusterRole, ClusterRoleBinding")
    rule = client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch"])
    rbac.create_namespaced_role(ns, client.V1Role(metadata=client.V1ObjectMeta(name="reader"), rules=[rule]))
    subject = client.RbacV1Subject(kind="ServiceAccount", name="robot", namespace=ns)
    rbac.create_namespaced_role_binding(
        ns,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="reader"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="reader"),
            subjects=[subject],
        ),
    )
    binding = rbac.read_namespaced_role_binding("reader", ns)
    expect(binding.subjects[0].name == "robot", "RoleBinding subjects")
    cluster_role = f"{ns}-reader"
    rbac.create_cluster_role(client.V1ClusterRole(metadata=client.V1ObjectMeta(name=cluster_role), rules=[rule]))
    rbac.create_cluster_role_binding(
        client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=cluster_role),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=cluster_role),
            subjects=[subject],
        )
    )
    roles = {r.metadata.name for r in rbac.list_cluster_role().items}
    expect({"cluster-admin", "view", cluster_role} <= roles, "bootstrap and new ClusterRoles listed")
    rbac.delete_cluster_role_binding(cluster_role)
    rbac.delete_cluster_role(cluster_role)
    expect_status(404, rbac.read_cluster_role, cluster_role)

    step("done")


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except (AssertionError, ApiException) as err:
        print(f"python client: FAILED: {err}", file=sys.stderr, flush=True)
        sys.exit(1)
