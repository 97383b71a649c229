//! The request side of the API, mirroring [`crate::wire`]: one typed form per body
//! and per query string, parsed and checked once, so that a handler receives typed
//! values only (classes, traits, uuids, amounts, the generation as given) and walks
//! no JSON.
//!
//! Every form is read the same way: the text is parsed ([`JsonBody`] for bodies,
//! [`QueryParams`] for query strings), checked against Placement's JSON Schema
//! (`crate::schemas`, validated by `crate::schema` for Placement's exact words), and
//! the checked tree is converted into the form's struct in one function per form.
//! What the schema lets through but the conversion cannot read is refused there, with
//! a 400 that says so, never replaced by a default.
//!
//! The handlers still decide *when* each step runs (Placement checks the content type,
//! the policy and the body in an order that differs from endpoint to endpoint), so
//! the steps are separate calls: [`JsonBody::require_json`], [`JsonBody::value`],
//! [`checked`].

pub mod allocations;
pub mod candidates;
pub mod claims;
pub mod classes;
pub mod consumers;
pub mod drains;
pub mod dry_run;
pub mod headroom;
pub mod inventories;
pub mod path;
pub mod providers;
pub mod query_form;
pub mod reshaper;
pub mod server_groups;
pub mod shapes;
pub mod traits;
pub mod usages;

use std::marker::PhantomData;

use allot_core::Uuid;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

pub use allot_core::ops::GivenGeneration;

use crate::error::ApiError;
use crate::http::{self, Query};
use crate::limits::BodyDeadline;
use crate::params::{invalid_query, require_utf8_query, uuid_like};
use crate::schema;

/// A request body as received: its headers (for the content type) and its bytes.
/// Extracting it only reads the body; the handler says when each check runs.
#[derive(Debug, Clone, Default)]
pub struct JsonBody {
    headers: HeaderMap,
    bytes: Bytes,
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let headers = req.headers().clone();
        let deadline = req.extensions().get::<BodyDeadline>().copied();
        let bytes =
            Bytes::from_request(req, state)
                .await
                .map_err(|rejection: BytesRejection| {
                    body_timed_out(deadline).unwrap_or_else(|| rejection.into_response())
                })?;
        Ok(JsonBody { headers, bytes })
    }
}

/// The answer to a body that could not be read because its time ran out: 408, and
/// the connection closed after it (the rest of the body may still be on its way).
/// `None` if the time had not run out (the client went away, or the size limit).
pub fn body_timed_out(deadline: Option<BodyDeadline>) -> Option<Response> {
    let deadline = deadline.filter(BodyDeadline::passed)?;
    let mut response = ApiError::request_timeout(deadline.limit()).into_response();
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    Some(response)
}

impl JsonBody {
    /// A body for tests and callers that have one in hand.
    pub fn new(headers: HeaderMap, bytes: impl Into<Bytes>) -> Self {
        JsonBody {
            headers,
            bytes: bytes.into(),
        }
    }

    /// Whether the request came without a body.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Checks the content type only (400 without one when there is a body, 415 for
    /// anything but JSON), for endpoints where Placement does so before it reads the
    /// body.
    pub fn require_json(&self) -> Result<(), ApiError> {
        http::require_json_content(&self.headers, &self.bytes)
    }

    /// The content type checked and the body parsed (400 "Malformed JSON").
    pub fn value(&self) -> Result<Value, ApiError> {
        http::json_value(&self.headers, &self.bytes)
    }

    /// The body parsed, checked against `schema` and read into `T`.
    pub fn read<T: DeserializeOwned>(&self, schema: &Value) -> Result<T, ApiError> {
        checked(self.value()?, schema)
    }
}

/// A 400 for a body that fails its schema, or that the schema let through but its
/// typed form cannot read, with Placement's prefix.
pub fn not_valid(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("JSON does not validate: {why}"))
}

/// Checks a parsed body against its schema and reads it into its typed form.
pub fn checked<T: DeserializeOwned>(value: Value, schema: &Value) -> Result<T, ApiError> {
    schema::validate(&value, schema).map_err(not_valid)?;
    serde_json::from_value(value).map_err(not_valid)
}

/// A query string, decoded: every parameter with all its values, and the last value
/// of each (what Placement reads for a single-valued parameter, and what its schema
/// checks).
#[derive(Debug, Clone, Default)]
pub struct QueryParams {
    all: Query,
    /// An object: the tree the schema validator takes, kept as one so that checking
    /// it copies nothing.
    last: Value,
}

impl QueryParams {
    /// Decodes a raw query string (None for none), refusing one that is not UTF-8.
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        require_utf8_query(raw.unwrap_or(""))?;
        let all = Query::parse(raw);
        let mut last = Map::new();
        for (key, value) in &all.0 {
            last.insert(key.clone(), Value::String(value.clone()));
        }
        Ok(QueryParams {
            all,
            last: Value::Object(last),
        })
    }

    /// Decodes a raw query string and checks it against `schema`.
    pub fn checked(raw: Option<&str>, schema: &Value) -> Result<Self, ApiError> {
        let query = Self::parse(raw)?;
        query.check(schema)?;
        Ok(query)
    }

    /// Takes the parameters named `keys` out into a query of their own: allot's
    /// extensions of a Placement query, checked apart so that Placement's schema, and
    /// the words of its refusals, stay Placement's.
    pub fn split_off(&mut self, keys: &[&str]) -> QueryParams {
        let (taken, kept) = std::mem::take(&mut self.all.0)
            .into_iter()
            .partition(|(k, _)| keys.contains(&k.as_str()));
        self.all.0 = kept;
        let mut last = Map::new();
        if let Value::Object(map) = &mut self.last {
            for key in keys {
                if let Some(value) = map.shift_remove(*key) {
                    last.insert((*key).to_owned(), value);
                }
            }
        }
        QueryParams {
            all: Query(taken),
            last: Value::Object(last),
        }
    }

    /// Checks the parameters (their last values) against `schema`, with Placement's
    /// prefix on the validator's words.
    pub fn check(&self, schema: &Value) -> Result<(), ApiError> {
        schema::validate(&self.last, schema).map_err(invalid_query)
    }

    /// The last value of a parameter.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.last.get(key).and_then(Value::as_str)
    }

    /// The last value of a parameter, owned.
    pub fn owned(&self, key: &str) -> Option<String> {
        self.text(key).map(str::to_owned)
    }

    /// Every value of a repeatable parameter, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.all.all(key)
    }

    /// A uuid parameter whose schema says `format: uuid`: read as Placement reads
    /// uuids (`params::uuid_like`).
    pub fn uuid(&self, key: &str) -> Result<Option<Uuid>, ApiError> {
        self.text(key)
            .map(|raw| {
                uuid_like(raw).ok_or_else(|| invalid_query(format!("'{raw}' is not a 'uuid'")))
            })
            .transpose()
    }
}

/// The entries of a JSON object in the order of the request text (serde_json's
/// `preserve_order` keeps it; a repeated key has its first place and its last value,
/// as in Placement's Python dicts). Placement walks request objects in that order,
/// which decides which of several problems a request is refused for.
#[derive(Debug)]
pub struct Entries<T>(pub Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Walk<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Walk<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(Walk(PhantomData))
    }
}

/// Tells a key given as `null` (Some(None)) from one left out (None, by
/// `#[serde(default)]`).
pub(crate) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// Reads a provider generation as the request gives it: any integer the schema let
/// through, as a [`GivenGeneration`].
pub(crate) fn given_generation<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<GivenGeneration, D::Error> {
    i128::deserialize(deserializer).map(GivenGeneration)
}

/// A JSON body with its content type, for the tests of the forms.
#[cfg(test)]
pub(crate) fn test_body(value: Value) -> JsonBody {
    let mut headers = HeaderMap::new();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    JsonBody::new(headers, value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generations_as_given() {
        #[derive(Deserialize)]
        struct G {
            #[serde(deserialize_with = "given_generation")]
            g: GivenGeneration,
        }
        let read = |v: Value| serde_json::from_value::<G>(json!({ "g": v })).map(|g| g.g);
        assert_eq!(read(json!(4)).unwrap(), GivenGeneration(4));
        assert_eq!(read(json!(-1)).unwrap().to_string(), "-1");
        let huge = read(json!(u64::MAX)).unwrap();
        assert!(huge.matches(u64::MAX) && !huge.matches(0));
        assert!(read(json!("1")).is_err());
    }

    #[test]
    fn queries_keep_every_value_and_check_the_last() {
        let q = QueryParams::parse(Some("a=1&a=2&u=2290d4af9e6e400b9d651ee01376f71a")).unwrap();
        assert_eq!(q.all("a"), ["1", "2"]);
        assert_eq!(q.text("a"), Some("2"));
        assert_eq!(
            q.uuid("u").unwrap().unwrap().to_string(),
            "2290d4af-9e6e-400b-9d65-1ee01376f71a"
        );
        assert_eq!(q.uuid("missing").unwrap(), None);
        let schema =
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["1"]}}});
        let e = q.check(&schema).unwrap_err();
        assert!(e
            .message
            .starts_with("Invalid query string parameters: '2' is not one of ['1']"));
        assert!(QueryParams::parse(Some("a=%FF")).is_err());
    }
}
