//! The document's shared parts: the security scheme, the microversion header, the
//! error envelope and the response schemas, written from the types of `crate::wire`
//! and `allot_client` as they serialize at microversion 1.39 (fields that depend on
//! the microversion are optional).

use serde_json::{json, Map, Value};

/// The provider uuid of the examples (`scripts/fuzz` makes a provider with it, so
/// that the examples reach past "not found").
pub const PROVIDER: &str = "a11070fe-0000-4000-8000-000000000001";

/// The consumer uuid of the examples.
pub const CONSUMER: &str = "a11070fe-0000-4000-8000-000000000002";

pub(super) fn tags() -> Value {
    let tag = |name: &str, description: &str| json!({"name": name, "description": description});
    json!([
        tag("versions", "Version discovery."),
        tag(
            "resource_classes",
            "Placement's resource classes (with allot's metadata)."
        ),
        tag("traits", "Placement's traits."),
        tag(
            "resource_providers",
            "Placement's resource providers, their aggregates and traits."
        ),
        tag("inventories", "Placement's inventories."),
        tag("allocations", "Placement's allocations and the reshaper."),
        tag("usages", "Placement's usages."),
        tag(
            "allocation_candidates",
            "Placement's allocation candidates (allot: weighed)."
        ),
        tag("claims", "allot: pending claims and their totals."),
        tag("server_groups", "allot: server groups kept by the writer."),
        tag("drains", "allot: draining hosts."),
        tag("shapes", "allot: named shapes, the deployment's flavours."),
        tag("extensions", "allot: headroom, explain, class metadata."),
        tag(
            "service",
            "Health check, metrics, status and this document."
        ),
    ])
}

pub(super) fn security() -> Value {
    json!({"token": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Auth-Token",
        "description": "The caller's token, checked as the authentication mode says \
    (docs/api.md, \"Authentication and authorization\"). `keystone`: a Keystone token \
    (`X-Service-Token` too, for a service acting for a user). `tokens`: one of the \
    operator's static tokens. `noauth2` (Placement's test mode): `USER` or `USER:PROJECT`, \
    with the roles in `X-Roles` (comma list; the user `admin` has `admin` without it), \
    `X-Project-Id` overriding the project and `OpenStack-System-Scope: all` for system \
    scope. Missing or not valid: 401; an identity header that cannot be read: 400.",
    }})
}

pub(super) fn parameters() -> Value {
    json!({"OpenStackApiVersion": {
        "name": "OpenStack-API-Version",
        "in": "header",
        "required": true,
        "description": "The microversion asked for. This document describes 1.39; \
    without the header a request is served at 1.0, a malformed version is a 400 and one \
    outside 1.0 to 1.39 a 406. The answer carries the version that answered.",
        "schema": {"type": "string", "enum": ["placement 1.39", "placement latest"]},
        "example": "placement 1.39",
    }})
}

/// A uuid string.
fn uuid() -> Value {
    json!({"type": "string", "format": "uuid"})
}

/// A map of resource class to amount.
fn amounts() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}})
}

/// An object with these properties, all required unless named in `optional`.
fn object(properties: Value, optional: &[&str]) -> Value {
    let required: Vec<&String> = properties
        .as_object()
        .map(|p| {
            p.keys()
                .filter(|k| !optional.contains(&k.as_str()))
                .collect()
        })
        .unwrap_or_default();
    json!({"type": "object", "properties": properties, "required": required})
}

fn list_of(key: &str, item: &str) -> Value {
    object(
        json!({key: {"type": "array", "items": {"$ref": format!("#/components/schemas/{item}")}}}),
        &[],
    )
}

fn nullable(kind: &str) -> Value {
    json!({"type": [kind, "null"]})
}

pub(super) fn schemas() -> Value {
    let mut all = Map::new();
    placement_schemas(&mut all);
    placement_answers(&mut all);
    claim_schemas(&mut all);
    extension_schemas(&mut all);
    Value::Object(all)
}

fn placement_schemas(all: &mut Map<String, Value>) {
    let error = object(
        json!({
            "status": {"type": "integer"},
            "title": {"type": "string"},
            "detail": {"type": "string"},
            "request_id": {"type": "string"},
            "code": {"type": "string"},
            "min_version": {"type": "string"},
            "max_version": {"type": "string"},
        }),
        &["code", "min_version", "max_version"],
    );
    all.insert(
        "Error".into(),
        object(
            json!({"errors": {"type": "array", "minItems": 1, "items": error}}),
            &[],
        ),
    );
    let link = object(
        json!({"href": {"type": "string"}, "rel": {"type": "string"}}),
        &[],
    );
    all.insert("Link".into(), link);
    let links = json!({"type": "array", "items": {"$ref": "#/components/schemas/Link"}});
    let version = object(
        json!({
            "id": {"type": "string"}, "links": links, "max_version": {"type": "string"},
            "min_version": {"type": "string"}, "status": {"type": "string"},
        }),
        &[],
    );
    all.insert(
        "Versions".into(),
        object(
            json!({"versions": {"type": "array", "items": version}}),
            &[],
        ),
    );
    let metadata = object(
        json!({"description": nullable("string"), "display_name": nullable("string"), "units": nullable("string")}),
        &[],
    );
    all.insert("ClassMetadata".into(), metadata);
    let class = object(
        json!({"links": links, "name": {"type": "string"}, "metadata": {"$ref": "#/components/schemas/ClassMetadata"}}),
        &["metadata"],
    );
    all.insert("ResourceClass".into(), class);
    all.insert(
        "ResourceClassList".into(),
        list_of("resource_classes", "ResourceClass"),
    );
    all.insert(
        "TraitList".into(),
        object(
            json!({"traits": {"type": "array", "items": {"type": "string"}}}),
            &[],
        ),
    );
    let provider = object(
        json!({
            "generation": {"type": "integer", "minimum": 0}, "links": links, "name": {"type": "string"},
            "parent_provider_uuid": {"anyOf": [uuid(), {"type": "null"}]},
            "root_provider_uuid": uuid(), "uuid": uuid(),
            "usages": amounts(), "pending": amounts(),
        }),
        &[
            "parent_provider_uuid",
            "root_provider_uuid",
            "usages",
            "pending",
        ],
    );
    all.insert("Provider".into(), provider);
    all.insert(
        "ProviderList".into(),
        list_of("resource_providers", "Provider"),
    );
    let count = json!({"type": "integer", "minimum": 0});
    let fields = json!({
        "allocation_ratio": {"type": "number"}, "max_unit": count, "min_unit": count,
        "reserved": count, "step_size": count, "total": count,
    });
    let mut inventory = fields.clone();
    inventory["resource_provider_generation"] = count.clone();
    all.insert(
        "Inventory".into(),
        object(inventory, &["resource_provider_generation"]),
    );
    let inventories = json!({"type": "object", "additionalProperties": object(fields, &[])});
    all.insert(
        "InventoryList".into(),
        object(
            json!({"inventories": inventories, "resource_provider_generation": count}),
            &[],
        ),
    );
}

fn placement_answers(all: &mut Map<String, Value>) {
    let generation = json!({"type": "integer", "minimum": 0});
    let uuids = json!({"type": "array", "items": uuid()});
    all.insert(
        "ProviderAggregates".into(),
        object(
            json!({"aggregates": uuids, "resource_provider_generation": generation}),
            &["resource_provider_generation"],
        ),
    );
    let names = json!({"type": "array", "items": {"type": "string"}});
    all.insert(
        "ProviderTraits".into(),
        object(
            json!({"traits": names, "resource_provider_generation": generation}),
            &[],
        ),
    );
    all.insert(
        "ProviderUsages".into(),
        object(
            json!({"usages": amounts(), "resource_provider_generation": generation}),
            &[],
        ),
    );
    let held = object(
        json!({"resources": amounts(), "consumer_generation": generation}),
        &["consumer_generation"],
    );
    let by_consumer = json!({"type": "object", "additionalProperties": held});
    all.insert(
        "ProviderAllocations".into(),
        object(
            json!({"allocations": by_consumer, "resource_provider_generation": generation}),
            &[],
        ),
    );
    let on_provider = object(
        json!({"generation": generation, "resources": amounts()}),
        &[],
    );
    all.insert(
        "ConsumerAllocations".into(),
        object(
            json!({
                "allocations": {"type": "object", "additionalProperties": on_provider},
                "project_id": {"type": "string"}, "user_id": {"type": "string"},
                "consumer_generation": generation, "consumer_type": {"type": "string"},
            }),
            &[
                "project_id",
                "user_id",
                "consumer_generation",
                "consumer_type",
            ],
        ),
    );
    let by_type = object(
        json!({"consumer_count": {"type": "integer", "minimum": 0}}),
        &[],
    );
    let mut by_type = by_type;
    by_type["additionalProperties"] = json!({"type": "integer", "minimum": 0});
    all.insert(
        "Usages".into(),
        object(
            json!({"usages": {"type": "object", "additionalProperties": by_type}}),
            &[],
        ),
    );
    all.insert("AllocationCandidates".into(), candidates());
}

fn candidates() -> Value {
    let resources = object(json!({"resources": amounts()}), &[]);
    let request = object(
        json!({
            "allocations": {"type": "object", "additionalProperties": resources},
            "mappings": {"type": "object", "additionalProperties": {"type": "array", "items": uuid()}},
        }),
        &["mappings"],
    );
    let room = object(
        json!({"capacity": {"type": "integer"}, "used": {"type": "integer", "minimum": 0}}),
        &[],
    );
    let summary = object(
        json!({
            "resources": {"type": "object", "additionalProperties": room},
            "traits": {"type": "array", "items": {"type": "string"}},
            "parent_provider_uuid": {"anyOf": [uuid(), {"type": "null"}]},
            "root_provider_uuid": uuid(),
        }),
        &["traits", "parent_provider_uuid", "root_provider_uuid"],
    );
    object(
        json!({
            "allocation_requests": {"type": "array", "items": request},
            "provider_summaries": {"type": "object", "additionalProperties": summary},
        }),
        &[],
    )
}

fn claim_schemas(all: &mut Map<String, Value>) {
    let resources = object(json!({"resources": amounts()}), &[]);
    let claim = object(
        json!({
            "allocations": {"type": "object", "additionalProperties": resources},
            "consumer_type": nullable("string"), "consumer_uuid": uuid(),
            "created_at": {"type": "string"}, "ended_at": nullable("string"),
            "expires_at": nullable("string"), "project_id": {"type": "string"},
            "state": {"type": "string", "enum": ["pending", "confirmed", "released", "expired"]},
            "tag": nullable("string"), "user_id": {"type": "string"}, "uuid": uuid(),
            "soft_rules_broken": {"$ref": "#/components/schemas/SoftRulesBroken"},
        }),
        &["soft_rules_broken"],
    );
    all.insert("Claim".into(), claim);
    all.insert("ClaimList".into(), list_of("claims", "Claim"));
    let broken = object(
        json!({"consumer_uuid": uuid(), "server_group": uuid()}),
        &[],
    );
    all.insert(
        "SoftRulesBroken".into(),
        json!({"type": "array", "items": broken}),
    );
    all.insert(
        "Placed".into(),
        object(
            json!({
                "claims": {"type": "array", "items": {"$ref": "#/components/schemas/Claim"}},
                "unplaced": {"type": "array", "items": uuid()},
                "soft_rules_broken": {"$ref": "#/components/schemas/SoftRulesBroken"},
            }),
            &["soft_rules_broken"],
        ),
    );
    all.insert(
        "Pending".into(),
        object(
            json!({"pending": amounts(), "consumers": {"type": "object", "additionalProperties": amounts()}}),
            &["consumers"],
        ),
    );
    all.insert(
        "PendingByRoot".into(),
        object(
            json!({"roots": {"type": "object", "additionalProperties": amounts()}}),
            &[],
        ),
    );
    holder_schemas(all);
}

/// `GET /consumers` and the audit's answers.
fn holder_schemas(all: &mut Map<String, Value>) {
    let holder = object(
        json!({
            "allocations": amounts(), "consumer_generation": nullable("integer"),
            "consumer_type": nullable("string"), "consumer_uuid": uuid(),
            "created_at": nullable("string"), "pending": amounts(),
            "project_id": {"type": "string"},
            "resource_providers": {"type": "array", "items": uuid()},
            "updated_at": nullable("string"), "user_id": {"type": "string"},
        }),
        &[],
    );
    all.insert("Consumer".into(), holder);
    all.insert("ConsumerList".into(), list_of("consumers", "Consumer"));
    all.insert(
        "AuditReport".into(),
        object(
            json!({
                "consumers_in_range": {"type": "integer", "minimum": 0},
                "leaked": {"type": "array", "items": {"$ref": "#/components/schemas/Consumer"}},
            }),
            &[],
        ),
    );
    let left = object(
        json!({"consumer_uuid": uuid(), "reason": {"type": "string", "enum": [
            "gone", "changed", "newer_than_list", "live_claims", "consumer_type"]}}),
        &[],
    );
    all.insert(
        "Removed".into(),
        object(
            json!({"left": {"type": "array", "items": left}, "removed": {"type": "array", "items": uuid()}}),
            &[],
        ),
    );
}

fn extension_schemas(all: &mut Map<String, Value>) {
    let counts =
        json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}});
    all.insert(
        "Headroom".into(),
        object(
            json!({"headroom": {"type": "integer", "minimum": 0}, "groups": counts}),
            &["groups"],
        ),
    );
    all.insert("Explanation".into(), explanation());
    let place = object(
        json!({"roots": {"type": "array", "items": uuid()}, "domains": {"type": "array", "items": {"type": "string"}}}),
        &[],
    );
    let group = object(
        json!({
            "created_at": {"type": "string"}, "enforce_on_allocations": {"type": "boolean"},
            "members": {"type": "array", "items": uuid()}, "name": {"type": "string"},
            "policy": {"type": "string"}, "project_id": {"type": "string"},
            "rules": {"type": "object", "properties": {"max_server_per_host": {"type": "integer"}}},
            "scope": {"type": "string"}, "updated_at": {"type": "string"},
            "user_id": {"type": "string"}, "uuid": uuid(),
            "violations": {"type": "integer", "minimum": 0},
            "placement": {"type": "object", "additionalProperties": place},
        }),
        &["violations", "placement"],
    );
    all.insert("ServerGroup".into(), group);
    all.insert(
        "ServerGroupList".into(),
        list_of("server_groups", "ServerGroup"),
    );
    let unplaced = object(
        json!({"consumer_uuid": uuid(), "reason": {"type": "string"}}),
        &[],
    );
    let drain = object(
        json!({
            "claims": {"type": "array", "items": {"$ref": "#/components/schemas/Claim"}},
            "created_at": {"type": "string"}, "disabled": {"type": "array", "items": uuid()},
            "ended_at": nullable("string"), "roots": {"type": "array", "items": uuid()},
            "state": {"type": "string"}, "unplaced": {"type": "array", "items": unplaced},
            "uuid": uuid(),
        }),
        &["unplaced"],
    );
    all.insert("Drain".into(), drain);
    all.insert("DrainList".into(), list_of("drains", "Drain"));
    all.insert("DryRun".into(), dry_run());
    all.insert(
        "Shape".into(),
        object(
            json!({"created_at": {"type": "string"}, "name": {"type": "string"}, "request": {"type": "string"}, "updated_at": {"type": "string"}}),
            &[],
        ),
    );
    all.insert("ShapeList".into(), list_of("shapes", "Shape"));
    all.insert("Status".into(), status());
    all.insert(
        "HealthReasons".into(),
        json!({"type": "object", "minProperties": 1}),
    );
    all.insert(
        "OpenApiDocument".into(),
        object(json!({"openapi": {"type": "string"}, "info": {"type": "object"}, "paths": {"type": "object"}}), &[]),
    );
}

fn explanation() -> Value {
    let n = json!({"type": "integer", "minimum": 0});
    let stage = object(json!({"stage": {"type": "string"}, "providers": n}), &[]);
    let miss = object(
        json!({"resource_provider": uuid(), "resource_class": {"type": "string"}, "short_by": n}),
        &[],
    );
    let group = object(
        json!({
            "suffix": {"type": "string"},
            "stages": {"type": "array", "items": stage},
            "nearest": {"type": "array", "items": miss},
        }),
        &[],
    );
    object(
        json!({
            "groups": {"type": "array", "items": group}, "roots": n, "roots_allowed": n,
            "allocation_candidates": n, "emptied_by": nullable("string"),
        }),
        &[],
    )
}

fn dry_run() -> Value {
    let n = json!({"type": "integer", "minimum": 0});
    let holder = object(json!({"consumer_uuid": uuid(), "used": n}), &[]);
    let provider = object(json!({"name": {"type": "string"}, "uuid": uuid()}), &[]);
    let over = object(
        json!({
            "capacity": {"type": "integer"},
            "consumers": {"type": "array", "items": holder},
            "over": n, "resource_class": {"type": "string"},
            "resource_provider": provider, "used": n,
        }),
        &[],
    );
    object(
        json!({
            "errors": {"type": "array", "items": {"type": "object"}},
            "over_capacity": {"type": "array", "items": over},
            "status": {"type": "integer"},
        }),
        &["errors"],
    )
}

fn status() -> Value {
    let n = json!({"type": "integer", "minimum": 0});
    let seconds = json!({"type": "number"});
    object(
        json!({
            "version": {"type": "string"},
            "store": object(json!({"engine": {"type": "string"}, "schema": n, "shared": {"type": "boolean"}}), &[]),
            "health": object(json!({"healthy": {"type": "boolean"}, "reasons": {"type": "array", "items": {"type": "string"}}}), &[]),
            "view_lag_seconds": seconds, "uptime_seconds": seconds,
            "counts": {"type": "object"}, "requests": {"type": "object"}, "claims": {"type": "object"},
        }),
        &[],
    )
}
