//! The request of `POST /drains` (an allot extension, issue 44), read into the
//! core's [`NewDrain`], and a drain named in a path.

use std::collections::BTreeMap;

use allot_core::candidates::SearchOptions;
use allot_core::ops::drains::NewDrain;
use allot_core::{TraitName, Uuid};
use serde::Deserialize;

use super::allocations::consumer_uuid;
use super::claims::{with_weighers, Expiry};
use super::{present, JsonBody};
use crate::error::ApiError;
use crate::params::uuid_like;
use crate::schemas;

/// The tree of `POST /drains` as its schema checked it.
#[derive(Debug, Deserialize)]
struct Body {
    roots: Vec<String>,
    #[serde(default)]
    consumers: Option<Vec<String>>,
    #[serde(default)]
    requests: BTreeMap<String, String>,
    #[serde(default)]
    required: Vec<String>,
    #[serde(default)]
    partial: Option<bool>,
    #[serde(default)]
    sort: Option<String>,
    #[serde(default)]
    prefer: Option<String>,
    #[serde(default, deserialize_with = "present")]
    expires_in: Option<Option<i64>>,
    #[serde(default)]
    disable: Option<bool>,
}

/// `POST /drains` read: the drain (named `uuid`, its claims' expiry still to be
/// counted from the moment it is planned), and when its claims expire.
pub fn read_create(
    body: &JsonBody,
    uuid: Uuid,
    options: SearchOptions,
    seed: u64,
) -> Result<(NewDrain, Expiry), ApiError> {
    let body: Body = body.read(&schemas::drain_create())?;
    let uuids = |list: &[String], what: &str| {
        list.iter()
            .map(|u| {
                uuid_like(u).ok_or_else(|| ApiError::bad_request(format!("Malformed {what}: {u}")))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let weigh = super::candidates::weigh_of(body.sort.as_deref(), body.prefer.as_deref(), seed)?;
    let mut requests = BTreeMap::new();
    for (consumer, query) in &body.requests {
        // `sort` and `prefer` weigh every consumer's targets, its own query's too.
        let query = with_weighers(query, body.sort.as_deref(), body.prefer.as_deref());
        let parsed = super::candidates::parse(crate::microversion::MAX, Some(&query), 0, seed)
            .map_err(|e| ApiError::bad_request(format!("Invalid request: {}", e.message)))?;
        requests.insert(consumer_uuid(consumer)?, parsed);
    }
    let required = body
        .required
        .iter()
        .map(|t| {
            TraitName::parse(t)
                .ok_or_else(|| ApiError::bad_request(format!("Invalid trait {t:?}.")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let drain = NewDrain {
        uuid,
        roots: uuids(&body.roots, "root uuid")?,
        consumers: body
            .consumers
            .as_deref()
            .map(|c| uuids(c, "consumer_uuid"))
            .transpose()?,
        requests,
        required,
        partial: body.partial.unwrap_or(false),
        weigh,
        expires_at: None,
        disable: body.disable.unwrap_or(false),
        options,
    };
    let expiry = match body.expires_in {
        // A drain can take hours: no expiry unless asked.
        None | Some(None) => Expiry::Never,
        Some(Some(seconds)) => Expiry::After(seconds),
    };
    Ok((drain, expiry))
}

/// A drain named in a path: a uuid not spelled canonically names no drain (404).
pub fn drain_in_path(raw: &str) -> Result<Uuid, ApiError> {
    allot_core::names::canonical_uuid(raw)
        .ok_or_else(|| ApiError::not_found(format!("No drain with uuid {raw} found.")))
}
