//! The body of `POST /dry_run` (an allot extension, issue 47): a write named by its
//! method and path, with its body. Only which write it is gets read here; the write's
//! own body is read later by the write's own reader (`request::inventories`,
//! `request::reshaper`), through the write's own checks, so that a dry run refuses
//! exactly what the write would.

use axum::http::{header, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::Value;

use super::JsonBody;
use crate::error::ApiError;
use crate::schemas;

/// The writes a dry run takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// `PUT /resource_providers/{uuid}/inventories`.
    ReplaceInventories(String),
    /// `POST /resource_providers/{uuid}/inventories`.
    AddInventory(String),
    /// `DELETE /resource_providers/{uuid}/inventories`.
    DeleteInventories(String),
    /// `PUT /resource_providers/{uuid}/inventories/{class}`.
    UpdateInventory(String, String),
    /// `DELETE /resource_providers/{uuid}/inventories/{class}`.
    DeleteInventory(String, String),
    /// `POST /reshaper`.
    Reshape,
    /// `DELETE /resource_providers/{uuid}`.
    DeleteProvider(String),
}

/// A dry run's request: the write, and its body as the write would receive it.
#[derive(Debug)]
pub struct DryRun {
    /// The method as given (for the errors' wording).
    pub method: String,
    /// Which write.
    pub write: Write,
    /// The write's body, as JSON text with a JSON content type (empty when none was
    /// given: the write answers that as it answers an empty body).
    pub body: JsonBody,
}

/// The tree of `POST /dry_run` as its schema checked it.
#[derive(Deserialize)]
struct Body {
    method: String,
    path: String,
    #[serde(default)]
    body: Option<Value>,
}

impl DryRun {
    /// Reads and checks the body: 400 for one that is no JSON, fails the schema, or
    /// names a write a dry run does not take.
    pub fn read(body: &JsonBody) -> Result<Self, ApiError> {
        let Body { method, path, body } = body.read(&schemas::dry_run())?;
        let write = write_of(&method, &path).ok_or_else(|| {
            ApiError::bad_request(format!(
                "A dry run takes PUT, POST or DELETE of /resource_providers/{{uuid}}/inventories, \
                 PUT or DELETE of /resource_providers/{{uuid}}/inventories/{{resource_class}}, \
                 POST /reshaper and DELETE /resource_providers/{{uuid}}; not {method} {path}."
            ))
        })?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let bytes = match body {
            Some(value) => serde_json::to_vec(&value).map_err(|e| {
                ApiError::bad_request(format!("The write's body cannot be written: {e}"))
            })?,
            None => Vec::new(),
        };
        Ok(DryRun {
            method,
            write,
            body: JsonBody::new(headers, bytes),
        })
    }
}

/// The write `method path` names, if a dry run takes it. The path is taken as
/// written (not percent-decoded: a provider's uuid and a class name need no escape),
/// without a query string.
fn write_of(method: &str, path: &str) -> Option<Write> {
    let rest = path.strip_prefix('/')?;
    let segments: Vec<&str> = rest.split('/').collect();
    if segments
        .iter()
        .any(|s| s.is_empty() || s.contains(['?', '#']))
    {
        return None;
    }
    let owned = |s: &str| s.to_owned();
    match (method, segments.as_slice()) {
        ("POST", ["reshaper"]) => Some(Write::Reshape),
        ("DELETE", ["resource_providers", uuid]) => Some(Write::DeleteProvider(owned(uuid))),
        (_, ["resource_providers", uuid, "inventories"]) => match method {
            "PUT" => Some(Write::ReplaceInventories(owned(uuid))),
            "POST" => Some(Write::AddInventory(owned(uuid))),
            "DELETE" => Some(Write::DeleteInventories(owned(uuid))),
            _ => None,
        },
        (_, ["resource_providers", uuid, "inventories", class]) => match method {
            "PUT" => Some(Write::UpdateInventory(owned(uuid), owned(class))),
            "DELETE" => Some(Write::DeleteInventory(owned(uuid), owned(class))),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::test_body as body;
    use serde_json::json;

    const RP: &str = "9e3cbba2-2fe3-4be5-9d0b-2d1c2e5c5d9e";

    #[test]
    fn the_writes_a_dry_run_takes() {
        let inv = format!("/resource_providers/{RP}/inventories");
        let one = format!("{inv}/VCPU");
        let rp = format!("/resource_providers/{RP}");
        let cases: Vec<(&str, String, Option<Write>)> = vec![
            (
                "PUT",
                inv.clone(),
                Some(Write::ReplaceInventories(RP.into())),
            ),
            ("POST", inv.clone(), Some(Write::AddInventory(RP.into()))),
            (
                "DELETE",
                inv.clone(),
                Some(Write::DeleteInventories(RP.into())),
            ),
            (
                "PUT",
                one.clone(),
                Some(Write::UpdateInventory(RP.into(), "VCPU".into())),
            ),
            (
                "DELETE",
                one.clone(),
                Some(Write::DeleteInventory(RP.into(), "VCPU".into())),
            ),
            ("POST", "/reshaper".into(), Some(Write::Reshape)),
            ("DELETE", rp.clone(), Some(Write::DeleteProvider(RP.into()))),
            ("POST", one, None),
            ("PUT", "/reshaper".into(), None),
            ("PUT", rp, None),
            ("DELETE", "/resource_providers".into(), None),
            ("PUT", format!("{inv}/"), None),
            ("PUT", format!("/{inv}"), None),
            ("PUT", format!("{inv}?x=1"), None),
            ("PUT", "resource_providers".into(), None),
            ("DELETE", "/allocations/x".into(), None),
        ];
        for (method, path, wanted) in cases {
            assert_eq!(write_of(method, &path), wanted, "{method} {path}");
        }
    }

    #[test]
    fn bodies_are_checked_and_handed_on_as_json() {
        let path = format!("/resource_providers/{RP}/inventories");
        let read = DryRun::read(&body(json!({
            "method": "PUT", "path": path, "body": {"resource_provider_generation": 1, "inventories": {}},
        })))
        .unwrap();
        assert_eq!(read.write, Write::ReplaceInventories(RP.into()));
        assert_eq!(
            read.body.value().unwrap(),
            json!({"resource_provider_generation": 1, "inventories": {}})
        );
        let none = DryRun::read(&body(json!({"method": "DELETE", "path": path}))).unwrap();
        assert!(none.body.is_empty());
        let refused = |value: Value| DryRun::read(&body(value)).unwrap_err().message;
        assert!(refused(json!({"method": "GET", "path": path})).contains("is not one of"));
        assert!(refused(json!({"method": "PATCH", "path": path})).contains("is not one of"));
        assert!(refused(json!({"path": path})).contains("'method' is a required property"));
        assert!(
            refused(json!({"method": "PUT", "path": path, "x": 1})).contains("'x' was unexpected")
        );
        assert!(
            refused(json!({"method": "POST", "path": "/resource_providers"}))
                .starts_with("A dry run takes")
        );
    }
}
