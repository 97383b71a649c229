//! Typed calls for the consumers that hold resources and the audit of leaked ones (an
//! allot extension, issue 47; `docs/api.md`, "Consumers and the audit"): `GET
//! /consumers`, `POST /audit` and `POST /audit/delete`. The answer types are the ones
//! the server writes its answers through.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::claims::query_string;
use crate::{Client, Method, Result};

/// One consumer that holds allocations, live pending claims, or both. Fields in
/// alphabetical order, as the server writes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Its allocations, summed by class.
    pub allocations: BTreeMap<String, u64>,
    /// Its generation (null when it holds only pending claims).
    pub consumer_generation: Option<u64>,
    /// Its type (null when it has none).
    pub consumer_type: Option<String>,
    /// Its uuid.
    pub consumer_uuid: Uuid,
    /// When its record was made (null when it holds only pending claims).
    pub created_at: Option<String>,
    /// Its live pending claims, summed by class.
    pub pending: BTreeMap<String, u64>,
    /// Its project.
    pub project_id: String,
    /// The providers it holds anything on, sorted.
    pub resource_providers: Vec<Uuid>,
    /// When its allocations last changed (null when it holds only pending claims).
    pub updated_at: Option<String>,
    /// Its user.
    pub user_id: String,
}

/// `GET /consumers`: one page, in uuid order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderList {
    /// The consumers.
    pub consumers: Vec<Holder>,
}

/// The filters and the page of `GET /consumers`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HolderQuery {
    /// The project.
    pub project_id: Option<String>,
    /// The user.
    pub user_id: Option<String>,
    /// The consumer type.
    pub consumer_type: Option<String>,
    /// Holds something on this provider.
    pub resource_provider: Option<Uuid>,
    /// Holds something in this provider's tree.
    pub in_tree: Option<Uuid>,
    /// Is a member of this server group.
    pub server_group: Option<Uuid>,
    /// `allocations`, `pending` or `both`.
    pub holding: Option<String>,
    /// The most to answer.
    pub limit: Option<usize>,
    /// The last consumer of the page before.
    pub marker: Option<Uuid>,
}

/// `POST /audit`: the consumers of a range of uuids that hold resources and are not
/// among the live workloads sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// How many consumers of the range hold resources.
    pub consumers_in_range: usize,
    /// Those not among the live workloads, in uuid order.
    pub leaked: Vec<Holder>,
}

/// `POST /audit`'s body: the live workloads of a range of uuids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRange {
    /// The first uuid of the range (its start when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Uuid>,
    /// The first uuid past the range (its end when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Uuid>,
    /// Every live workload's uuid in the range.
    pub consumers: Vec<Uuid>,
}

/// One consumer to remove, as the audit reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToRemove {
    /// Its generation in the report.
    pub consumer_generation: u64,
    /// The consumer.
    pub consumer_uuid: Uuid,
}

/// `POST /audit/delete`'s body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Removal {
    /// The consumers to remove.
    pub consumers: Vec<ToRemove>,
    /// The types that may be removed (`INSTANCE` and `MIGRATION` when absent; null
    /// names consumers without a type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_types: Option<Vec<Option<String>>>,
    /// Remove past `max_share`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// When the list of live workloads was taken (RFC 3339): nothing created or
    /// changed since is removed.
    pub listed_at: String,
    /// The most of all consumers holding resources one removal may take (0.05 when
    /// absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_share: Option<f64>,
}

/// A consumer a removal left, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Left {
    /// The consumer.
    pub consumer_uuid: Uuid,
    /// `gone`, `changed`, `newer_than_list`, `live_claims` or `consumer_type`.
    pub reason: String,
}

/// `POST /audit/delete`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// The consumers left, each with why.
    pub left: Vec<Left>,
    /// The consumers removed.
    pub removed: Vec<Uuid>,
}

impl Client {
    /// `GET /consumers`: one page of the consumers that hold resources.
    pub async fn consumers(&self, query: &HolderQuery) -> Result<HolderList> {
        let query = query_string(&[
            ("project_id", query.project_id.clone()),
            ("user_id", query.user_id.clone()),
            ("consumer_type", query.consumer_type.clone()),
            (
                "resource_provider",
                query.resource_provider.map(|u| u.to_string()),
            ),
            ("in_tree", query.in_tree.map(|u| u.to_string())),
            ("server_group", query.server_group.map(|u| u.to_string())),
            ("holding", query.holding.clone()),
            ("limit", query.limit.map(|l| l.to_string())),
            ("marker", query.marker.map(|u| u.to_string())),
        ]);
        let path = match query.is_empty() {
            true => "/consumers".to_owned(),
            false => format!("/consumers?{query}"),
        };
        self.typed(Method::GET, &path, None).await
    }

    /// `POST /audit`: the leaked consumers of one range.
    pub async fn audit(&self, range: &AuditRange) -> Result<AuditReport> {
        let body = serde_json::to_value(range).expect("a range always serialises");
        self.typed(Method::POST, "/audit", Some(&body)).await
    }

    /// `POST /audit/delete`: removes what the audit reported, in one write.
    pub async fn audit_delete(&self, removal: &Removal) -> Result<Removed> {
        let body = serde_json::to_value(removal).expect("a removal always serialises");
        self.typed(Method::POST, "/audit/delete", Some(&body)).await
    }
}
