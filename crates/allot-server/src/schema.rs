//! A small JSON Schema validator for request bodies and query strings.
//!
//! Placement validates every body against a JSON Schema and answers with the
//! validator's own message ("'x' is a required property", "Failed validating
//! 'maximum'", ...), and clients and Placement's test suite look for those words. So we
//! describe each request's shape as a schema (written with `serde_json::json!`, in
//! `crate::schemas`) and validate it here, producing messages worded like Python's
//! `jsonschema`. Only the keywords our schemas use are supported; an unknown keyword is
//! a programming error caught by the tests of every schema.
//!
//! After validation, bodies are deserialised into typed structs: the schema gives the
//! error messages, the types give the rest of the code something it need not re-check.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::Value;

/// A failed validation, worded like Python jsonschema's `str(ValidationError)`.
#[derive(Debug, Clone)]
pub struct SchemaError {
    /// The short message ("0 is less than the minimum of 1").
    pub message: String,
    /// The keyword that failed.
    pub keyword: &'static str,
    /// Path of the failing part of the instance.
    pub path: Vec<String>,
    /// Path, in the schema, of the subschema holding the failed keyword.
    pub schema_path: Vec<String>,
    /// That subschema.
    pub schema: Box<Value>,
    /// The failing part of the instance.
    pub instance: Box<Value>,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path: String = self.path.iter().map(|p| format!("[{p}]")).collect();
        let schema_path: String = self.schema_path.iter().map(|p| format!("[{p}]")).collect();
        write!(
            f,
            "{}\n\nFailed validating '{}' in schema{}:\n    {}\n\nOn instance{}:\n    {}",
            self.message,
            self.keyword,
            schema_path,
            py_repr(&self.schema),
            path,
            py_repr(&self.instance)
        )
    }
}

/// Validates `instance` against `schema`; on failure returns the most relevant error
/// (the one nearest the top of the instance, the first of those), as jsonschema's
/// `best_match` does.
pub fn validate(instance: &Value, schema: &Value) -> Result<(), SchemaError> {
    let mut errors = Vec::new();
    check(
        instance,
        schema,
        &mut Vec::new(),
        &mut Vec::new(),
        &mut errors,
    );
    match errors.into_iter().min_by_key(|e| e.path.len()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Python's `repr` of a JSON value, as jsonschema puts it in messages.
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            sorted(o)
                .into_iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// An object's entries by key. serde_json keeps objects in the order of the text
/// (its `preserve_order`, which the claim handlers need); this validator's choice of
/// error and its messages were made for, and stay with, entries in key order.
fn sorted(o: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = o.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

fn py_str(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

fn regex(pattern: &str) -> Regex {
    static CACHE: OnceLock<Mutex<HashMap<String, Regex>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(pattern.to_owned())
        .or_insert_with(|| Regex::new(pattern).expect("schema patterns are valid regexes"))
        .clone()
}

fn type_matches(v: &Value, ty: &str) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        // JSON Schema draft 4 (which Placement uses) counts 1.0 as a number, not an
        // integer; serde_json keeps that distinction for us.
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        other => panic!("unsupported schema type {other}"),
    }
}

fn is_uuid(s: &str) -> bool {
    // Python's uuid.UUID() accepts hex with or without dashes, braces and "urn:uuid:";
    // Placement's format checker accepts what it accepts.
    uuid::Uuid::parse_str(s).is_ok()
}

fn check(
    v: &Value,
    schema: &Value,
    path: &mut Vec<String>,
    spath: &mut Vec<String>,
    errors: &mut Vec<SchemaError>,
) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    macro_rules! fail {
        ($keyword:expr, $message:expr $(,)?) => {
            errors.push(SchemaError {
                message: $message,
                keyword: $keyword,
                path: path.clone(),
                schema_path: spath.clone(),
                schema: Box::new(Value::Object(schema.clone())),
                instance: Box::new(v.clone()),
            })
        };
    }
    for (keyword, arg) in sorted(schema) {
        match keyword.as_str() {
            "type" => {
                let ok = match arg {
                    Value::String(t) => type_matches(v, t),
                    Value::Array(ts) => {
                        ts.iter().any(|t| type_matches(v, t.as_str().unwrap_or("")))
                    }
                    _ => true,
                };
                if !ok {
                    let names = match arg {
                        Value::Array(ts) => ts.iter().map(py_repr).collect::<Vec<_>>().join(", "),
                        other => py_repr(other),
                    };
                    fail!("type", format!("{} is not of type {}", py_repr(v), names));
                    // Other keywords would only pile up noise about the wrong type.
                    return;
                }
            }
            "enum" => {
                let options = arg.as_array().expect("enum is an array");
                if !options.contains(v) {
                    fail!(
                        "enum",
                        format!("{} is not one of {}", py_repr(v), py_repr(arg))
                    );
                }
            }
            "minimum" => {
                if let (Some(x), Some(min)) = (v.as_f64(), arg.as_f64()) {
                    if x < min {
                        fail!(
                            "minimum",
                            format!("{} is less than the minimum of {}", v, arg)
                        );
                    }
                }
            }
            "maximum" => {
                if let (Some(x), Some(max)) = (v.as_f64(), arg.as_f64()) {
                    if x > max {
                        fail!(
                            "maximum",
                            format!("{} is greater than the maximum of {}", v, arg)
                        );
                    }
                }
            }
            "minLength" => {
                if let Some(s) = v.as_str() {
                    if (s.chars().count() as u64) < arg.as_u64().unwrap_or(0) {
                        fail!("minLength", format!("{} is too short", py_repr(v)));
                    }
                }
            }
            "maxLength" => {
                if let Some(s) = v.as_str() {
                    if (s.chars().count() as u64) > arg.as_u64().unwrap_or(u64::MAX) {
                        fail!("maxLength", format!("{} is too long", py_repr(v)));
                    }
                }
            }
            "pattern" => {
                if let Some(s) = v.as_str() {
                    let p = arg.as_str().expect("pattern is a string");
                    if !regex(p).is_match(s) {
                        fail!(
                            "pattern",
                            format!("{} does not match {}", py_repr(v), py_str(p))
                        );
                    }
                }
            }
            "format" => {
                if let (Some(s), Some("uuid")) = (v.as_str(), arg.as_str()) {
                    if !is_uuid(s) {
                        fail!("format", format!("{} is not a 'uuid'", py_repr(v)));
                    }
                }
            }
            "minItems" => {
                if let Some(a) = v.as_array() {
                    if (a.len() as u64) < arg.as_u64().unwrap_or(0) {
                        fail!("minItems", format!("{} is too short", py_repr(v)));
                    }
                }
            }
            "uniqueItems" => {
                if let (Some(a), Some(true)) = (v.as_array(), arg.as_bool()) {
                    let unique = a
                        .iter()
                        .enumerate()
                        .all(|(i, x)| a[..i].iter().all(|y| y != x));
                    if !unique {
                        fail!(
                            "uniqueItems",
                            format!("{} has non-unique elements", py_repr(v))
                        );
                    }
                }
            }
            "items" => {
                if let Some(a) = v.as_array() {
                    for (i, item) in a.iter().enumerate() {
                        path.push(i.to_string());
                        spath.push("'items'".into());
                        check(item, arg, path, spath, errors);
                        spath.pop();
                        path.pop();
                    }
                }
            }
            "minProperties" => {
                if let Some(o) = v.as_object() {
                    if (o.len() as u64) < arg.as_u64().unwrap_or(0) {
                        fail!(
                            "minProperties",
                            format!("{} does not have enough properties", py_repr(v))
                        );
                    }
                }
            }
            "required" => {
                if let Some(o) = v.as_object() {
                    for name in arg.as_array().expect("required is an array") {
                        let name = name.as_str().expect("required names are strings");
                        if !o.contains_key(name) {
                            fail!(
                                "required",
                                format!("{} is a required property", py_str(name))
                            );
                        }
                    }
                }
            }
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (name, sub) in sorted(arg.as_object().expect("properties is an object")) {
                        if let Some(value) = o.get(name) {
                            path.push(py_str(name));
                            spath.extend(["'properties'".into(), py_str(name)]);
                            check(value, sub, path, spath, errors);
                            spath.truncate(spath.len() - 2);
                            path.pop();
                        }
                    }
                }
            }
            "patternProperties" => {
                if let Some(o) = v.as_object() {
                    for (pattern, sub) in
                        sorted(arg.as_object().expect("patternProperties is an object"))
                    {
                        let re = regex(pattern);
                        for (name, value) in sorted(o).into_iter().filter(|(k, _)| re.is_match(k)) {
                            path.push(py_str(name));
                            spath.extend(["'patternProperties'".into(), py_str(pattern)]);
                            check(value, sub, path, spath, errors);
                            spath.truncate(spath.len() - 2);
                            path.pop();
                        }
                    }
                }
            }
            "additionalProperties" => {
                let Some(o) = v.as_object() else { continue };
                let declared = schema.get("properties").and_then(Value::as_object);
                let patterns: Vec<(String, Regex)> = schema
                    .get("patternProperties")
                    .and_then(Value::as_object)
                    .map(|p| {
                        sorted(p)
                            .into_iter()
                            .map(|(k, _)| (k.clone(), regex(k)))
                            .collect()
                    })
                    .unwrap_or_default();
                let extra: Vec<&String> = sorted(o)
                    .into_iter()
                    .map(|(k, _)| k)
                    .filter(|k| !declared.is_some_and(|d| d.contains_key(*k)))
                    .filter(|k| !patterns.iter().any(|(_, re)| re.is_match(k)))
                    .collect();
                match arg {
                    Value::Bool(false) if !extra.is_empty() => {
                        if patterns.is_empty() {
                            let names: Vec<String> = extra.iter().map(|k| py_str(k)).collect();
                            let verb = if names.len() == 1 { "was" } else { "were" };
                            fail!(
                                "additionalProperties",
                                format!(
                                    "Additional properties are not allowed ({} {verb} unexpected)",
                                    names.join(", ")
                                ),
                            );
                        } else {
                            let pats: Vec<String> =
                                patterns.iter().map(|(p, _)| py_str(p)).collect();
                            for k in extra {
                                fail!(
                                    "additionalProperties",
                                    format!(
                                        "{} does not match any of the regexes: {}",
                                        py_str(k),
                                        pats.join(", ")
                                    ),
                                );
                            }
                        }
                    }
                    Value::Object(_) => {
                        for k in extra {
                            path.push(py_str(k));
                            spath.push("'additionalProperties'".into());
                            check(&o[k.as_str()], arg, path, spath, errors);
                            spath.pop();
                            path.pop();
                        }
                    }
                    _ => {}
                }
            }
            "anyOf" => {
                let options = arg.as_array().expect("anyOf is an array");
                let ok = options.iter().any(|s| {
                    let mut sub = Vec::new();
                    check(v, s, &mut path.clone(), &mut spath.clone(), &mut sub);
                    sub.is_empty()
                });
                if !ok {
                    fail!(
                        "anyOf",
                        format!("{} is not valid under any of the given schemas", py_repr(v))
                    );
                }
            }
            "oneOf" => {
                let options = arg.as_array().expect("oneOf is an array");
                let matching = options
                    .iter()
                    .filter(|s| {
                        let mut sub = Vec::new();
                        check(v, s, &mut path.clone(), &mut spath.clone(), &mut sub);
                        sub.is_empty()
                    })
                    .count();
                if matching != 1 {
                    fail!(
                        "oneOf",
                        format!("{} is not valid under any of the given schemas", py_repr(v))
                    );
                }
            }
            "$schema" | "description" | "title" => {}
            other => panic!("unsupported schema keyword {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_match_python_jsonschema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "total": {"type": "integer", "minimum": 1, "maximum": 10},
                "name": {"type": "string", "maxLength": 3, "pattern": "^[A-Z]+$"},
                "list": {"type": "array", "uniqueItems": true},
            },
            "required": ["total"],
            "additionalProperties": false,
        });
        let msg = |v: Value| validate(&v, &schema).unwrap_err().message;
        assert_eq!(msg(json!({"total": 0})), "0 is less than the minimum of 1");
        assert_eq!(
            msg(json!({"total": 11})),
            "11 is greater than the maximum of 10"
        );
        assert_eq!(msg(json!({"total": "x"})), "'x' is not of type 'integer'");
        assert_eq!(msg(json!({})), "'total' is a required property");
        assert_eq!(
            msg(json!({"total": 1, "a": 1})),
            "Additional properties are not allowed ('a' was unexpected)"
        );
        assert_eq!(
            msg(json!({"total": 1, "name": "ABCD"})),
            "'ABCD' is too long"
        );
        assert_eq!(
            msg(json!({"total": 1, "name": "ab"})),
            "'ab' does not match '^[A-Z]+$'"
        );
        assert_eq!(
            msg(json!({"total": 1, "list": [1, 1]})),
            "[1, 1] has non-unique elements"
        );
        assert!(validate(&json!({"total": 3, "name": "AB", "list": [1, 2]}), &schema).is_ok());
        assert_eq!(msg(json!([])), "[] is not of type 'object'");
    }

    #[test]
    fn display_names_keyword() {
        let e = validate(&json!(5), &json!({"type": "integer", "maximum": 1})).unwrap_err();
        assert!(e.to_string().contains("Failed validating 'maximum'"));
    }

    #[test]
    fn display_has_schema_and_instance_paths() {
        let schema =
            json!({"type": "object", "properties": {"total": {"type": "integer", "minimum": 1}}});
        let e = validate(&json!({"total": 0}), &schema).unwrap_err();
        assert_eq!(
            e.to_string(),
            "0 is less than the minimum of 1\n\nFailed validating 'minimum' in schema['properties']['total']:\n    \
             {'minimum': 1, 'type': 'integer'}\n\nOn instance['total']:\n    0"
        );
    }

    #[test]
    fn draft4_integers() {
        assert!(validate(&json!(1.0), &json!({"type": "integer"})).is_err());
        assert!(validate(&json!(1), &json!({"type": "integer"})).is_ok());
    }
}
