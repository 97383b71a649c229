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
