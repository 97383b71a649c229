//! The keywords: one function per JSON Schema keyword our schemas use (the two of a
//! pair of bounds each on its own), and the walk that applies them in the order the
//! schema declares them ([`Walk::check`]).
//!
//! The walk runs for every request body, tens of thousands of times a second in a
//! claim storm, so the keywords are plain function calls on borrowed values: a
//! keyword that passes allocates and copies nothing; only a failure builds its
//! message and copies the paths, the subschema and the instance into its
//! [`SchemaError`]. The keywords that only judge a value return their failure's
//! message; those that descend into members and items, or that can fail more than
//! once, are the walk's methods.

use serde_json::{Map, Value};

use super::python::py_str;
use super::{py_repr, regex, type_matches, PathItem, SchemaError};

/// One validation under way: where it stands in the instance and in the schema, and
/// every failure found so far, in jsonschema's order.
#[derive(Debug, Default)]
pub(super) struct Walk {
    /// The path to the part of the instance being checked.
    path: Vec<PathItem>,
    /// The path, in the schema, to the subschema it is checked against.
    spath: Vec<PathItem>,
    /// The failures found so far.
    pub(super) errors: Vec<SchemaError>,
}

impl Walk {
    /// Appends every failure of `v` against `schema`, in jsonschema's order: the
    /// schema's keywords as declared, each keyword's own order within.
    pub(super) fn check(&mut self, v: &Value, schema: &Value) {
        let Some(schema) = schema.as_object() else {
            return;
        };
        for (keyword, arg) in schema {
            match keyword.as_str() {
                "type" => self.judge(v, schema, "type", type_mismatch(v, arg)),
                "enum" => self.judge(v, schema, "enum", not_in_enum(v, arg)),
                "minimum" => self.judge(v, schema, "minimum", below_minimum(v, arg)),
                "maximum" => self.judge(v, schema, "maximum", above_maximum(v, arg)),
                "minLength" => self.judge(v, schema, "minLength", text_too_short(v, arg)),
                "maxLength" => self.judge(v, schema, "maxLength", text_too_long(v, arg)),
                "pattern" => self.judge(v, schema, "pattern", pattern_mismatch(v, arg)),
                "format" => self.judge(v, schema, "format", format_mismatch(v, arg)),
                "minItems" => self.judge(v, schema, "minItems", too_few_items(v, arg)),
                "maxItems" => self.judge(v, schema, "maxItems", too_many_items(v, arg)),
                "uniqueItems" => self.judge(v, schema, "uniqueItems", repeated_items(v, arg)),
                "items" => self.items(v, arg),
                "minProperties" => {
                    self.judge(v, schema, "minProperties", too_few_properties(v, arg))
                }
                "maxProperties" => {
                    self.judge(v, schema, "maxProperties", too_many_properties(v, arg))
                }
                "required" => self.required(v, schema, arg),
                "properties" => self.properties(v, arg),
                "patternProperties" => self.pattern_properties(v, arg),
                "additionalProperties" => self.additional_properties(v, schema, arg),
                "anyOf" => self.alternatives(v, schema, arg, "anyOf"),
                "oneOf" => self.alternatives(v, schema, arg, "oneOf"),
                "$schema" | "description" | "title" => {}
                other => panic!("unsupported schema keyword {other}"),
            }
        }
    }

    /// Records a keyword's failure, if it failed.
    fn judge(
        &mut self,
        v: &Value,
        schema: &Map<String, Value>,
        keyword: &'static str,
        failure: Option<String>,
    ) {
        if let Some(message) = failure {
            self.fail(v, schema, keyword, message, Vec::new());
        }
    }

    /// Records a failure of `keyword` in `schema` on `v`, where the walk stands, with
    /// the failures of the alternatives for `anyOf`/`oneOf`.
    fn fail(
        &mut self,
        v: &Value,
        schema: &Map<String, Value>,
        keyword: &'static str,
        message: String,
        context: Vec<SchemaError>,
    ) {
        self.errors.push(SchemaError {
            message,
            keyword,
            path: self.path.clone(),
            schema_path: self.spath.clone(),
            schema: Box::new(Value::Object(schema.clone())),
            instance: Box::new(v.clone()),
            context: context.into_boxed_slice(),
        });
    }

    /// Checks `v` against `sub`, one step further into the instance (`step`) and
    /// into the schema (`keys`).
    fn descend(&mut self, v: &Value, sub: &Value, step: PathItem, keys: [&str; 2]) {
        self.path.push(step);
        self.spath.extend(keys.map(PathItem::key));
        self.check(v, sub);
        self.spath.truncate(self.spath.len() - 2);
        self.path.pop();
    }

    /// `items`: every item of an array against the one subschema.
    fn items(&mut self, v: &Value, arg: &Value) {
        let Some(a) = v.as_array() else {
            return;
        };
        self.spath.push(PathItem::key("items"));
        for (i, item) in a.iter().enumerate() {
            self.path.push(PathItem::Index(i));
            self.check(item, arg);
            self.path.pop();
        }
        self.spath.pop();
    }

    /// `required`: one failure per missing member, in the keyword's order.
    fn required(&mut self, v: &Value, schema: &Map<String, Value>, arg: &Value) {
        let Some(o) = v.as_object() else {
            return;
        };
        for name in arg.as_array().expect("required is an array") {
            let name = name.as_str().expect("required names are strings");
            if !o.contains_key(name) {
                let message = format!("{} is a required property", py_str(name));
                self.fail(v, schema, "required", message, Vec::new());
            }
        }
    }

    /// `properties`: each declared member the object has, against its subschema, in
    /// the schema's order.
    fn properties(&mut self, v: &Value, arg: &Value) {
        let Some(o) = v.as_object() else {
            return;
        };
        for (name, sub) in arg.as_object().expect("properties is an object") {
            if let Some(value) = o.get(name) {
                self.descend(value, sub, PathItem::key(name), ["properties", name]);
            }
        }
    }

    /// `patternProperties`: for each pattern in the schema's order, the members whose
    /// names it matches, in the request's order.
    fn pattern_properties(&mut self, v: &Value, arg: &Value) {
        let Some(o) = v.as_object() else {
            return;
        };
        for (pattern, sub) in arg.as_object().expect("patternProperties is an object") {
            let re = regex(pattern);
            for (name, value) in o.iter().filter(|(k, _)| re.is_match(k)) {
                self.descend(
                    value,
                    sub,
                    PathItem::key(name),
                    ["patternProperties", pattern],
                );
            }
        }
    }

    /// `additionalProperties`: the members neither declared nor matched by a pattern,
    /// refused all at once (`false`) or each checked against a subschema.
    fn additional_properties(&mut self, v: &Value, schema: &Map<String, Value>, arg: &Value) {
        let Some(o) = v.as_object() else {
            return;
        };
        let declared = schema.get("properties").and_then(Value::as_object);
        let patterns = schema.get("patternProperties").and_then(Value::as_object);
        let mut extra: Vec<&String> = o
            .keys()
            .filter(|k| !declared.is_some_and(|d| d.contains_key(*k)))
            .filter(|k| !patterns.is_some_and(|p| p.keys().any(|re| regex(re).is_match(k))))
            .collect();
        match arg {
            Value::Bool(false) if !extra.is_empty() => {
                let message = unexpected_members(&mut extra, patterns);
                self.fail(v, schema, "additionalProperties", message, Vec::new());
            }
            Value::Object(_) => {
                self.spath.push(PathItem::key("additionalProperties"));
                for k in extra {
                    self.path.push(PathItem::key(k));
                    self.check(&o[k.as_str()], arg);
                    self.path.pop();
                }
                self.spath.pop();
            }
            _ => {}
        }
    }

    /// `anyOf` and `oneOf` (`keyword`): the instance against each alternative, each
    /// alternative's failures kept, with paths relative to it, as jsonschema keeps
    /// them (and prints them, when it picks one).
    fn alternatives(
        &mut self,
        v: &Value,
        schema: &Map<String, Value>,
        arg: &Value,
        keyword: &'static str,
    ) {
        let options = arg.as_array().expect("anyOf and oneOf are arrays");
        let mut context = Vec::new();
        let mut valid = Vec::new();
        for (i, option) in options.iter().enumerate() {
            let mut alternative = Walk {
                path: Vec::new(),
                spath: vec![PathItem::Index(i)],
                errors: Vec::new(),
            };
            alternative.check(v, option);
            if alternative.errors.is_empty() {
                valid.push(option);
                if keyword == "anyOf" {
                    break;
                }
            } else if valid.is_empty() {
                context.extend(alternative.errors);
            }
        }
        if valid.is_empty() {
            let message = format!("{} is not valid under any of the given schemas", py_repr(v));
            self.fail(v, schema, keyword, message, context);
        } else if valid.len() > 1 && keyword == "oneOf" {
            let schemas: Vec<String> = valid.iter().map(|s| py_repr(s)).collect();
            let message = format!(
                "{} is valid under each of {}",
                py_repr(v),
                schemas.join(", ")
            );
            self.fail(v, schema, "oneOf", message, Vec::new());
        }
    }
}

/// A count keyword's argument.
fn count(arg: &Value) -> u64 {
    arg.as_u64().expect("counts are integers")
}

/// `type`: one type, or any of a list.
fn type_mismatch(v: &Value, arg: &Value) -> Option<String> {
    let ok = match arg {
        Value::String(t) => type_matches(v, t),
        Value::Array(ts) => ts.iter().any(|t| type_matches(v, t.as_str().unwrap_or(""))),
        _ => true,
    };
    (!ok).then(|| {
        let names = match arg {
            Value::Array(ts) => ts.iter().map(py_repr).collect::<Vec<_>>().join(", "),
            other => py_repr(other),
        };
        format!("{} is not of type {}", py_repr(v), names)
    })
}

/// `enum`: one of the listed values.
fn not_in_enum(v: &Value, arg: &Value) -> Option<String> {
    let options = arg.as_array().expect("enum is an array");
    (!options.contains(v)).then(|| format!("{} is not one of {}", py_repr(v), py_repr(arg)))
}

/// `minimum`, of a number.
fn below_minimum(v: &Value, arg: &Value) -> Option<String> {
    let (x, min) = (v.as_f64()?, arg.as_f64()?);
    (x < min).then(|| {
        format!(
            "{} is less than the minimum of {}",
            py_repr(v),
            py_repr(arg)
        )
    })
}

/// `maximum`, of a number.
fn above_maximum(v: &Value, arg: &Value) -> Option<String> {
    let (x, max) = (v.as_f64()?, arg.as_f64()?);
    (x > max).then(|| {
        format!(
            "{} is greater than the maximum of {}",
            py_repr(v),
            py_repr(arg)
        )
    })
}

/// `minLength`, in characters, of a string.
fn text_too_short(v: &Value, arg: &Value) -> Option<String> {
    let min = count(arg);
    v.as_str()
        .is_some_and(|s| (s.chars().count() as u64) < min)
        .then(|| too_few(v, min, "is too short"))
}

/// `maxLength`, in characters, of a string.
fn text_too_long(v: &Value, arg: &Value) -> Option<String> {
    let max = count(arg);
    v.as_str()
        .is_some_and(|s| (s.chars().count() as u64) > max)
        .then(|| too_many(v, max, "is too long"))
}

/// `pattern`, searched in a string as Python's `re.search` does.
fn pattern_mismatch(v: &Value, arg: &Value) -> Option<String> {
    let p = arg.as_str().expect("pattern is a string");
    v.as_str()
        .is_some_and(|s| !regex(p).is_match(s))
        .then(|| format!("{} does not match {}", py_repr(v), py_str(p)))
}

/// `format`: only `uuid` is checked. Placement's uuid checker refuses anything that
/// is not a uuid string, other types included.
fn format_mismatch(v: &Value, arg: &Value) -> Option<String> {
    (arg.as_str() == Some("uuid") && !v.as_str().is_some_and(is_uuid))
        .then(|| format!("{} is not a 'uuid'", py_repr(v)))
}

/// `minItems`, of an array.
fn too_few_items(v: &Value, arg: &Value) -> Option<String> {
    let min = count(arg);
    v.as_array()
        .is_some_and(|a| (a.len() as u64) < min)
        .then(|| too_few(v, min, "is too short"))
}

/// `maxItems`, of an array.
fn too_many_items(v: &Value, arg: &Value) -> Option<String> {
    let max = count(arg);
    v.as_array()
        .is_some_and(|a| (a.len() as u64) > max)
        .then(|| too_many(v, max, "is too long"))
}

/// `uniqueItems`, of an array (compared pairwise: the arrays are short, and JSON
/// values have no order or hash).
fn repeated_items(v: &Value, arg: &Value) -> Option<String> {
    let (a, true) = (v.as_array()?, arg.as_bool()?) else {
        return None;
    };
    let unique = a
        .iter()
        .enumerate()
        .all(|(i, x)| a[..i].iter().all(|y| y != x));
    (!unique).then(|| format!("{} has non-unique elements", py_repr(v)))
}

/// `minProperties`, of an object.
fn too_few_properties(v: &Value, arg: &Value) -> Option<String> {
    let min = count(arg);
    v.as_object()
        .is_some_and(|o| (o.len() as u64) < min)
        .then(|| too_few(v, min, "does not have enough properties"))
}

/// `maxProperties`, of an object.
fn too_many_properties(v: &Value, arg: &Value) -> Option<String> {
    let max = count(arg);
    v.as_object()
        .is_some_and(|o| (o.len() as u64) > max)
        .then(|| too_many(v, max, "has too many properties"))
}

/// `additionalProperties: false`'s words: jsonschema names the extra members, and
/// the patterns, sorted.
fn unexpected_members(extra: &mut [&String], patterns: Option<&Map<String, Value>>) -> String {
    extra.sort();
    let names: Vec<String> = extra.iter().map(|k| py_str(k)).collect();
    match patterns {
        Some(p) => {
            let mut pats: Vec<&String> = p.keys().collect();
            pats.sort();
            let pats: Vec<String> = pats.iter().map(|p| py_str(p)).collect();
            let verb = if names.len() == 1 { "does" } else { "do" };
            format!(
                "{} {verb} not match any of the regexes: {}",
                names.join(", "),
                pats.join(", ")
            )
        }
        None => {
            let verb = if names.len() == 1 { "was" } else { "were" };
            format!(
                "Additional properties are not allowed ({} {verb} unexpected)",
                names.join(", ")
            )
        }
    }
}

/// Whether a string passes `format: uuid`.
fn is_uuid(s: &str) -> bool {
    // A check of its own, as Placement's jsonschema has one: the standard forms
    // (plain, hyphenated, braced, "urn:uuid:"), which `params::format_checked_uuid`
    // reads after it. Placement's checker is a little looser (dashes anywhere): a
    // difference listed in docs/api.md.
    uuid::Uuid::parse_str(s).is_ok()
}

/// `min` keywords' words for a count of one (jsonschema 4.21 on).
fn too_few(v: &Value, min: u64, otherwise: &str) -> String {
    count_words(v, min == 1, "should be non-empty", otherwise)
}

/// `max` keywords' words for a count of zero (jsonschema 4.21 on).
fn too_many(v: &Value, max: u64, otherwise: &str) -> String {
    count_words(v, max == 0, "is expected to be empty", otherwise)
}

/// `v` and the words for its count: `edge` when the bound is at its edge (a minimum
/// of one, a maximum of zero), else `otherwise`.
fn count_words(v: &Value, at_edge: bool, edge: &str, otherwise: &str) -> String {
    let words = if at_edge { edge } else { otherwise };
    format!("{} {words}", py_repr(v))
}
