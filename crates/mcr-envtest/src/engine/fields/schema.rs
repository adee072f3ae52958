//! What server-side apply needs to know of a type: which object keys are named fields and
//! which are map keys, which maps are atomic, and whether a list is atomic, a set or keyed.
//!
//! Built-in types get a description of the parts that matter (maps, keyed lists, atomic
//! structs); any other object in them is a struct whose keys are named fields and any other
//! list is atomic, as in their OpenAPI. Custom resources get theirs from the CRD's
//! `openAPIV3Schema` (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`, `x-kubernetes-preserve-unknown-fields`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// The shape of a value.
#[derive(Debug)]
pub(crate) enum Schema {
    /// A leaf.
    Scalar,
    /// An object: named fields, and the type of any other key.
    Map(MapSchema),
    /// A list.
    List(ListSchema),
    /// A built-in struct not described further: keys are named fields of the same kind, lists
    /// atomic.
    Struct,
    /// No schema (`x-kubernetes-preserve-unknown-fields`): objects are granular maps, lists
    /// atomic.
    Deduced,
}

/// An object.
#[derive(Debug, Default)]
pub(crate) struct MapSchema {
    /// Named fields.
    pub fields: BTreeMap<String, Arc<Schema>>,
    /// The type of keys that are not named fields (`None`: they are named fields of type
    /// [`Schema::Struct`]).
    pub elem: Option<Arc<Schema>>,
    /// Owned as a whole (`x-kubernetes-map-type: atomic`, `+structType=atomic`).
    pub atomic: bool,
}

/// A list.
#[derive(Debug)]
pub(crate) struct ListSchema {
    /// The item type.
    pub elem: Arc<Schema>,
    /// How items are told apart.
    pub kind: ListKind,
}

/// `x-kubernetes-list-type`.
#[derive(Debug)]
pub(crate) enum ListKind {
    /// Owned as a whole.
    Atomic,
    /// Scalar items, each owned by value.
    Set,
    /// Object items, each owned by its key fields (with their defaults).
    Map(Vec<(String, Option<Value>)>),
}

/// What a value is, given its schema.
pub(crate) enum Shape<'a> {
    /// A scalar, or anything owned as one value.
    Leaf,
    /// An object, owned key by key unless atomic.
    Map { atomic: bool },
    /// A list: its item type, and how items are told apart (`None`: atomic).
    List {
        elem: Arc<Schema>,
        kind: Option<&'a ListKind>,
    },
}

impl Schema {
    /// The shape of `value` (or of whatever this schema holds when `value` is `None`).
    pub(crate) fn shape(&self, value: Option<&Value>) -> Shape<'_> {
        match self {
            Schema::Scalar => Shape::Leaf,
            Schema::Map(m) => Shape::Map { atomic: m.atomic },
            Schema::List(l) => Shape::List {
                elem: l.elem.clone(),
                kind: Some(&l.kind),
            },
            Schema::Struct | Schema::Deduced => match value {
                Some(Value::Object(_)) => Shape::Map { atomic: false },
                Some(Value::Array(_)) => Shape::List {
                    elem: deduced(),
                    kind: None,
                },
                _ => Shape::Leaf,
            },
        }
    }

    /// The schema of key `key` of an object of this schema, and whether it is a named field.
    pub(crate) fn field(&self, key: &str) -> (Arc<Schema>, bool) {
        match self {
            Schema::Map(m) => match (m.fields.get(key), &m.elem) {
                (Some(s), _) => (s.clone(), true),
                (None, Some(elem)) => (elem.clone(), false),
                (None, None) => (structure(), true),
            },
            Schema::Struct => (structure(), true),
            _ => (deduced(), false),
        }
    }

    /// The schema of a list item.
    pub(crate) fn item(&self) -> Arc<Schema> {
        match self {
            Schema::List(l) => l.elem.clone(),
            _ => deduced(),
        }
    }
}

fn deduced() -> Arc<Schema> {
    static S: OnceLock<Arc<Schema>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Schema::Deduced)).clone()
}

fn structure() -> Arc<Schema> {
    static S: OnceLock<Arc<Schema>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Schema::Struct)).clone()
}

fn scalar() -> Arc<Schema> {
    Arc::new(Schema::Scalar)
}

fn strings() -> Arc<Schema> {
    Arc::new(Schema::Map(MapSchema {
        elem: Some(scalar()),
        ..Default::default()
    }))
}

fn object(fields: Vec<(&str, Arc<Schema>)>) -> Arc<Schema> {
    Arc::new(Schema::Map(MapSchema {
        fields: fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        ..Default::default()
    }))
}

fn atomic_struct() -> Arc<Schema> {
    Arc::new(Schema::Map(MapSchema {
        atomic: true,
        ..Default::default()
    }))
}

fn keyed(keys: &[&str], elem: Arc<Schema>) -> Arc<Schema> {
    keyed_with_defaults(keys.iter().map(|k| (*k, None)).collect(), elem)
}

fn keyed_with_defaults(keys: Vec<(&str, Option<Value>)>, elem: Arc<Schema>) -> Arc<Schema> {
    Arc::new(Schema::List(ListSchema {
        elem,
        kind: ListKind::Map(keys.into_iter().map(|(k, d)| (k.to_string(), d)).collect()),
    }))
}

fn set_of_strings() -> Arc<Schema> {
    Arc::new(Schema::List(ListSchema {
        elem: scalar(),
        kind: ListKind::Set,
    }))
}

/// `ObjectMeta`.
fn object_meta() -> Arc<Schema> {
    object(vec![
        ("labels", strings()),
        ("annotations", strings()),
        ("finalizers", set_of_strings()),
        ("ownerReferences", keyed(&["uid"], atomic_struct())),
    ])
}

fn container() -> Arc<Schema> {
    object(vec![
        ("env", keyed(&["name"], structure())),
        (
            "ports",
            keyed_with_defaults(
                vec![
                    ("containerPort", None),
                    ("protocol", Some(Value::String("TCP".into()))),
                ],
                structure(),
            ),
        ),
        ("volumeMounts", keyed(&["mountPath"], structure())),
        ("volumeDevices", keyed(&["devicePath"], structure())),
        (
            "resources",
            object(vec![
                ("limits", strings()),
                ("requests", strings()),
                ("claims", keyed(&["name"], structure())),
            ]),
        ),
    ])
}

fn pod_template() -> Arc<Schema> {
    let pod_spec = object(vec![
        ("containers", keyed(&["name"], container())),
        ("initContainers", keyed(&["name"], container())),
        ("ephemeralContainers", keyed(&["name"], container())),
        ("volumes", keyed(&["name"], structure())),
        ("imagePullSecrets", keyed(&["name"], atomic_struct())),
        ("hostAliases", keyed(&["ip"], structure())),
        (
            "topologySpreadConstraints",
            keyed(&["topologyKey", "whenUnsatisfiable"], structure()),
        ),
        ("resourceClaims", keyed(&["name"], structure())),
        ("schedulingGates", keyed(&["name"], structure())),
        ("nodeSelector", strings()),
        ("overhead", strings()),
    ]);
    object(vec![("metadata", object_meta()), ("spec", pod_spec)])
}

/// `schema` (an object) with a `status` of these fields.
fn with_status(schema: &Arc<Schema>, status: Vec<(&str, Arc<Schema>)>) -> Arc<Schema> {
    let Schema::Map(m) = schema.as_ref() else {
        return schema.clone();
    };
    let mut fields: Vec<(&str, Arc<Schema>)> = m
        .fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    fields.push(("status", object(status)));
    object(fields)
}

fn workload(status: Vec<(&str, Arc<Schema>)>) -> Arc<Schema> {
    let mut status = status;
    status.push(("conditions", keyed(&["type"], structure())));
    object(vec![
        ("metadata", object_meta()),
        (
            "spec",
            object(vec![
                ("selector", atomic_struct()),
                ("template", pod_template()),
            ]),
        ),
        ("status", object(status)),
    ])
}

/// The schema of a built-in kind (any kind not listed is a struct with `ObjectMeta`).
pub(crate) fn builtin(kind: &str) -> Arc<Schema> {
    static CACHE: OnceLock<BTreeMap<&'static str, Arc<Schema>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let mut m = BTreeMap::new();
        m.insert(
            "ConfigMap",
            object(vec![
                ("metadata", object_meta()),
                ("data", strings()),
                ("binaryData", strings()),
            ]),
        );
        m.insert(
            "Secret",
            object(vec![
                ("metadata", object_meta()),
                ("data", strings()),
                ("stringData", strings()),
            ]),
        );
        for kind in ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"] {
            m.insert(kind, workload(vec![]));
        }
        let conditions = || ("conditions", keyed(&["type"], structure()));
        let pod = pod_template();
        m.insert("Pod", with_status(&pod, vec![conditions()]));
        m.insert(
            "PodTemplate",
            object(vec![("metadata", object_meta()), ("template", pod.clone())]),
        );
        m.insert(
            "ReplicationController",
            object(vec![
                ("metadata", object_meta()),
                (
                    "spec",
                    object(vec![
                        ("selector", atomic_struct()),
                        ("template", pod.clone()),
                    ]),
                ),
                ("status", object(vec![conditions()])),
            ]),
        );
        let job_spec = || {
            object(vec![
                ("selector", atomic_struct()),
                ("template", pod_template()),
            ])
        };
        m.insert(
            "Job",
            object(vec![
                ("metadata", object_meta()),
                ("spec", job_spec()),
                ("status", object(vec![conditions()])),
            ]),
        );
        m.insert(
            "CronJob",
            object(vec![
                ("metadata", object_meta()),
                (
                    "spec",
                    object(vec![(
                        "jobTemplate",
                        object(vec![("metadata", object_meta()), ("spec", job_spec())]),
                    )]),
                ),
            ]),
        );
        m.insert(
            "Service",
            object(vec![
                ("metadata", object_meta()),
                (
                    "spec",
                    object(vec![
                        ("selector", atomic_struct()),
                        (
                            "ports",
                            keyed_with_defaults(
                                vec![
                                    ("port", None),
                                    ("protocol", Some(Value::String("TCP".into()))),
                                ],
                                structure(),
                            ),
                        ),
                    ]),
                ),
                ("status", object(vec![conditions()])),
            ]),
        );
        let binding = || {
            object(vec![
                ("metadata", object_meta()),
                ("roleRef", atomic_struct()),
            ])
        };
        m.insert("RoleBinding", binding());
        m.insert("ClusterRoleBinding", binding());
        m.insert(
            "PodDisruptionBudget",
            object(vec![
                ("metadata", object_meta()),
                ("spec", object(vec![("selector", atomic_struct())])),
                (
                    "status",
                    object(vec![conditions(), ("disruptedPods", strings())]),
                ),
            ]),
        );
        let backend = || object(vec![("service", object(vec![("port", atomic_struct())]))]);
        m.insert(
            "Ingress",
            object(vec![
                ("metadata", object_meta()),
                ("spec", object(vec![("defaultBackend", backend())])),
            ]),
        );
        m.insert(
            "NetworkPolicy",
            object(vec![
                ("metadata", object_meta()),
                ("spec", object(vec![("podSelector", atomic_struct())])),
            ]),
        );
        m.insert(
            "Namespace",
            object(vec![
                ("metadata", object_meta()),
                (
                    "spec",
                    object(vec![(
                        "finalizers",
                        Arc::new(Schema::List(ListSchema {
                            elem: scalar(),
                            kind: ListKind::Atomic,
                        })),
                    )]),
                ),
                (
                    "status",
                    object(vec![("conditions", keyed(&["type"], structure()))]),
                ),
            ]),
        );
        m.insert(
            "Node",
            object(vec![
                ("metadata", object_meta()),
                ("spec", object(vec![("podCIDRs", set_of_strings())])),
                (
                    "status",
                    object(vec![
                        conditions(),
                        ("capacity", strings()),
                        ("allocatable", strings()),
                    ]),
                ),
            ]),
        );
        m.insert(
            "CertificateSigningRequest",
            object(vec![
                ("metadata", object_meta()),
                ("status", object(vec![conditions()])),
            ]),
        );
        // `data` is a `RawExtension`: owned as one value.
        m.insert(
            "ControllerRevision",
            object(vec![("metadata", object_meta()), ("data", scalar())]),
        );
        m.insert(
            "ServiceAccount",
            object(vec![
                ("metadata", object_meta()),
                ("secrets", keyed(&["name"], structure())),
                ("imagePullSecrets", keyed(&["name"], atomic_struct())),
            ]),
        );
        m
    });
    cache
        .get(kind)
        .cloned()
        .unwrap_or_else(|| object(vec![("metadata", object_meta())]))
}

/// The schema of a custom resource from its version's `openAPIV3Schema`.
pub(crate) fn custom(openapi: Option<&Value>) -> Arc<Schema> {
    let root = match openapi {
        Some(s) => from_openapi(s),
        None => Schema::Deduced,
    };
    let mut map = match root {
        Schema::Map(m) => m,
        _ => MapSchema {
            elem: Some(deduced()),
            ..Default::default()
        },
    };
    map.fields.insert("apiVersion".into(), scalar());
    map.fields.insert("kind".into(), scalar());
    map.fields.insert("metadata".into(), object_meta());
    Arc::new(Schema::Map(map))
}

fn from_openapi(s: &Value) -> Schema {
    let flag = |name: &str| s.get(name).and_then(Value::as_bool) == Some(true);
    if flag("x-kubernetes-int-or-string") {
        return Schema::Scalar;
    }
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let properties = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    if ty == "array" {
        let elem = s
            .get("items")
            .map(|i| Arc::new(from_openapi(i)))
            .unwrap_or_else(deduced);
        let kind = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys = s
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(|k| {
                                let default = s
                                    .pointer(&format!("/items/properties/{k}/default"))
                                    .cloned();
                                (k.to_string(), default)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                ListKind::Map(keys)
            }
            _ => ListKind::Atomic,
        };
        return Schema::List(ListSchema { elem, kind });
    }
    if ty == "object" || properties.is_some() || additional.is_some() || preserve {
        let mut map = MapSchema {
            atomic: s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            ..Default::default()
        };
        for (k, v) in properties.into_iter().flatten() {
            map.fields.insert(k.clone(), Arc::new(from_openapi(v)));
        }
        if flag("x-kubernetes-embedded-resource") {
            map.fields.insert("apiVersion".into(), scalar());
            map.fields.insert("kind".into(), scalar());
            map.fields.insert("metadata".into(), object_meta());
        }
        map.elem = Some(match additional {
            Some(Value::Object(a)) if !a.is_empty() => {
                Arc::new(from_openapi(&Value::Object(a.clone())))
            }
            _ => deduced(),
        });
        return Schema::Map(map);
    }
    Schema::Scalar
}
