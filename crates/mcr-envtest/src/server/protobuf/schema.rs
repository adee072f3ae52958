//! Field tables of the kinds kubectl's imperative generators send, from the `generated.proto`
//! files of `k8s.io/api` (core/v1, apps/v1, authentication/v1) and `k8s.io/apimachinery`
//! (meta/v1).
//!
//! Only the fields those generators can fill are listed; the converter skips the others.
//! Status messages are left out on purpose: the server ignores status on create.

/// The protobuf shape of a field's value.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ty {
    /// `string`: a JSON string.
    Str,
    /// `bytes`: a base64 JSON string.
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `meta.v1.Time` (`seconds = 1`, `nanos = 2`): an RFC 3339 string.
    Time,
    /// `resource.Quantity` (`string = 1`): a JSON string.
    Quantity,
    /// `intstr.IntOrString` (`type = 1`, `intVal = 2`, `strVal = 3`): a number or a string.
    IntOrString,
    /// An embedded message: a JSON object.
    Msg(&'static Message),
}

/// How often a field occurs and how its zero value is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// A Go value field with `omitempty`: Go's encoder always writes it, JSON drops zero values.
    Plain,
    /// A Go pointer field: written only when set, so a zero value is kept (`immutable: false`).
    Pointer,
    /// `repeated`: a JSON array.
    Repeated,
    /// `map<string, ty>`: repeated entries `{key = 1, value = 2}`, a JSON object.
    Map,
}

/// One field of a message.
#[derive(Debug)]
pub(super) struct Field {
    /// Field number.
    pub(super) number: u32,
    /// JSON name.
    pub(super) json: &'static str,
    /// Value type (the value type for maps).
    pub(super) ty: Ty,
    /// Cardinality.
    pub(super) shape: Shape,
}

/// A message type: its name (for errors) and its known fields.
#[derive(Debug)]
pub(super) struct Message {
    /// Protobuf message name.
    pub(super) name: &'static str,
    /// Known fields; others are skipped.
    pub(super) fields: &'static [Field],
}

impl Message {
    /// The field with this number, if known.
    pub(super) fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

/// The message type of a top-level kind, by `apiVersion` and `kind`.
pub(super) fn lookup(api_version: &str, kind: &str) -> Option<&'static Message> {
    match (api_version, kind) {
        ("v1", "ConfigMap") => Some(&CONFIG_MAP),
        ("v1", "Secret") => Some(&SECRET),
        ("v1", "Namespace") => Some(&NAMESPACE),
        ("v1", "ServiceAccount") => Some(&SERVICE_ACCOUNT),
        ("apps/v1", "Deployment") => Some(&DEPLOYMENT),
        ("authentication.k8s.io/v1", "TokenRequest") => Some(&TOKEN_REQUEST),
        _ => None,
    }
}

const fn f(number: u32, json: &'static str, ty: Ty, shape: Shape) -> Field {
    Field {
        number,
        json,
        ty,
        shape,
    }
}

const fn s(number: u32, json: &'static str) -> Field {
    f(number, json, Ty::Str, Shape::Plain)
}

const META: Field = f(1, "metadata", Ty::Msg(&OBJECT_META), Shape::Plain);

static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        s(1, "name"),
        s(2, "generateName"),
        s(3, "namespace"),
        s(4, "selfLink"),
        s(5, "uid"),
        s(6, "resourceVersion"),
        f(7, "generation", Ty::Int64, Shape::Plain),
        f(8, "creationTimestamp", Ty::Time, Shape::Plain),
        f(9, "deletionTimestamp", Ty::Time, Shape::Pointer),
        f(10, "deletionGracePeriodSeconds", Ty::Int64, Shape::Pointer),
        f(11, "labels", Ty::Str, Shape::Map),
        f(12, "annotations", Ty::Str, Shape::Map),
        f(
            13,
            "ownerReferences",
            Ty::Msg(&OWNER_REFERENCE),
            Shape::Repeated,
        ),
        f(14, "finalizers", Ty::Str, Shape::Repeated),
    ],
};

/// `kubectl create token`'s body (`authentication/v1`).
static TOKEN_REQUEST: Message = Message {
    name: "TokenRequest",
    fields: &[
        META,
        f(2, "spec", Ty::Msg(&TOKEN_REQUEST_SPEC), Shape::Plain),
    ],
};

static TOKEN_REQUEST_SPEC: Message = Message {
    name: "TokenRequestSpec",
    fields: &[
        f(1, "audiences", Ty::Str, Shape::Repeated),
        f(
            3,
            "boundObjectRef",
            Ty::Msg(&BOUND_OBJECT_REFERENCE),
            Shape::Pointer,
        ),
        f(4, "expirationSeconds", Ty::Int64, Shape::Pointer),
    ],
};

static BOUND_OBJECT_REFERENCE: Message = Message {
    name: "BoundObjectReference",
    fields: &[s(1, "kind"), s(2, "apiVersion"), s(3, "name"), s(4, "uid")],
};

static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        s(1, "kind"),
        s(3, "name"),
        s(4, "uid"),
        s(5, "apiVersion"),
        f(6, "controller", Ty::Bool, Shape::Pointer),
        f(7, "blockOwnerDeletion", Ty::Bool, Shape::Pointer),
    ],
};

static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        META,
        f(2, "data", Ty::Str, Shape::Map),
        f(3, "binaryData", Ty::Bytes, Shape::Map),
        f(4, "immutable", Ty::Bool, Shape::Pointer),
    ],
};

static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        META,
        f(2, "data", Ty::Bytes, Shape::Map),
        s(3, "type"),
        f(4, "stringData", Ty::Str, Shape::Map),
        f(5, "immutable", Ty::Bool, Shape::Pointer),
    ],
};

static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[META, f(2, "spec", Ty::Msg(&NAMESPACE_SPEC), Shape::Plain)],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[f(1, "finalizers", Ty::Str, Shape::Repeated)],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        META,
        f(2, "secrets", Ty::Msg(&OBJECT_REFERENCE), Shape::Repeated),
        f(3, "imagePullSecrets", LOCAL_REF, Shape::Repeated),
        f(4, "automountServiceAccountToken", Ty::Bool, Shape::Pointer),
    ],
};

static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        s(1, "kind"),
        s(2, "namespace"),
        s(3, "name"),
        s(4, "uid"),
        s(5, "apiVersion"),
        s(6, "resourceVersion"),
        s(7, "fieldPath"),
    ],
};

const LOCAL_REF: Ty = Ty::Msg(&LOCAL_OBJECT_REFERENCE);

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[s(1, "name")],
};

static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[META, f(2, "spec", Ty::Msg(&DEPLOYMENT_SPEC), Shape::Plain)],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        f(1, "replicas", Ty::Int32, Shape::Pointer),
        f(2, "selector", Ty::Msg(&LABEL_SELECTOR), Shape::Pointer),
        f(3, "template", Ty::Msg(&POD_TEMPLATE_SPEC), Shape::Plain),
        f(4, "strategy", Ty::Msg(&DEPLOYMENT_STRATEGY), Shape::Plain),
        f(5, "minReadySeconds", Ty::Int32, Shape::Plain),
        f(6, "revisionHistoryLimit", Ty::Int32, Shape::Pointer),
        f(7, "paused", Ty::Bool, Shape::Plain),
        f(9, "progressDeadlineSeconds", Ty::Int32, Shape::Pointer),
    ],
};

static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        f(1, "matchLabels", Ty::Str, Shape::Map),
        f(
            2,
            "matchExpressions",
            Ty::Msg(&SELECTOR_REQUIREMENT),
            Shape::Repeated,
        ),
    ],
};

static SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        s(1, "key"),
        s(2, "operator"),
        f(3, "values", Ty::Str, Shape::Repeated),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        s(1, "type"),
        f(2, "rollingUpdate", Ty::Msg(&ROLLING_UPDATE), Shape::Pointer),
    ],
};

static ROLLING_UPDATE: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        f(1, "maxUnavailable", Ty::IntOrString, Shape::Pointer),
        f(2, "maxSurge", Ty::IntOrString, Shape::Pointer),
    ],
};

static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[META, f(2, "spec", Ty::Msg(&POD_SPEC), Shape::Plain)],
};

static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        f(2, "containers", Ty::Msg(&CONTAINER), Shape::Repeated),
        s(3, "restartPolicy"),
        f(
            4,
            "terminationGracePeriodSeconds",
            Ty::Int64,
            Shape::Pointer,
        ),
        s(6, "dnsPolicy"),
        f(7, "nodeSelector", Ty::Str, Shape::Map),
        s(8, "serviceAccountName"),
        s(10, "nodeName"),
        f(11, "hostNetwork", Ty::Bool, Shape::Plain),
        f(15, "imagePullSecrets", LOCAL_REF, Shape::Repeated),
        s(19, "schedulerName"),
        f(20, "initContainers", Ty::Msg(&CONTAINER), Shape::Repeated),
        f(21, "automountServiceAccountToken", Ty::Bool, Shape::Pointer),
        s(24, "priorityClassName"),
    ],
};

static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        s(1, "name"),
        s(2, "image"),
        f(3, "command", Ty::Str, Shape::Repeated),
        f(4, "args", Ty::Str, Shape::Repeated),
        s(5, "workingDir"),
        f(6, "ports", Ty::Msg(&CONTAINER_PORT), Shape::Repeated),
        f(7, "env", Ty::Msg(&ENV_VAR), Shape::Repeated),
        f(8, "resources", Ty::Msg(&RESOURCES), Shape::Plain),
        s(13, "terminationMessagePath"),
        s(14, "imagePullPolicy"),
        f(16, "stdin", Ty::Bool, Shape::Plain),
        f(17, "stdinOnce", Ty::Bool, Shape::Plain),
        f(18, "tty", Ty::Bool, Shape::Plain),
        s(20, "terminationMessagePolicy"),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        s(1, "name"),
        f(2, "hostPort", Ty::Int32, Shape::Plain),
        f(3, "containerPort", Ty::Int32, Shape::Plain),
        s(4, "protocol"),
        s(5, "hostIP"),
    ],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[s(1, "name"), s(2, "value")],
};

static RESOURCES: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        f(1, "limits", Ty::Quantity, Shape::Map),
        f(2, "requests", Ty::Quantity, Shape::Map),
    ],
};
