//! `GET /status` (allot's own, issue 23): one node's state at a glance, what `allot
//! status` prints. The server fills it from its view, its writer and the counters of
//! its metrics (`allot-server/src/status.rs`); the same type reads it back here.

use serde::{Deserialize, Serialize};

use crate::{Client, Method, Result};

/// Where to ask.
pub const PATH: &str = "/status";

/// One node's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Status {
    /// The allot build serving.
    pub version: String,
    /// The store it runs on.
    pub store: StoreStatus,
    /// The health check's verdict (`/healthcheck`).
    pub health: Health,
    /// How long this node's view may lag behind the store, in seconds (0 when no
    /// other node writes to it).
    pub view_lag_seconds: f64,
    /// Seconds since the server started.
    pub uptime_seconds: f64,
    /// What the view holds.
    pub counts: Counts,
    /// Requests answered since the start.
    pub requests: Requests,
    /// Allocation writes and pending claims since the start.
    pub claims: Claims,
}

/// The store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreStatus {
    /// `sqlite` or `postgresql`.
    pub engine: String,
    /// Its schema version.
    pub schema: u64,
    /// Whether other nodes write to it.
    pub shared: bool,
}

/// The health check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// No reason to fail.
    pub healthy: bool,
    /// Its reasons to fail (oslo's words: `DISABLED BY FILE`, `STORE UNAVAILABLE`, ...).
    pub reasons: Vec<String>,
}

/// What the view holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Resource providers.
    pub providers: u64,
    /// Consumers holding allocations.
    pub consumers: u64,
    /// Pending claims counting against capacity now.
    pub claims_pending: u64,
}

/// Requests since the start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requests {
    /// Answered.
    pub total: u64,
    /// `total` over the uptime.
    pub per_second: f64,
    /// The 99th percentile of their latency, in milliseconds, estimated from the
    /// latency histogram's buckets as Prometheus' `histogram_quantile` does (None
    /// before the first request).
    pub p99_ms: Option<f64>,
}

/// Allocation writes and pending claims since the start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// Answered 2xx.
    pub accepted: u64,
    /// Refused (any other answer).
    pub refused: u64,
}

impl Client {
    /// `GET /status`.
    pub async fn status(&self) -> Result<Status> {
        let body = self.json(Method::GET, PATH, None).await?;
        serde_json::from_value(body).map_err(|e| crate::Error::Decode {
            method: Method::GET,
            path: PATH.to_owned(),
            message: e.to_string(),
        })
    }
}
