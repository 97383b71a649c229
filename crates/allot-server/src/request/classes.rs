//! The requests of `/resource_classes`: the body naming a custom class (`POST`, and
//! the 1.2–1.6 rename), the name in the path of the 1.7 `PUT` (checked as if it came
//! in that body, for the same words), the metadata body of
//! `PUT /resource_classes/{name}/metadata` and the `with_metadata` parameter of the
//! listing (both allot extensions).

use allot_core::ops::classes::parse_custom_class;
use allot_core::{ClassMetadata, ResourceClass};
use serde::Deserialize;
use serde_json::{json, Value};

use super::checked;
use crate::error::ApiError;
use crate::http::Query;
use crate::schemas;

/// A custom class from a parsed `{"name": ...}` body: checked against the schema,
/// then by the core's rule for custom names.
pub fn custom_class(value: Value) -> Result<ResourceClass, ApiError> {
    #[derive(Deserialize)]
    struct NameBody {
        name: String,
    }
    let body: NameBody = checked(value, &schemas::resource_class())?;
    Ok(parse_custom_class(&body.name)?)
}

/// A custom class named in the path of the 1.7 `PUT`, checked as [`custom_class`]
/// checks a body.
pub fn custom_class_in_path(name: &str) -> Result<ResourceClass, ApiError> {
    custom_class(json!({ "name": name }))
}

/// A class named in a path. A name that is not well formed names no class, so it gets
/// the same 404 as an unknown one.
pub fn class_in_path(name: &str) -> Result<ResourceClass, ApiError> {
    ResourceClass::parse(name)
        .ok_or_else(|| ApiError::not_found(format!("No such resource class {name}.")))
}

/// The metadata of a parsed `PUT /resource_classes/{name}/metadata` body: a field
/// absent or null is unset.
pub fn metadata(value: Value) -> Result<ClassMetadata, ApiError> {
    #[derive(Deserialize)]
    struct MetadataBody {
        #[serde(default)]
        units: Option<String>,
        #[serde(default)]
        display_name: Option<String>,
        #[serde(default)]
        description: Option<String>,
    }
    let body: MetadataBody = checked(value, &schemas::class_metadata())?;
    Ok(ClassMetadata {
        units: body.units,
        display_name: body.display_name,
        description: body.description,
    })
}

/// Reads `with_metadata` (an allot extension of the list): absent or `false` lists as
/// Placement does, `true` adds each class's metadata. Placement ignores unknown
/// parameters here, so nothing else is refused.
pub fn with_metadata(raw: Option<&str>) -> Result<bool, ApiError> {
    // Not `QueryParams`: Placement reads this listing's query without refusing one
    // that is not UTF-8.
    match Query::parse(raw).last("with_metadata") {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "Invalid value for with_metadata: '{other}'. It must be 'true' or 'false'."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_metadata() {
        assert_eq!(
            custom_class_in_path("CUSTOM_A").unwrap().as_str(),
            "CUSTOM_A"
        );
        let e = custom_class_in_path("VCPU").unwrap_err();
        assert!(e
            .message
            .starts_with("JSON does not validate: 'VCPU' does not match"));
        assert!(custom_class(json!({"name": "CUSTOM_A", "x": 1})).is_err());
        assert_eq!(
            class_in_path("no such").unwrap_err().message,
            "No such resource class no such."
        );
        let m = metadata(json!({"units": "GiB", "description": null})).unwrap();
        assert_eq!(m.units.as_deref(), Some("GiB"));
        assert_eq!(m.description, None);
        assert!(metadata(json!({"units": ""})).is_err());
        assert!(with_metadata(Some("with_metadata=true")).unwrap());
        assert!(!with_metadata(None).unwrap());
        assert!(with_metadata(Some("with_metadata=yes")).is_err());
    }
}
