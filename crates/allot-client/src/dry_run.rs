//! Dry runs of inventory and provider writes (an allot extension, issue 47;
//! `docs/api.md`, "Dry runs"): `POST /dry_run` says what a write would answer and what
//! it would leave over capacity, and changes nothing. The answer types are the ones the
//! server writes its answer through.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::claims::parse;
use crate::{Client, Method, Result, StatusCode};

/// The path of the dry run.
pub const PATH: &str = "/dry_run";

/// The body of `POST /dry_run`: the write, as it would be sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DryRunRequest {
    /// `PUT`, `POST` or `DELETE`.
    pub method: String,
    /// The write's path, such as `/resource_providers/{uuid}/inventories`.
    pub path: String,
    /// The write's body (none for a `DELETE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

/// What the write would do. Fields in alphabetical order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DryRun {
    /// When the write would be refused: the errors of Placement's envelope it would
    /// answer with (`status`, `title`, `detail`, `code`, `request_id`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Value>,
    /// Each class on each provider the write touches that it would leave used beyond
    /// its capacity (empty when the write would be refused).
    pub over_capacity: Vec<OverCapacity>,
    /// The status the write would get.
    pub status: u16,
}

/// A provider as a dry run names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderName {
    /// Its name.
    pub name: String,
    /// Its uuid.
    pub uuid: Uuid,
}

/// One class on one provider used beyond its capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverCapacity {
    /// `(total - reserved) * allocation_ratio`, rounded down (0 with no inventory).
    pub capacity: i64,
    /// Who takes it.
    pub consumers: Vec<Holder>,
    /// By how much `used` exceeds `capacity`.
    pub over: u64,
    /// The class.
    pub resource_class: String,
    /// The provider.
    pub resource_provider: ProviderName,
    /// What allocations and live pending claims take of it.
    pub used: u64,
}

/// A consumer taking some of a class over capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The consumer.
    pub consumer_uuid: Uuid,
    /// Its allocations plus its live claims there.
    pub used: u64,
}

impl Client {
    /// `POST /dry_run`: what `method path` with `body` would answer and leave over
    /// capacity, at the client's microversion.
    pub async fn dry_run(&self, request: &DryRunRequest) -> Result<DryRun> {
        let body = serde_json::to_value(request).expect("a dry run always serialises");
        let response = self
            .expect(Method::POST, PATH, Some(&body), &[StatusCode::OK])
            .await?;
        parse(Method::POST, PATH, &response.body)
    }
}
