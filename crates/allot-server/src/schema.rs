//! A small JSON Schema validator for request bodies and query strings.
//!
//! Placement validates every body against a JSON Schema and answers with the
//! validator's own words ("'x' is a required property", "Failed validating
//! 'maximum' in schema[...]"), and clients, osc-placement and Placement's test suite
//! show or look for them. So we describe each request's shape as a schema (written
//! with `serde_json::json!`, in `crate::schemas`, keys in the order of Placement's
//! schema source) and validate it here, producing the text Python's `jsonschema`
//! (4.x, the version Placement 16 installs with) produces for the same schema and
//! instance:
//!
//! - keywords, properties and patterns are checked in the order the schema declares
//!   them, object members in the order of the request text (serde_json's
//!   `preserve_order`), and of all failures the one `jsonschema.best_match` picks is
//!   reported (see [`relevance`]);
//! - the messages are jsonschema's, including its newer "should be non-empty" for a
//!   minimum of one;
//! - the tail copies the failing subschema and instance as Python's
//!   `pprint.pformat(width=72, sort_dicts=False)` writes them ([`pformat`]), with
//!   Python's `repr` of strings, numbers, booleans and `None` ([`py_repr`]).
//!
//! Only the keywords our schemas use are supported, one function each in
//! `schema/keywords.rs`; an unknown keyword is a programming error caught by the
//! tests of every schema.
//!
//! After validation, bodies are deserialised into typed structs: the schema gives the
//! error messages, the types give the rest of the code something it need not re-check.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;
use serde_json::Value;

mod keywords;
mod python;

use keywords::Walk;
use python::py_str;
pub use python::{pformat, py_repr};

/// One step of a path into an instance or a schema: a member name or an array
/// index (jsonschema's paths mix `str` and `int`, and compare and print them as
/// Python does).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathItem {
    /// An object member (or a schema keyword, property name or pattern).
    Key(String),
    /// An array index (or the index of an `anyOf` alternative).
    Index(usize),
}

impl PathItem {
    fn key(k: &str) -> Self {
        PathItem::Key(k.to_owned())
    }

    /// Python's `repr` of the step, as jsonschema prints paths.
    fn repr(&self) -> String {
        match self {
            PathItem::Key(k) => py_str(k),
            PathItem::Index(i) => i.to_string(),
        }
    }
}

/// A failed validation, worded like Python jsonschema's `str(ValidationError)`.
#[derive(Debug, Clone)]
pub struct SchemaError {
    /// The short message ("0 is less than the minimum of 1").
    pub message: String,
    /// The keyword that failed.
    pub keyword: &'static str,
    /// Path of the failing part of the instance (relative to the `anyOf` alternative
    /// for an error picked from one, as jsonschema prints it).
    pub path: Vec<PathItem>,
    /// Path, in the schema, of the subschema holding the failed keyword (relative in
    /// the same way).
    pub schema_path: Vec<PathItem>,
    /// That subschema.
    pub schema: Box<Value>,
    /// The failing part of the instance.
    pub instance: Box<Value>,
    /// For `anyOf`/`oneOf`: the failures of every alternative, in order.
    context: Box<[SchemaError]>,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let index = |items: &[PathItem]| -> String {
            items.iter().map(|p| format!("[{}]", p.repr())).collect()
        };
        // jsonschema indents the pretty-printed values by four spaces, every line of
        // them.
        let pretty = |v: &Value| pformat(v).replace('\n', "\n    ");
        write!(
            f,
            "{}\n\nFailed validating {} in schema{}:\n    {}\n\nOn instance{}:\n    {}",
            self.message,
            py_str(self.keyword),
            index(&self.schema_path),
            pretty(&self.schema),
            index(&self.path),
            pretty(&self.instance)
        )
    }
}

impl SchemaError {
    /// Whether the instance has (one of) the type(s) its subschema asks for; false
    /// where the subschema names none.
    fn matches_type(&self) -> bool {
        match self.schema.get("type") {
            Some(Value::String(t)) => type_matches(&self.instance, t),
            Some(Value::Array(ts)) => ts
                .iter()
                .any(|t| type_matches(&self.instance, t.as_str().unwrap_or(""))),
            _ => false,
        }
    }
}

/// jsonschema's `relevance` key: `Greater` means `a` is the better match. Shallower
/// errors win; among siblings the one with the greater path (Python compares the
/// path sequences); then an error of another keyword than `anyOf`/`oneOf`; then one
/// whose instance does not have its subschema's type.
fn relevance(a: &SchemaError, b: &SchemaError) -> Ordering {
    let weak = |e: &SchemaError| matches!(e.keyword, "anyOf" | "oneOf");
    b.path
        .len()
        .cmp(&a.path.len())
        .then_with(|| a.path.cmp(&b.path))
        .then_with(|| (!weak(a)).cmp(&!weak(b)))
        .then_with(|| (!a.matches_type()).cmp(&!b.matches_type()))
}

/// jsonschema's `best_match`: the most relevant error (the first of equals); for an
/// `anyOf`/`oneOf` failure, the least relevant (deepest) failure of its alternatives
/// instead, as long as one is strictly least.
fn best_match(errors: Vec<SchemaError>) -> Option<SchemaError> {
    let mut best: Option<SchemaError> = None;
    for e in errors {
        if best
            .as_ref()
            .is_none_or(|b| relevance(&e, b) == Ordering::Greater)
        {
            best = Some(e);
        }
    }
    let mut best = best?;
    while !best.context.is_empty() {
        let mut context = std::mem::take(&mut best.context).into_vec();
        // A stable sort, as Python's `heapq.nsmallest`.
        context.sort_by(relevance);
        if context.len() >= 2 && relevance(&context[0], &context[1]) == Ordering::Equal {
            best.context = context.into_boxed_slice();
            break;
        }
        best = context.swap_remove(0);
    }
    Some(best)
}

/// Validates `instance` against `schema`; on failure returns the error jsonschema's
/// `best_match` would pick.
pub fn validate(instance: &Value, schema: &Value) -> Result<(), SchemaError> {
    let mut walk = Walk::default();
    walk.check(instance, schema);
    match best_match(walk.errors) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A schema pattern compiled with Python's meaning of `$` (end of text, or before a
/// final line break), as `re.search` applies it. Compiled once per pattern and shared:
/// a clone of a `Regex` gets caches of its own, so a clone per check rebuilt the lazy
/// DFA's states on every request (17 of the HTTP workers' 41–45 µs per claim in a
/// claim storm; docs/design/shared-regex.md).
fn regex(pattern: &str) -> Arc<Regex> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    // Looked up by `&str` first: the pattern is copied into a key only when new.
    if let Some(re) = cache.get(pattern) {
        return re.clone();
    }
    let re =
        Arc::new(Regex::new(&python_dollar(pattern)).expect("schema patterns are valid regexes"));
    cache.insert(pattern.to_owned(), re.clone());
    re
}

/// Rewrites each `$` outside a character class to `(?:\n?\z)`.
fn python_dollar(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let (mut escaped, mut in_class) = (false, false);
    for c in pattern.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' => in_class = true,
            ']' => in_class = false,
            '$' if !in_class => {
                out.push_str(r"(?:\n?\z)");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// Whether `v` has the JSON Schema type `ty`.
fn type_matches(v: &Value, ty: &str) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        // Placement's jsonschema counts 1.0 as an integer too; allot's typed bodies
        // cannot take it, so it is refused here, where the message is clear (a
        // difference listed in docs/api.md).
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        other => panic!("unsupported schema type {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemas::*;
    use serde_json::json;

    /// One case of each kind of failure Placement's schemas produce, on allot's copy
    /// of the schema Placement uses there. The expected text is what the real
    /// Placement 16.0.0 produced: `str()` of the error that its `util.extract_json`
    /// gets from `jsonschema.validate` (jsonschema 4.26, Placement's own schema and
    /// uuid format checker) for the same instance, before the envelope turns line
    /// breaks into spaces. `tests/differential/schema_errors.py` compares the same
    /// kinds against a running Placement.
    #[test]
    fn each_kind_words_its_error_as_placement_does() {
        let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "type",
            provider_create(false),
            r#"[]"#,
            "[] is not of type 'object'\n\nFailed validating 'type' in schema:\n    {'type': 'object',\n     'properties': {'name': {'type': 'string', 'maxLength': 200},\n                    'uuid': {'type': 'string', 'format': 'uuid'}},\n     'required': ['name'],\n     'additionalProperties': False}\n\nOn instance:\n    []",
        ),
        (
            "type_list",
            allocations_put(28),
            r#"{"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": "x"}"#,
            "'x' is not of type 'integer', 'null'\n\nFailed validating 'type' in schema['properties']['consumer_generation']:\n    {'type': ['integer', 'null'], 'additionalProperties': False}\n\nOn instance['consumer_generation']:\n    'x'",
        ),
        (
            "required",
            resource_class(),
            r#"{}"#,
            "'name' is a required property\n\nFailed validating 'required' in schema:\n    {'type': 'object',\n     'properties': {'name': {'type': 'string',\n                             'pattern': '^CUSTOM_[A-Z0-9_]+$',\n                             'maxLength': 255}},\n     'required': ['name'],\n     'additionalProperties': False}\n\nOn instance:\n    {}",
        ),
        (
            "additional_properties",
            resource_class(),
            r#"{"name": "CUSTOM_A", "zed": 1, "foo": 2}"#,
            "Additional properties are not allowed ('foo', 'zed' were unexpected)\n\nFailed validating 'additionalProperties' in schema:\n    {'type': 'object',\n     'properties': {'name': {'type': 'string',\n                             'pattern': '^CUSTOM_[A-Z0-9_]+$',\n                             'maxLength': 255}},\n     'required': ['name'],\n     'additionalProperties': False}\n\nOn instance:\n    {'name': 'CUSTOM_A', 'zed': 1, 'foo': 2}",
        ),
        (
            "additional_properties_with_patterns",
            allocations_put(0),
            r#"{"allocations": [{"resource_provider": {"uuid": "b7c5dd2c-5d59-4e52-b0a4-4c6bbb2f1e32"}, "resources": {"vcpu": 1, "disk": 2}}]}"#,
            "'disk', 'vcpu' do not match any of the regexes: '^[A-Z0-9_]+$'\n\nFailed validating 'additionalProperties' in schema['properties']['allocations']['items']['properties']['resources']:\n    {'type': 'object',\n     'minProperties': 1,\n     'patternProperties': {'^[A-Z0-9_]+$': {'type': 'integer',\n                                            'minimum': 1}},\n     'additionalProperties': False}\n\nOn instance['allocations'][0]['resources']:\n    {'vcpu': 1, 'disk': 2}",
        ),
        (
            "minimum_in_pattern_properties",
            inventories_put(),
            r#"{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 0}}}"#,
            "0 is less than the minimum of 1\n\nFailed validating 'minimum' in schema['properties']['inventories']['patternProperties']['^[A-Z0-9_]+$']['properties']['total']:\n    {'type': 'integer', 'maximum': 2147483647, 'minimum': 1}\n\nOn instance['inventories']['VCPU']['total']:\n    0",
        ),
        (
            "maximum_of_a_float",
            inventory_put(),
            r#"{"resource_provider_generation": 0, "total": 1, "allocation_ratio": 3.5e+38}"#,
            "3.5e+38 is greater than the maximum of 3.40282e+38\n\nFailed validating 'maximum' in schema['properties']['allocation_ratio']:\n    {'type': 'number', 'maximum': 3.40282e+38}\n\nOn instance['allocation_ratio']:\n    3.5e+38",
        ),
        (
            "pattern",
            resource_class(),
            r#"{"name": "FOO"}"#,
            "'FOO' does not match '^CUSTOM_[A-Z0-9_]+$'\n\nFailed validating 'pattern' in schema['properties']['name']:\n    {'type': 'string', 'pattern': '^CUSTOM_[A-Z0-9_]+$', 'maxLength': 255}\n\nOn instance['name']:\n    'FOO'",
        ),
        (
            "enum",
            allocation_candidates_query(25),
            r#"{"resources": "VCPU:1", "group_policy": "x"}"#,
            "'x' is not one of ['none', 'isolate']\n\nFailed validating 'enum' in schema['properties']['group_policy']:\n    {'type': 'string', 'enum': ['none', 'isolate']}\n\nOn instance['group_policy']:\n    'x'",
        ),
        (
            "min_length",
            provider_traits(),
            r#"{"traits": [""], "resource_provider_generation": 0}"#,
            "'' should be non-empty\n\nFailed validating 'minLength' in schema['properties']['traits']['items']:\n    {'type': 'string', 'minLength': 1, 'maxLength': 255}\n\nOn instance['traits'][0]:\n    ''",
        ),
        (
            "min_length_of_a_query",
            usages_query(38),
            r#"{"project_id": "p", "consumer_type": ""}"#,
            "'' does not match '^[A-Z0-9_]+$|^all|^unknown$'\n\nFailed validating 'pattern' in schema['properties']['consumer_type']:\n    {'type': 'string',\n     'pattern': '^[A-Z0-9_]+$|^all|^unknown$',\n     'minLength': 1,\n     'maxLength': 255}\n\nOn instance['consumer_type']:\n    ''",
        ),
        (
            "max_length",
            resource_class(),
            r#"{"name": "CUSTOM_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#,
            "'CUSTOM_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' is too long\n\nFailed validating 'maxLength' in schema['properties']['name']:\n    {'type': 'string', 'pattern': '^CUSTOM_[A-Z0-9_]+$', 'maxLength': 255}\n\nOn instance['name']:\n    'CUSTOM_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'",
        ),
        (
            "min_properties",
            allocations_post(13),
            r#"{}"#,
            "{} should be non-empty\n\nFailed validating 'minProperties' in schema:\n    {'type': 'object',\n     'minProperties': 1,\n     'additionalProperties': False,\n     'patternProperties': {'^[0-9a-fA-F-]{36}$': {'type': 'object',\n                                                  'properties': {'allocations': {'type': 'object',\n                                                                                 'minProperties': 0,\n                                                                                 'patternProperties': {'^[0-9a-fA-F-]{36}$': {'type': 'object',\n                                                                                                                              'properties': {'generation': {'type': 'integer'},\n                                                                                                                                             'resources': {'type': 'object',\n                                                                                                                                                           'minProperties': 1,\n                                                                                                                                                           'patternProperties': {'^[A-Z0-9_]+$': {'type': 'integer',\n                                                                                                                                                                                                  'minimum': 1}},\n                                                                                                                                                           'additionalProperties': False}},\n                                                                                                                              'required': ['resources'],\n                                                                                                                              'additionalProperties': False}},\n                                                                                 'additionalProperties': False},\n                                                                 'project_id': {'type': 'string',\n                                                                                'minLength': 1,\n                                                                                'maxLength': 255},\n                                                                 'user_id': {'type': 'string',\n                                                                             'minLength': 1,\n                                                                             'maxLength': 255}},\n                                                  'additionalProperties': False,\n                                                  'required': ['allocations',\n                                                               'project_id',\n                                                               'user_id']}}}\n\nOn instance:\n    {}",
        ),
        (
            "min_items",
            allocations_put(0),
            r#"{"allocations": []}"#,
            "[] should be non-empty\n\nFailed validating 'minItems' in schema['properties']['allocations']:\n    {'type': 'array',\n     'minItems': 1,\n     'items': {'type': 'object',\n               'properties': {'resource_provider': {'type': 'object',\n                                                    'properties': {'uuid': {'type': 'string',\n                                                                            'format': 'uuid'}},\n                                                    'additionalProperties': False,\n                                                    'required': ['uuid']},\n                              'resources': {'type': 'object',\n                                            'minProperties': 1,\n                                            'patternProperties': {'^[A-Z0-9_]+$': {'type': 'integer',\n                                                                                   'minimum': 1}},\n                                            'additionalProperties': False}},\n               'required': ['resource_provider', 'resources'],\n               'additionalProperties': False}}\n\nOn instance['allocations']:\n    []",
        ),
        (
            "unique_items",
            provider_aggregates_v1_1(),
            r#"["f918801a-5e54-4bee-9095-09a9d0c786b8", "f918801a-5e54-4bee-9095-09a9d0c786b8"]"#,
            "['f918801a-5e54-4bee-9095-09a9d0c786b8', 'f918801a-5e54-4bee-9095-09a9d0c786b8'] has non-unique elements\n\nFailed validating 'uniqueItems' in schema:\n    {'type': 'array',\n     'items': {'type': 'string', 'format': 'uuid'},\n     'uniqueItems': True}\n\nOn instance:\n    ['f918801a-5e54-4bee-9095-09a9d0c786b8',\n     'f918801a-5e54-4bee-9095-09a9d0c786b8']",
        ),
        (
            "format_in_items",
            provider_aggregates_v1_19(),
            r#"{"aggregates": ["f918801a-5e54-4bee-9095-09a9d0c786b8", "bad"], "resource_provider_generation": 0}"#,
            "'bad' is not a 'uuid'\n\nFailed validating 'format' in schema['properties']['aggregates']['items']:\n    {'type': 'string', 'format': 'uuid'}\n\nOn instance['aggregates'][1]:\n    'bad'",
        ),
        (
            "any_of_picks_the_nearer_alternative",
            provider_create(true),
            r#"{"name": "a", "parent_provider_uuid": "bad"}"#,
            "'bad' is not a 'uuid'\n\nFailed validating 'format' in schema[0]:\n    {'type': 'string', 'format': 'uuid'}\n\nOn instance:\n    'bad'",
        ),
        (
            "any_of_itself",
            provider_create(true),
            r#"{"name": "a", "parent_provider_uuid": 5}"#,
            "5 is not valid under any of the given schemas\n\nFailed validating 'anyOf' in schema['properties']['parent_provider_uuid']:\n    {'anyOf': [{'type': 'string', 'format': 'uuid'}, {'type': 'null'}]}\n\nOn instance['parent_provider_uuid']:\n    5",
        ),
        (
            "siblings_the_greater_path_wins",
            inventories_put(),
            r#"{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": "x"}, "DISK_GB": {"total": "y"}}}"#,
            "'x' is not of type 'integer'\n\nFailed validating 'type' in schema['properties']['inventories']['patternProperties']['^[A-Z0-9_]+$']['properties']['total']:\n    {'type': 'integer', 'maximum': 2147483647, 'minimum': 1}\n\nOn instance['inventories']['VCPU']['total']:\n    'x'",
        ),
        (
            "wrapped_schema_and_strings",
            resource_class(),
            r#"{"nam": ["a long name with spaces a long name with spaces a long name with spaces a long name with spaces ", {"k": "a long name with spaces a long name with spaces a long name with spaces a long name with spaces "}]}"#,
            "'name' is a required property\n\nFailed validating 'required' in schema:\n    {'type': 'object',\n     'properties': {'name': {'type': 'string',\n                             'pattern': '^CUSTOM_[A-Z0-9_]+$',\n                             'maxLength': 255}},\n     'required': ['name'],\n     'additionalProperties': False}\n\nOn instance:\n    {'nam': ['a long name with spaces a long name with spaces a long name '\n             'with spaces a long name with spaces ',\n             {'k': 'a long name with spaces a long name with spaces a long '\n                   'name with spaces a long name with spaces '}]}",
        ),
        (
            "reprs",
            resource_class(),
            r#"{"nam": "it's \"both\" \u00e9\u00a0\u0001\t\n\\", "n": null, "t": true, "f": [1e-07, -0.0, 1e+16, 123.25]}"#,
            "'name' is a required property\n\nFailed validating 'required' in schema:\n    {'type': 'object',\n     'properties': {'name': {'type': 'string',\n                             'pattern': '^CUSTOM_[A-Z0-9_]+$',\n                             'maxLength': 255}},\n     'required': ['name'],\n     'additionalProperties': False}\n\nOn instance:\n    {'nam': 'it\\'s \"both\" \u{e9}\\xa0\\x01\\t\\n\\\\',\n     'n': None,\n     't': True,\n     'f': [1e-07, -0.0, 1e+16, 123.25]}",
        ),
        ];
        for (kind, schema, instance, expected) in cases {
            let instance: Value = serde_json::from_str(instance).unwrap();
            let got = validate(&instance, &schema).expect_err(kind).to_string();
            assert_eq!(got, expected, "{kind}");
        }
    }

    #[test]
    fn valid_instances_pass() {
        assert!(validate(&json!({"name": "CUSTOM_A"}), &resource_class()).is_ok());
        let parent = json!({"name": "a", "parent_provider_uuid": null});
        assert!(validate(&parent, &provider_create(true)).is_ok());
    }

    #[test]
    fn python_float_reprs() {
        for (f, repr) in [
            (1.5, "1.5"),
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (3.40282e38, "3.40282e+38"),
            (-2.5e-7, "-2.5e-07"),
            (123.25, "123.25"),
        ] {
            assert_eq!(py_repr(&json!(f)), repr);
        }
    }

    #[test]
    fn python_string_reprs() {
        assert_eq!(py_str("a"), "'a'");
        assert_eq!(py_str("it's"), "\"it's\"");
        assert_eq!(py_str("it's \"x\""), "'it\\'s \"x\"'");
        assert_eq!(py_str("a\\b\n\t\u{1}"), "'a\\\\b\\n\\t\\x01'");
        assert_eq!(py_str("\u{e9}\u{a0}"), "'\u{e9}\\xa0'");
    }

    #[test]
    fn pformat_wraps_at_72_columns() {
        let short = json!({"a": [1, 2], "b": null});
        assert_eq!(pformat(&short), "{'a': [1, 2], 'b': None}");
        let long = json!({"key": "x ".repeat(40), "list": [1]});
        assert_eq!(
            pformat(&long),
            "{'key': 'x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x '\n        \
             'x x x x x x x x x ',\n 'list': [1]}"
        );
    }

    #[test]
    fn patterns_end_as_in_python() {
        // Python's `$` also matches before a final line break.
        assert!(regex("^[A-Z]+$").is_match("AB\n"));
        assert!(!regex("^[A-Z]+$").is_match("AB\nC"));
        assert!(regex("[$]").is_match("$"));
    }

    /// A pattern is compiled once and the one `Regex` shared, with its caches: a
    /// clone per check starts its caches empty each time.
    #[test]
    fn a_pattern_is_compiled_once_and_shared() {
        assert!(Arc::ptr_eq(&regex("^[a-z]+$"), &regex("^[a-z]+$")));
        assert!(!Arc::ptr_eq(&regex("^[a-z]+$"), &regex("^[a-y]+$")));
    }

    #[test]
    fn integers_are_json_integers() {
        assert!(validate(&json!(1.0), &json!({"type": "integer"})).is_err());
        assert!(validate(&json!(1), &json!({"type": "integer"})).is_ok());
    }
}
