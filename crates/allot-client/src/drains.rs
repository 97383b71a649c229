//! Typed calls for drains (an allot extension, issue 44; `docs/api.md`, "Draining
//! a host"): make one, list, show, confirm and abandon. The answer types are the
//! ones the server writes its answers through.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::claims::{parse, Claim, ClaimExpiry};
use crate::{Client, Method, Result, StatusCode};

/// A drain as the server answers it. Fields in alphabetical order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    /// Each consumer's claim, as it is now (its allocations name the target).
    pub claims: Vec<Claim>,
    /// When it was made.
    pub created_at: String,
    /// The roots it gave `COMPUTE_STATUS_DISABLED`.
    pub disabled: Vec<Uuid>,
    /// When it was confirmed (null while open).
    pub ended_at: Option<String>,
    /// The roots drained.
    pub roots: Vec<Uuid>,
    /// `open` or `confirmed`.
    pub state: String,
    /// With `POST /drains`: the consumers left, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unplaced: Vec<Unplaced>,
    /// Its id.
    pub uuid: Uuid,
}

/// A consumer a drain could not place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unplaced {
    /// The consumer.
    pub consumer_uuid: Uuid,
    /// Why, in the words `GET /allocation_candidates/explain` uses.
    pub reason: String,
}

/// The body of `POST /drains`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NewDrain {
    /// The roots to drain.
    pub roots: Vec<Uuid>,
    /// Only these consumers (every consumer holding allocations there when left
    /// out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<Vec<Uuid>>,
    /// A consumer's own query string instead of the one derived from what it holds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<Uuid, String>,
    /// Traits every target root must have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    /// Whether some consumers may stay unplaced (default false: all or none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    /// `pack`, `spread` or `random`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    /// Preferred traits, comma-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    /// When the claims expire (never when left out: a drain can take hours).
    #[serde(default, skip_serializing_if = "ClaimExpiry::is_server_default")]
    pub expires_in: ClaimExpiry,
    /// Whether to set `COMPUTE_STATUS_DISABLED` on the roots while it is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable: Option<bool>,
}

/// `GET /drains`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DrainList {
    /// The drains, oldest first.
    pub drains: Vec<Drain>,
}

impl Client {
    /// `POST /drains`: 201 with the drain, its claims and the consumers left.
    pub async fn create_drain(&self, drain: &NewDrain) -> Result<Drain> {
        let body = serde_json::to_value(drain).expect("a drain always serialises");
        let response = self
            .expect(Method::POST, "/drains", Some(&body), &[StatusCode::CREATED])
            .await?;
        parse(Method::POST, "/drains", &response.body)
    }

    /// `GET /drains`.
    pub async fn drains(&self) -> Result<Vec<Drain>> {
        let list: DrainList = self.typed(Method::GET, "/drains", None).await?;
        Ok(list.drains)
    }

    /// `GET /drains/{uuid}`.
    pub async fn drain(&self, uuid: &Uuid) -> Result<Drain> {
        self.typed(Method::GET, &format!("/drains/{uuid}"), None)
            .await
    }

    /// `POST /drains/{uuid}/confirm`: every claim still pending confirmed in one
    /// write; the roots open again.
    pub async fn confirm_drain(&self, uuid: &Uuid) -> Result<Drain> {
        let path = format!("/drains/{uuid}/confirm");
        self.typed(Method::POST, &path, None).await
    }

    /// `DELETE /drains/{uuid}`: the drain abandoned, its claims released.
    pub async fn abandon_drain(&self, uuid: &Uuid) -> Result<()> {
        self.expect(
            Method::DELETE,
            &format!("/drains/{uuid}"),
            None,
            &[StatusCode::NO_CONTENT],
        )
        .await
        .map(drop)
    }
}
