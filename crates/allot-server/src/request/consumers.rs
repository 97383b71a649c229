//! The requests about the consumers that hold resources (allot's extension, issue
//! 47): the query string of `GET /consumers`, and the bodies of `POST /audit` (the
//! live workloads of a range of uuids) and `POST /audit/delete` (what to remove).

use allot_core::holders::{Holding, Leaked, RemovalRules, UuidRange};
use allot_core::{Timestamp, Uuid};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{JsonBody, QueryParams};
use crate::auth::parse_utc;
use crate::error::ApiError;
use crate::params::{format_checked_uuid, invalid_query};
use crate::schemas;

/// The query string of `GET /consumers`: the filters as given (providers and groups
/// are looked up in the view by the handler), and the page.
#[derive(Debug, Default)]
pub struct ConsumersQuery {
    /// The project.
    pub project_id: Option<String>,
    /// The user.
    pub user_id: Option<String>,
    /// The consumer type.
    pub consumer_type: Option<String>,
    /// Holds something on this provider.
    pub provider: Option<Uuid>,
    /// Holds something in this provider's tree.
    pub in_tree: Option<Uuid>,
    /// Is a member of this server group.
    pub server_group: Option<Uuid>,
    /// What it holds.
    pub holding: Holding,
    /// The most to list (all when `None`).
    pub limit: Option<usize>,
    /// The last consumer of the page before (it need not hold anything any more).
    pub marker: Option<Uuid>,
}

impl ConsumersQuery {
    /// Reads and checks the query string.
    pub fn read(raw: Option<&str>) -> Result<Self, ApiError> {
        let q = QueryParams::checked(raw, &consumers_query())?;
        Ok(ConsumersQuery {
            project_id: q.owned("project_id"),
            user_id: q.owned("user_id"),
            consumer_type: q.owned("consumer_type"),
            provider: q.uuid("resource_provider")?,
            in_tree: q.uuid("in_tree")?,
            server_group: q.uuid("server_group")?,
            // The schema's enum admits only these.
            holding: match q.text("holding") {
                Some("allocations") => Holding::Allocations,
                Some("pending") => Holding::Pending,
                Some("both") => Holding::Both,
                _ => Holding::Any,
            },
            // The schema's pattern admits only positive integers; one past usize
            // asks for more than any list holds, which is no limit.
            limit: q
                .text("limit")
                .map(|l| l.parse::<usize>().unwrap_or(usize::MAX)),
            marker: q.uuid("marker")?,
        })
    }
}

/// The schema of `GET /consumers`'s query string (each parameter's last value).
pub fn consumers_query() -> Value {
    let uuid = json!({"type": "string", "format": "uuid"});
    let id = json!({"type": "string", "minLength": 1, "maxLength": 255});
    json!({
        "type": "object",
        "properties": {
            "project_id": id,
            "user_id": id,
            "consumer_type": {
                "type": "string",
                "pattern": schemas::CONSUMER_TYPE_PATTERN,
                "minLength": 1,
                "maxLength": 255,
            },
            "resource_provider": uuid,
            "in_tree": uuid,
            "server_group": uuid,
            "holding": {"type": "string", "enum": ["allocations", "pending", "both"]},
            "limit": {"type": "string", "pattern": "^[1-9][0-9]*$"},
            "marker": uuid,
        },
        "additionalProperties": false,
    })
}

/// `POST /audit`: a range of consumer uuids and the live workloads in it, sorted.
#[derive(Debug)]
pub struct AuditRequest {
    /// The range.
    pub range: UuidRange,
    /// The live workloads, sorted, each once.
    pub existing: Vec<Uuid>,
}

/// The schema of `POST /audit`.
pub fn audit_schema() -> Value {
    let uuid = json!({"type": "string", "format": "uuid"});
    json!({
        "type": "object",
        "properties": {
            "from": uuid,
            "to": uuid,
            "consumers": {"type": "array", "items": uuid},
        },
        "required": ["consumers"],
        "additionalProperties": false,
    })
}

impl AuditRequest {
    /// Reads and checks the body.
    pub fn read(body: &JsonBody) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct Body {
            from: Option<String>,
            to: Option<String>,
            consumers: Vec<String>,
        }
        let Body {
            from,
            to,
            consumers,
        } = body.read(&audit_schema())?;
        let uuid = checked_uuid;
        let range = UuidRange {
            from: from.as_deref().map(uuid).transpose()?,
            to: to.as_deref().map(uuid).transpose()?,
        };
        let mut existing = consumers
            .iter()
            .map(|raw| uuid(raw))
            .collect::<Result<Vec<_>, _>>()?;
        existing.sort_unstable();
        existing.dedup();
        Ok(AuditRequest { range, existing })
    }
}

/// The share of all holders a removal may take when the request says none: a list of
/// live workloads that misses a twentieth of them is more likely wrong than a cloud
/// that leaked that much.
pub const DEFAULT_MAX_SHARE: f64 = 0.05;

/// `POST /audit/delete`: the consumers to remove, as reported, and the rules.
#[derive(Debug)]
pub struct RemovalRequest {
    /// The consumers, in the order asked.
    pub asked: Vec<Leaked>,
    /// What bounds the removal.
    pub rules: RemovalRules,
}

/// The schema of `POST /audit/delete`.
pub fn removal_schema() -> Value {
    let kind = json!({
        "type": ["string", "null"],
        "pattern": schemas::CONSUMER_TYPE_PATTERN,
        "minLength": 1,
        "maxLength": 255,
    });
    json!({
        "type": "object",
        "properties": {
            "consumers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "consumer_uuid": {"type": "string", "format": "uuid"},
                        "consumer_generation": {"type": "integer", "minimum": 0},
                    },
                    "required": ["consumer_uuid", "consumer_generation"],
                    "additionalProperties": false,
                },
            },
            "listed_at": {"type": "string"},
            "consumer_types": {"type": "array", "items": kind},
            "max_share": {"type": "number", "minimum": 0, "maximum": 1},
            "force": {"type": "boolean"},
        },
        "required": ["consumers", "listed_at"],
        "additionalProperties": false,
    })
}

impl RemovalRequest {
    /// Reads and checks the body.
    pub fn read(body: &JsonBody) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct Item {
            consumer_uuid: String,
            consumer_generation: u64,
        }
        #[derive(Deserialize)]
        struct Body {
            consumers: Vec<Item>,
            listed_at: String,
            consumer_types: Option<Vec<Option<String>>>,
            max_share: Option<f64>,
            #[serde(default)]
            force: bool,
        }
        let body: Body = body.read(&removal_schema())?;
        let asked = body
            .consumers
            .iter()
            .map(|item| {
                Ok(Leaked {
                    uuid: checked_uuid(&item.consumer_uuid)?,
                    generation: item.consumer_generation,
                })
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        let listed_at: Timestamp = parse_utc(&body.listed_at).ok_or_else(|| {
            super::not_valid(format!(
                "'listed_at' is not a time in RFC 3339 (YYYY-MM-DDTHH:MM:SSZ): '{}'",
                body.listed_at
            ))
        })?;
        let types = body
            .consumer_types
            .unwrap_or_else(|| vec![Some("INSTANCE".to_owned()), Some("MIGRATION".to_owned())]);
        Ok(RemovalRequest {
            asked,
            rules: RemovalRules {
                listed_at,
                types,
                max_share: body.max_share.unwrap_or(DEFAULT_MAX_SHARE),
                force: body.force,
            },
        })
    }
}

/// A uuid of a body its schema checked (`format: uuid`).
fn checked_uuid(raw: &str) -> Result<Uuid, ApiError> {
    format_checked_uuid(raw).ok_or_else(|| super::not_valid(format!("'{raw}' is not a 'uuid'")))
}

/// The refusal of a query parameter naming what the view does not have.
pub fn unknown(what: &str, uuid: &Uuid) -> ApiError {
    invalid_query(format!("{what} '{uuid}' not found"))
}
