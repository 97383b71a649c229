//! The query forms (allot's extension): `POST /allocation_candidates/query` and
//! `POST /resource_providers/query` take the parameters of their `GET` in a JSON
//! body, for requests whose query string would be too long for a URL (Nova splits
//! its `member_of` and `in_tree` lists for that, `sharing_providers_max_uuids_per_request`).
//!
//! The body is turned back into the query string it stands for and read by the same
//! parser as the `GET`, so the two forms cannot drift apart: one answer, byte for
//! byte. `{"resources": "VCPU:1", "required": ["A", "!B"], "limit": 5}` is
//! `resources=VCPU:1&required=A&required=!B&limit=5`: the keys in the body's order
//! (which decides the order of request groups, as the order of first appearance does
//! in a query string), a list standing for a repeated parameter.

use serde_json::{json, Value};

use super::{Entries, JsonBody};
use crate::error::ApiError;

/// The schema of a query form: an object whose values are strings, numbers or
/// booleans (a parameter's text), or lists of them (a repeated parameter).
pub fn schema() -> Value {
    let scalar = json!({"type": ["string", "number", "boolean"]});
    json!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [scalar, {"type": "array", "items": scalar}],
        },
    })
}

/// The query string a query form stands for, percent-encoded as a client would send
/// it (400 in Placement's envelope for a body that is not such an object).
pub fn query_string(body: &JsonBody) -> Result<String, ApiError> {
    let Entries(entries) = body.read::<Entries<Value>>(&schema())?;
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (key, value) in &entries {
        match value {
            Value::Array(values) => values.iter().for_each(|v| {
                out.append_pair(key, &text(v));
            }),
            single => {
                out.append_pair(key, &text(single));
            }
        }
    }
    Ok(out.finish())
}

/// A parameter's text: a string as it is, a number or boolean as JSON writes it.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header, HeaderMap, HeaderValue};

    fn form(body: &str) -> Result<String, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        query_string(&JsonBody::new(headers, body.to_owned()))
    }

    /// Keys keep the body's order, lists repeat their parameter, and the text is
    /// encoded as a query string is (a comma or colon is left to the parser).
    #[test]
    fn a_body_stands_for_its_query_string() {
        let got = form(
            r#"{"resources1": "VGPU:1", "resources": "VCPU:1,MEMORY_MB:512",
                "required": ["CUSTOM_A", "!CUSTOM_B"], "limit": 5, "x": true,
                "member_of": "in:a b"}"#,
        )
        .unwrap();
        assert_eq!(
            got,
            "resources1=VGPU%3A1&resources=VCPU%3A1%2CMEMORY_MB%3A512&required=CUSTOM_A\
             &required=%21CUSTOM_B&limit=5&x=true&member_of=in%3Aa+b"
        );
        assert_eq!(form("{}").unwrap(), "");
    }

    /// What is no such object is a 400, never a default.
    #[test]
    fn other_bodies_are_refused() {
        for bad in [
            "[]",
            "\"resources\"",
            r#"{"resources": null}"#,
            r#"{"resources": {"VCPU": 1}}"#,
            r#"{"required": [["A"]]}"#,
            "{",
        ] {
            let refused = form(bad).unwrap_err();
            assert_eq!(refused.status.as_u16(), 400, "{bad}");
        }
    }
}
