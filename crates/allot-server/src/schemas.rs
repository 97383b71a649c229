//! The JSON Schemas of request bodies (validated by `crate::schema`), one function per
//! request shape, named after the request.
//!
//! Every schema declares its keys in the order of Placement's schema source (where
//! Placement derives one schema from another, members added later come last): the
//! validator checks keywords in that order, and a failure's message copies the
//! failing subschema as written, so the order is part of what clients see.

use serde_json::{json, Value};

/// The pattern of custom resource class and trait names.
pub const CUSTOM_NAME_PATTERN: &str = "^CUSTOM_[A-Z0-9_]+$";

/// `POST /resource_classes` and the 1.2–1.6 `PUT /resource_classes/{name}`.
pub fn resource_class() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": CUSTOM_NAME_PATTERN, "maxLength": 255},
        },
        "required": ["name"],
        "additionalProperties": false,
    })
}

/// `PUT /resource_classes/{name}/metadata` (an allot extension): each field a
/// non-empty string within its limit (`allot_core::metadata`), or null or absent to
/// leave it unset.
pub fn class_metadata() -> Value {
    use allot_core::metadata::{MAX_DESCRIPTION, MAX_DISPLAY_NAME, MAX_UNITS};
    let text = |max: usize| json!({"type": ["string", "null"], "minLength": 1, "maxLength": max});
    json!({
        "type": "object",
        "properties": {
            "units": text(MAX_UNITS),
            "display_name": text(MAX_DISPLAY_NAME),
            "description": text(MAX_DESCRIPTION),
        },
        "additionalProperties": false,
    })
}

/// A list of distinct aggregate uuids.
fn aggregate_list() -> Value {
    json!({
        "type": "array",
        "items": {"type": "string", "format": "uuid"},
        "uniqueItems": true,
    })
}

/// `PUT /resource_providers/{uuid}/aggregates`, 1.1–1.18: a bare list of uuids.
pub fn provider_aggregates_v1_1() -> Value {
    aggregate_list()
}

/// `PUT /resource_providers/{uuid}/aggregates` from 1.19: the list and the generation.
pub fn provider_aggregates_v1_19() -> Value {
    json!({
        "type": "object",
        "properties": {
            "aggregates": aggregate_list(),
            "resource_provider_generation": {"type": "integer"},
        },
        "required": ["aggregates", "resource_provider_generation"],
        "additionalProperties": false,
    })
}

/// `PUT /resource_providers/{uuid}/traits`.
pub fn provider_traits() -> Value {
    json!({
        "type": "object",
        "properties": {
            "traits": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 255},
            },
            "resource_provider_generation": {"type": "integer"},
        },
        "required": ["traits", "resource_provider_generation"],
        "additionalProperties": false,
    })
}

/// The pattern of any resource class name (standard or custom), as Placement's schemas
/// write it.
pub const RESOURCE_CLASS_PATTERN: &str = "^[A-Z0-9_]+$";

/// The largest integer Placement stores (a signed 32-bit column).
pub const MAX_INT: i64 = 2147483647;

/// The largest allocation ratio Placement stores (a single-precision float column).
pub const MAX_ALLOCATION_RATIO: f64 = 3.40282e38;

/// One inventory's fields; `required` names the required ones.
fn inventory_shape(required: &[&str]) -> Value {
    let count = |minimum: i64| json!({"type": "integer", "maximum": MAX_INT, "minimum": minimum});
    json!({
        "type": "object",
        "properties": {
            "resource_provider_generation": {"type": "integer"},
            "total": count(1),
            "reserved": count(0),
            "min_unit": count(1),
            "max_unit": count(1),
            "step_size": count(1),
            "allocation_ratio": {"type": "number", "maximum": MAX_ALLOCATION_RATIO},
        },
        "required": required,
        "additionalProperties": false,
    })
}

/// `PUT /resource_providers/{uuid}/inventories/{resource_class}`.
pub fn inventory_put() -> Value {
    inventory_shape(&["total", "resource_provider_generation"])
}

/// `POST /resource_providers/{uuid}/inventories`: one inventory and its class (a
/// generation is accepted and ignored).
pub fn inventory_post() -> Value {
    let mut schema = inventory_shape(&["total", "resource_class"]);
    schema["properties"]["resource_class"] =
        json!({"type": "string", "pattern": RESOURCE_CLASS_PATTERN});
    schema
}

/// One inventory of `PUT /resource_providers/{uuid}/inventories`.
pub fn inventory_record() -> Value {
    inventory_shape(&["total"])
}

/// `PUT /resource_providers/{uuid}/inventories`: all inventories by class. Like
/// Placement's, the schema only checks the inventories of keys that look like class
/// names.
pub fn inventories_put() -> Value {
    json!({
        "type": "object",
        "properties": {
            "resource_provider_generation": {"type": "integer"},
            "inventories": {
                "type": "object",
                "patternProperties": {RESOURCE_CLASS_PATTERN: inventory_record()},
            },
        },
        "required": ["resource_provider_generation", "inventories"],
        "additionalProperties": false,
    })
}

/// `POST /resource_providers`; `parent_provider_uuid` is accepted from 1.14.
pub fn provider_create(with_parent: bool) -> Value {
    provider_shape(true, with_parent)
}

/// `PUT /resource_providers/{uuid}`; `parent_provider_uuid` is accepted from 1.14.
pub fn provider_update(with_parent: bool) -> Value {
    provider_shape(false, with_parent)
}

/// A provider's fields, in Placement's order: `name`, `uuid` (on creation),
/// `parent_provider_uuid` (from 1.14).
fn provider_shape(with_uuid: bool, with_parent: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 200},
        },
        "required": ["name"],
        "additionalProperties": false,
    });
    if with_uuid {
        schema["properties"]["uuid"] = json!({"type": "string", "format": "uuid"});
    }
    if with_parent {
        schema["properties"]["parent_provider_uuid"] = json!({
            "anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}],
        });
    }
    schema
}

/// The query string of `GET /resource_providers` at microversion `1.minor` (each
/// parameter's last value): `member_of` from 1.3, `resources` from 1.4, `in_tree`
/// from 1.14, `required` from 1.18.
pub fn provider_list_query(minor: u16) -> Value {
    let mut properties = json!({
        "name": {"type": "string"},
        "uuid": {"type": "string", "format": "uuid"},
    });
    for (since, name, format) in [
        (3, "member_of", None),
        (4, "resources", None),
        (14, "in_tree", Some("uuid")),
        (18, "required", None),
    ] {
        if minor >= since {
            properties[name] = match format {
                Some(f) => json!({"type": "string", "format": f}),
                None => json!({"type": "string"}),
            };
        }
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// allot's parameters of `GET /resource_providers`, at every microversion: usages in
/// each entry, and pages. Checked apart from Placement's schema (whose copy in a
/// refusal's words stays Placement's).
pub fn provider_list_extensions() -> Value {
    json!({
        "type": "object",
        "properties": {
            "with_usages": {"type": "string", "enum": ["true", "false"]},
            "limit": {"type": "string", "pattern": "^[1-9][0-9]*$"},
            "marker": {"type": "string", "format": "uuid"},
        },
    })
}

/// The pattern of the uuids that key request objects, as loose as Placement's: any 36
/// hex digits and dashes.
pub const UUID_KEY_PATTERN: &str = "^[0-9a-fA-F-]{36}$";

/// The pattern of a consumer type (1.38).
pub const CONSUMER_TYPE_PATTERN: &str = "^[A-Z0-9_]+$";

/// The query string of `GET /usages` (each parameter's last value); `consumer_type`
/// from 1.38, where `all` and `unknown` are also accepted.
pub fn usages_query(minor: u16) -> Value {
    let id = json!({"type": "string", "minLength": 1, "maxLength": 255});
    let mut schema = json!({
        "type": "object",
        "properties": {"project_id": id, "user_id": id},
        "required": ["project_id"],
        "additionalProperties": false,
    });
    if minor >= 38 {
        schema["properties"]["consumer_type"] = json!({
            "type": "string",
            "pattern": format!("{CONSUMER_TYPE_PATTERN}|^all|^unknown$"),
            "minLength": 1,
            "maxLength": 255,
        });
    }
    schema
}

/// `POST /reshaper` at `1.minor` (1.30 or later): the new inventories of at least one
/// provider, by provider uuid, each in the form of `PUT .../inventories`, and the new
/// allocations of any number of consumers, by consumer uuid, in the form of
/// `POST /allocations` (1.28 on: consumer generations; 1.34: `mappings`; 1.38: a
/// required `consumer_type`).
pub fn reshaper(minor: u16) -> Value {
    // The allocations are those of `POST /allocations` at the same microversion, where
    // no consumer at all is also allowed (nothing may be allocated of what moves).
    let mut allocations = allocations_post(minor);
    allocations["minProperties"] = json!(0);
    json!({
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {UUID_KEY_PATTERN: inventories_put()},
                "minProperties": 1,
                "additionalProperties": false,
            },
            "allocations": allocations,
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": false,
    })
}

/// The amounts of one allocation: at least one class, each a positive integer.
fn allocation_resources() -> Value {
    json!({
        "type": "object",
        "minProperties": 1,
        "patternProperties": {RESOURCE_CLASS_PATTERN: {"type": "integer", "minimum": 1}},
        "additionalProperties": false,
    })
}

/// A consumer's project or user id.
fn owner_id() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 255})
}

/// The 1.0–1.11 body of `PUT /allocations/{consumer}`: a list of
/// `{resource_provider: {uuid}, resources}`; `project_id` and `user_id` required from
/// 1.8 (and refused before).
fn allocations_put_list(minor: u16) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "allocations": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "resource_provider": {
                            "type": "object",
                            "properties": {"uuid": {"type": "string", "format": "uuid"}},
                            "additionalProperties": false,
                            "required": ["uuid"],
                        },
                        "resources": allocation_resources(),
                    },
                    "required": ["resource_provider", "resources"],
                    "additionalProperties": false,
                },
            },
        },
        "required": ["allocations"],
        "additionalProperties": false,
    });
    if minor >= 8 {
        schema["properties"]["project_id"] = owner_id();
        schema["properties"]["user_id"] = owner_id();
        schema["required"] = json!(["allocations", "project_id", "user_id"]);
    }
    schema
}

/// One consumer's allocations in the dict form (1.12 on): allocations by provider
/// uuid, at least one unless `deletable`, with the owner; from 1.28 the consumer
/// generation (required), from 1.34 `mappings` (request group suffix to provider
/// uuids; accepted and checked, never stored), from 1.38 a required `consumer_type`.
fn allocations_dict(minor: u16, deletable: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "allocations": {
                "type": "object",
                "minProperties": if deletable { 0 } else { 1 },
                "patternProperties": {
                    UUID_KEY_PATTERN: {
                        "type": "object",
                        "properties": {
                            // Accepted, as in the GET response, and ignored.
                            "generation": {"type": "integer"},
                            "resources": allocation_resources(),
                        },
                        "required": ["resources"],
                        "additionalProperties": false,
                    },
                },
                "additionalProperties": false,
            },
            "project_id": owner_id(),
            "user_id": owner_id(),
        },
        "additionalProperties": false,
        "required": ["allocations", "project_id", "user_id"],
    });
    let mut required = vec!["allocations", "project_id", "user_id"];
    if minor >= 28 {
        // Placement's schema says `additionalProperties` here too (to no effect).
        schema["properties"]["consumer_generation"] =
            json!({"type": ["integer", "null"], "additionalProperties": false});
        required.push("consumer_generation");
    }
    if minor >= 34 {
        schema["properties"]["mappings"] = json!({
            "type": "object",
            "minProperties": 1,
            "patternProperties": {
                "[a-zA-Z0-9_-]{1,64}": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string", "format": "uuid"},
                },
            },
        });
    }
    if minor >= 38 {
        // (An empty type fails `pattern` before `minLength`, as in Placement.)
        schema["properties"]["consumer_type"] = json!({
            "type": "string",
            "pattern": CONSUMER_TYPE_PATTERN,
            "minLength": 1,
            "maxLength": 255,
        });
        required.push("consumer_type");
    }
    schema["required"] = json!(required);
    schema
}

/// `PUT /allocations/{consumer}` at `1.minor`: the list form before 1.12, then the
/// dict form, which may be empty (to remove everything) from 1.28.
pub fn allocations_put(minor: u16) -> Value {
    if minor < 12 {
        allocations_put_list(minor)
    } else {
        allocations_dict(minor, minor >= 28)
    }
}

/// `POST /allocations` (1.13) at `1.minor`: at least one consumer, by uuid, each in
/// the dict form of the PUT, which may be empty.
pub fn allocations_post(minor: u16) -> Value {
    json!({
        "type": "object",
        "minProperties": 1,
        "additionalProperties": false,
        "patternProperties": {UUID_KEY_PATTERN: allocations_dict(minor, true)},
    })
}

/// The longest a claim may be made to last, in seconds (ten years): beyond it a
/// claim is surely a mistake, and `now + expires_in` stays far from overflowing.
pub const MAX_CLAIM_EXPIRES_IN: i64 = 10 * 365 * 86_400;

/// The longest tag a claim may carry.
pub const MAX_CLAIM_TAG: usize = 255;

/// `POST /claims` (an allot extension): the consumer and its owner as in
/// `PUT /allocations` at 1.38, its allocations in the dict form (at least one
/// provider, each with at least one positive amount), `expires_in` (seconds, or null
/// for never; absent for the server's default) and an optional `tag`.
pub fn claim_create() -> Value {
    json!({
        "type": "object",
        "properties": {
            "consumer_uuid": {"type": "string", "format": "uuid"},
            "consumer_type": {
                "type": "string",
                "pattern": CONSUMER_TYPE_PATTERN,
                "minLength": 1,
                "maxLength": 255,
            },
            "project_id": owner_id(),
            "user_id": owner_id(),
            "allocations": {
                "type": "object",
                "minProperties": 1,
                "patternProperties": {
                    UUID_KEY_PATTERN: {
                        "type": "object",
                        "properties": {"resources": allocation_resources()},
                        "required": ["resources"],
                        "additionalProperties": false,
                    },
                },
                "additionalProperties": false,
            },
            "expires_in": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": MAX_CLAIM_EXPIRES_IN,
            },
            "tag": {"type": ["string", "null"], "maxLength": MAX_CLAIM_TAG},
            // Pick-and-claim (issue 24): the server chooses where.
            "request": {"type": "string", "minLength": 1, "maxLength": MAX_PICK_QUERY},
            "sort": {"type": "string", "enum": ["pack", "spread", "random"]},
            "prefer": {"type": "string", "minLength": 1},
            "consumers": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_PICK_INSTANCES,
                "items": {
                    "type": "object",
                    "properties": {
                        "consumer_uuid": {"type": "string", "format": "uuid"},
                        "tag": {"type": ["string", "null"], "maxLength": MAX_CLAIM_TAG},
                        "server_group": {"type": "string", "format": "uuid"},
                        // Its own shape (a mass start of mixed shapes).
                        "request": {"type": "string", "minLength": 1, "maxLength": MAX_PICK_QUERY},
                    },
                    "required": ["consumer_uuid"],
                    "additionalProperties": false,
                },
            },
            "affinity": {"type": "string", "enum": ["none", "different_roots", "same_root"]},
            "partial": {"type": "boolean"},
            // The server group the consumer (each instance's, unless it names its
            // own) joins with the claim (issue 44).
            "server_group": {"type": "string", "format": "uuid"},
        },
        "required": ["project_id", "user_id"],
        "additionalProperties": false,
    })
}

/// The longest `request` of a pick: a candidate query string.
pub const MAX_PICK_QUERY: usize = 8192;
/// The most instances one pick places.
pub const MAX_PICK_INSTANCES: usize = 1000;

/// `POST /claims/{uuid}/confirm` (an allot extension): an optional `replace`.
pub fn claim_confirm() -> Value {
    json!({
        "type": "object",
        "properties": {"replace": {"type": "boolean"}},
        "additionalProperties": false,
    })
}

/// The query string of `GET /claims` (each parameter's last value).
pub fn claims_query() -> Value {
    let uuid = json!({"type": "string", "format": "uuid"});
    json!({
        "type": "object",
        "properties": {
            "consumer_uuid": uuid,
            "resource_provider_uuid": uuid,
            "project_id": owner_id(),
            "consumer_type": {
                "type": "string",
                "pattern": CONSUMER_TYPE_PATTERN,
                "minLength": 1,
                "maxLength": 255,
            },
            "tag": {"type": "string", "maxLength": MAX_CLAIM_TAG},
            "state": {"type": "string", "enum": ["pending", "confirmed", "released", "expired"]},
            "resource_class": resource_class_name(),
            "limit": {"type": "string", "pattern": "^[1-9][0-9]*$"},
            "marker": uuid,
        },
        "additionalProperties": false,
    })
}

/// Nova's policy names (issue 44).
const SERVER_GROUP_POLICIES: [&str; 4] = [
    "affinity",
    "anti-affinity",
    "soft-affinity",
    "soft-anti-affinity",
];

/// The most members one `POST /server_groups/{uuid}/members` adds or removes, and
/// the largest `max_server_per_host`.
pub const MAX_SERVER_GROUP_MEMBERS: usize = 1000;

/// `POST /server_groups` (an allot extension, issue 44).
pub fn server_group_create() -> Value {
    json!({
        "type": "object",
        "properties": {
            "uuid": {"type": "string", "format": "uuid"},
            "name": {"type": "string", "minLength": 1, "maxLength": 255},
            "project_id": owner_id(),
            "user_id": owner_id(),
            "policy": {"type": "string", "enum": SERVER_GROUP_POLICIES},
            "rules": {
                "type": "object",
                "properties": {
                    "max_server_per_host": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SERVER_GROUP_MEMBERS,
                    },
                },
                "additionalProperties": false,
            },
            "scope": {"type": "string", "minLength": 1, "maxLength": 262},
            "enforce_on_allocations": {"type": "boolean"},
        },
        "required": ["name", "project_id", "policy"],
        "additionalProperties": false,
    })
}

/// `PUT /server_groups/{uuid}`: the group whole, members included, its uuid the
/// path's.
pub fn server_group_put() -> Value {
    let mut schema = server_group_create();
    let properties = schema["properties"].as_object_mut().expect("an object");
    properties.remove("uuid");
    properties.insert(
        "members".into(),
        json!({
            "type": "array",
            "items": {"type": "string", "format": "uuid"},
            "maxItems": MAX_SERVER_GROUP_MEMBERS,
        }),
    );
    schema
}

/// `POST /server_groups/{uuid}/members`: consumers to add and to remove.
pub fn server_group_members() -> Value {
    let list = json!({
        "type": "array",
        "items": {"type": "string", "format": "uuid"},
        "maxItems": MAX_SERVER_GROUP_MEMBERS,
    });
    json!({
        "type": "object",
        "properties": {"add": list, "remove": list},
        "minProperties": 1,
        "additionalProperties": false,
    })
}

/// The query string of `GET /server_groups`.
pub fn server_groups_query() -> Value {
    json!({
        "type": "object",
        "properties": {
            "project_id": owner_id(),
            "policy": {"type": "string", "enum": SERVER_GROUP_POLICIES},
            "limit": {"type": "string", "pattern": "^[1-9][0-9]*$"},
            "marker": {"type": "string", "format": "uuid"},
        },
        "additionalProperties": false,
    })
}

/// The query string of `DELETE /server_groups/{uuid}`.
pub fn server_group_delete_query() -> Value {
    json!({
        "type": "object",
        "properties": {"force": {"type": "string", "enum": ["true", "false"]}},
        "additionalProperties": false,
    })
}

/// `PUT /shapes/{name}` (an allot extension, issue 47).
pub fn shape_put() -> Value {
    json!({
        "type": "object",
        "properties": {
            "request": {
                "type": "string",
                "minLength": 1,
                "maxLength": allot_core::shapes::MAX_REQUEST_BYTES,
            },
        },
        "required": ["request"],
        "additionalProperties": false,
    })
}

/// The most roots one drain takes.
pub const MAX_DRAIN_ROOTS: usize = 100;

/// `POST /drains` (an allot extension, issue 44).
pub fn drain_create() -> Value {
    let uuid = json!({"type": "string", "format": "uuid"});
    json!({
        "type": "object",
        "properties": {
            "roots": {"type": "array", "items": uuid, "minItems": 1, "maxItems": MAX_DRAIN_ROOTS},
            "consumers": {"type": "array", "items": uuid, "minItems": 1, "maxItems": MAX_PICK_INSTANCES},
            "requests": {
                "type": "object",
                "patternProperties": {
                    UUID_KEY_PATTERN: {"type": "string", "minLength": 1, "maxLength": MAX_PICK_QUERY},
                },
                "additionalProperties": false,
            },
            "required": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 255},
                "maxItems": 100,
            },
            "partial": {"type": "boolean"},
            "sort": {"type": "string", "enum": ["pack", "spread", "random"]},
            "prefer": {"type": "string", "minLength": 1},
            "expires_in": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": MAX_CLAIM_EXPIRES_IN,
            },
            "disable": {"type": "boolean"},
        },
        "required": ["roots"],
        "additionalProperties": false,
    })
}

/// The query string of `DELETE /claims`: the consumer whose live claims go.
pub fn claims_release_query() -> Value {
    json!({
        "type": "object",
        "properties": {"consumer_uuid": {"type": "string", "format": "uuid"}},
        "required": ["consumer_uuid"],
        "additionalProperties": false,
    })
}

/// The query string of `GET /pending`: a consumer, a project, or both (the handler
/// says that one is needed, in its own words, unless the answer is by root).
pub fn pending_query() -> Value {
    json!({
        "type": "object",
        "properties": {
            "consumer_uuid": {"type": "string", "format": "uuid"},
            "project_id": owner_id(),
            "resource_class": resource_class_name(),
            "group_by": {"type": "string", "enum": ["root"]},
        },
        "additionalProperties": false,
    })
}

/// A resource class's name as a query parameter (as Placement's schemas spell one).
fn resource_class_name() -> Value {
    json!({"type": "string", "pattern": RESOURCE_CLASS_PATTERN, "maxLength": 255})
}

/// The query string of `GET /resource_providers/{uuid}/pending`.
pub fn provider_pending_query() -> Value {
    json!({
        "type": "object",
        "properties": {
            "detail": {"type": "string", "enum": ["consumers"]},
            "tree": {"type": "string", "enum": ["true", "false"]},
        },
        "additionalProperties": false,
    })
}

/// The query string of `GET /allocation_candidates` at microversion `1.minor` (each
/// parameter's last value), as Placement's schemas for 1.10, 1.16, 1.17, 1.21, 1.25,
/// 1.31, 1.33, 1.35 and 1.36 have it: from 1.25 `resources`, `required`, `member_of`
/// (and from 1.31 `in_tree`) may carry a group suffix, a number before 1.33 and up to
/// 64 of `[a-zA-Z0-9_-]` from 1.33.
pub fn allocation_candidates_query(minor: u16) -> Value {
    // Built in the order of Placement's schemas (each a copy of the one before with
    // members added or removed), which is the order its messages copy them in.
    let string = json!({"type": "string"});
    let limit = json!({
        "type": ["integer", "string"],
        "pattern": "^[1-9][0-9]*$",
        "minimum": 1,
        "minLength": 1,
    });
    let mut properties = serde_json::Map::new();
    if minor < 25 {
        properties.insert("resources".into(), string.clone());
        if minor >= 16 {
            properties.insert("limit".into(), limit);
        }
        if minor >= 17 {
            properties.insert("required".into(), json!({"type": ["string"]}));
        }
        if minor >= 21 {
            properties.insert("member_of".into(), json!({"type": ["string"]}));
        }
        return json!({
            "type": "object",
            "properties": properties,
            "required": ["resources"],
            "additionalProperties": false,
        });
    }
    properties.insert("limit".into(), limit);
    properties.insert(
        "group_policy".into(),
        json!({"type": "string", "enum": ["none", "isolate"]}),
    );
    if minor >= 35 {
        properties.insert("root_required".into(), json!({"type": ["string"]}));
    }
    if minor >= 36 {
        properties.insert("same_subtree".into(), json!({"type": ["string"]}));
    }
    let suffix = if minor >= 33 {
        "[a-zA-Z0-9_-]{1,64}"
    } else {
        "[1-9][0-9]*"
    };
    let mut patterns = serde_json::Map::new();
    let mut prefixes = vec!["resources", "required", "member_of"];
    if minor >= 31 {
        prefixes.push("in_tree");
    }
    for prefix in prefixes {
        patterns.insert(format!("^{prefix}({suffix})?$"), string.clone());
    }
    json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
        "patternProperties": patterns,
    })
}

/// The longest path a dry run takes (a provider uuid and a class name fit many times).
pub const MAX_DRY_RUN_PATH: usize = 1024;

/// `POST /dry_run` (an allot extension, issue 47): a write as it would be sent. The
/// body is any JSON: the write's own schema checks it, in its turn.
pub fn dry_run() -> Value {
    json!({
        "type": "object",
        "properties": {
            "method": {"type": "string", "enum": ["PUT", "POST", "DELETE"]},
            "path": {"type": "string", "pattern": "^/", "maxLength": MAX_DRY_RUN_PATH},
            "body": {},
        },
        "required": ["method", "path"],
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod membership_schema_tests {
    use super::*;
    use crate::schema::validate;

    const A: &str = "f918801a-5e54-4bee-9095-09a9d0c786b8";

    #[test]
    fn aggregates_by_form() {
        let err = |v: Value, s: Value| validate(&v, &s).unwrap_err().message;
        assert!(validate(&json!([A]), &provider_aggregates_v1_1()).is_ok());
        assert_eq!(
            err(json!({"aggregates": [A], "resource_provider_generation": 0}), provider_aggregates_v1_1()),
            format!("{{'aggregates': ['{A}'], 'resource_provider_generation': 0}} is not of type 'array'")
        );
        assert_eq!(
            err(json!([A]), provider_aggregates_v1_19()),
            format!("['{A}'] is not of type 'object'")
        );
        assert_eq!(
            err(
                json!({"aggregates": [A, A], "resource_provider_generation": 1}),
                provider_aggregates_v1_19()
            ),
            format!("['{A}', '{A}'] has non-unique elements")
        );
        assert_eq!(
            err(
                json!({"aggregates": ["harry"], "resource_provider_generation": 1}),
                provider_aggregates_v1_19()
            ),
            "'harry' is not a 'uuid'"
        );
        assert_eq!(
            err(json!({"aggregates": []}), provider_aggregates_v1_19()),
            "'resource_provider_generation' is a required property"
        );
    }

    #[test]
    fn provider_trait_bodies() {
        let err = |v: Value| validate(&v, &provider_traits()).unwrap_err().message;
        assert!(validate(
            &json!({"traits": ["lower_ok"], "resource_provider_generation": 0}),
            &provider_traits()
        )
        .is_ok());
        assert_eq!(
            err(json!({"traits": "x", "resource_provider_generation": 0})),
            "'x' is not of type 'array'"
        );
        assert_eq!(
            err(json!({"traits": [""], "resource_provider_generation": 0})),
            "'' should be non-empty"
        );
        assert_eq!(
            err(json!({"traits": [], "resource_provider_generation": "g"})),
            "'g' is not of type 'integer'"
        );
        assert_eq!(
            err(json!({"traits": [], "resource_provider_generation": 0, "x": 1})),
            "Additional properties are not allowed ('x' was unexpected)"
        );
    }
}
