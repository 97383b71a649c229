//! The JSON Schemas of request bodies (validated by `crate::schema`), one function per
//! request shape, named after the request.

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
    let mut schema = provider_update(with_parent);
    schema["properties"]["uuid"] = json!({"type": "string", "format": "uuid"});
    schema
}

/// `PUT /resource_providers/{uuid}`; `parent_provider_uuid` is accepted from 1.14.
pub fn provider_update(with_parent: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 200},
        },
        "required": ["name"],
        "additionalProperties": false,
    });
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
            "'' is too short"
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
