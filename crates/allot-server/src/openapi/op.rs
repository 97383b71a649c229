//! One operation of the document, built by chained calls, and its OpenAPI form.
//!
//! Every operation gets the errors any request may get (a version header, token or
//! policy refusal, a store that cannot answer); the tables add the ones their URL
//! can give (an unknown resource, a conflict, a body refused).

use serde_json::{json, Value};

/// What a request to an operation may be answered with, besides its successes.
const ALWAYS: [u16; 5] = [400, 401, 403, 406, 503];

/// One method of one path.
pub(crate) struct Op {
    /// `GET`, `PUT`, `POST` or `DELETE`.
    pub method: &'static str,
    /// The path, with `{name}` parameters.
    pub path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
    description: String,
    params: Vec<Value>,
    /// The request body's schema, the server's own.
    pub body: Option<Value>,
    example: Option<Value>,
    body_required: bool,
    successes: Vec<(u16, Value)>,
    errors: Vec<u16>,
    open: bool,
    versioned: bool,
}

/// An operation with no parameter, body or answer yet.
pub(crate) fn op(method: &'static str, path: &'static str, id: &'static str) -> Op {
    let mut params = Vec::new();
    for name in path_params(path) {
        params.push(json!({
            "name": name,
            "in": "path",
            "required": true,
            "schema": path_schema(name),
        }));
    }
    Op {
        method,
        path,
        id,
        tag: "",
        summary: "",
        description: String::new(),
        params,
        body: None,
        example: None,
        body_required: true,
        successes: Vec::new(),
        errors: ALWAYS.to_vec(),
        open: false,
        versioned: true,
    }
}

/// The names of a path's `{parameters}`.
pub(crate) fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}

/// A path parameter's schema, by its name.
fn path_schema(name: &str) -> Value {
    match name {
        "uuid" | "consumer_uuid" => json!({"type": "string", "format": "uuid"}),
        "name" => json!({"type": "string", "pattern": "^[A-Z0-9_]+$", "maxLength": 255}),
        // A named shape's (issue 47): any character but a control one or '/'.
        "shape" => {
            json!({"type": "string", "pattern": "^[^/\\u0000-\\u001f\\u007f-\\u009f]{1,255}$"})
        }
        "resource_class" => json!({"type": "string", "pattern": "^[A-Z0-9_]+$", "maxLength": 255}),
        _ => json!({"type": "string"}),
    }
}

impl Op {
    /// Its tag, short summary and description.
    pub fn about(mut self, tag: &'static str, summary: &'static str, description: &str) -> Self {
        self.tag = tag;
        self.summary = summary;
        self.description = description.to_owned();
        self
    }

    /// Adds the errors its URL can give.
    pub fn errors(mut self, codes: &[u16]) -> Self {
        for code in codes {
            if !self.errors.contains(code) {
                self.errors.push(*code);
            }
        }
        self
    }

    /// A Placement URL that exists from microversion `1.minor`: 404 before it, as at
    /// 1.0, where a request without the version header is served.
    pub fn since(self, minor: u16) -> Self {
        if minor > 0 {
            self.errors(&[404])
        } else {
            self
        }
    }

    /// A query parameter.
    pub fn query(mut self, name: &str, schema: Value, description: &str) -> Self {
        self.params.push(json!({
            "name": name,
            "in": "query",
            "required": false,
            "schema": schema,
            "description": description,
        }));
        self
    }

    /// The query parameters of one of the query schemas the handlers check (an
    /// object schema of string values, each parameter's last value).
    pub fn query_schema(mut self, schema: &Value) -> Self {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(properties) = schema["properties"].as_object() {
            for (name, property) in properties {
                self.params.push(json!({
                    "name": name,
                    "in": "query",
                    "required": required.contains(&name.as_str()),
                    "schema": property,
                }));
            }
        }
        self
    }

    /// The request body: the server's schema and an example it accepts.
    pub fn body(mut self, schema: Value, example: Value) -> Self {
        self.body = Some(schema);
        self.example = Some(example);
        self.errors(&[400, 413, 415])
    }

    /// A body that may be left out (`POST /claims/{uuid}/confirm`).
    pub fn optional_body(mut self) -> Self {
        self.body_required = false;
        self
    }

    /// A JSON answer with status `code`, its schema a component's.
    pub fn json(mut self, code: u16, component: &str) -> Self {
        let schema = json!({"$ref": format!("#/components/schemas/{component}")});
        self.successes.push((
            code,
            json!({"content": {"application/json": {"schema": schema}}}),
        ));
        self
    }

    /// A JSON answer whose schema is written here.
    pub fn json_schema(mut self, code: u16, schema: Value) -> Self {
        self.successes.push((
            code,
            json!({"content": {"application/json": {"schema": schema}}}),
        ));
        self
    }

    /// An answer with no body.
    pub fn empty(mut self, code: u16) -> Self {
        self.successes.push((code, json!({})));
        self
    }

    /// An answer of another media type, its body text.
    pub fn text(mut self, code: u16, media: &str) -> Self {
        let content = json!({media: {"schema": {"type": "string", "minLength": 1}}});
        self.successes.push((code, json!({"content": content})));
        self
    }

    /// An answer as written (several media types).
    pub fn raw(mut self, code: u16, response: Value) -> Self {
        self.successes.push((code, response));
        self
    }

    /// Needs no token.
    pub fn open(mut self) -> Self {
        self.open = true;
        self.errors.retain(|c| *c != 401 && *c != 403);
        self
    }

    /// Served outside the API's context: no microversion header, no envelope.
    pub fn unversioned(mut self) -> Self {
        self.versioned = false;
        self.errors.clear();
        self
    }

    /// The OpenAPI operation object.
    pub fn to_json(&self) -> Value {
        let mut params = self.params.clone();
        if self.versioned {
            params.insert(
                0,
                json!({"$ref": "#/components/parameters/OpenStackApiVersion"}),
            );
        }
        let mut responses = serde_json::Map::new();
        for (code, response) in &self.successes {
            let mut response = response.clone();
            response["description"] = json!(reason(*code));
            responses.insert(code.to_string(), response);
        }
        let mut errors = self.errors.clone();
        errors.sort_unstable();
        for code in errors {
            responses.insert(
                code.to_string(),
                json!({
                    "description": reason(code),
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }),
            );
        }
        let mut op = json!({
            "operationId": self.id,
            "tags": [self.tag],
            "summary": self.summary,
            "description": self.description,
            "parameters": params,
            "responses": responses,
        });
        if self.open {
            op["security"] = json!([]);
        }
        if let Some(schema) = &self.body {
            op["requestBody"] = json!({
                "required": self.body_required,
                "content": {"application/json": {
                    "schema": schema,
                    "examples": {"accepted": {"value": self.example}},
                }},
            });
        }
        op
    }
}

/// The reason phrase of a status this API answers.
fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request: a malformed version header, query or body",
        401 => "Unauthorized: no token, or one that is not valid",
        403 => "Forbidden: the policy refuses the caller",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable: a microversion out of range, or JSON not accepted",
        409 => "Conflict",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type: the body is not application/json",
        503 => "Service Unavailable: the store cannot answer now (Retry-After where known)",
        _ => "Other",
    }
}
