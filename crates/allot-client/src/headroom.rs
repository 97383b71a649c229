//! The capacity questions of allot's extension (issue 24): `GET /headroom`, how many
//! more instances of a shape fit now, and `GET /allocation_candidates/explain`, why a
//! query finds what it finds. The server writes its answers through these types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Client, Method, Result};

/// The answer of `GET /headroom`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Headroom {
    /// How many more instances fit, in all.
    pub headroom: u64,
    /// With `group_by`: how many per root, aggregate or trait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<BTreeMap<String, u64>>,
}

/// The answer of `GET /allocation_candidates/explain`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    /// Per request group, in the query's order.
    pub groups: Vec<GroupExplanation>,
    /// Roots in all.
    pub roots: usize,
    /// Roots that pass `root_required`.
    pub roots_allowed: usize,
    /// The candidates the whole request has.
    pub allocation_candidates: usize,
    /// The first stage that left nothing, or null when there are candidates.
    pub emptied_by: Option<String>,
}

/// One group's stages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupExplanation {
    /// The group's suffix (`""` for the unsuffixed group).
    pub suffix: String,
    /// Each stage, in order, and how many providers survive it.
    pub stages: Vec<Stage>,
    /// The providers the capacity stage dropped by the least, nearest first.
    pub nearest: Vec<Miss>,
}

/// A stage and its survivors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    /// `resource_class`, `capacity`, `units`, `required`, `forbidden`, `member_of` or
    /// `in_tree`.
    pub stage: String,
    /// Providers that survive it (and every stage before).
    pub providers: usize,
}

/// A provider that missed by little.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Miss {
    /// The provider.
    pub resource_provider: uuid::Uuid,
    /// The class it lacks room of.
    pub resource_class: String,
    /// How much more room the amount needs.
    pub short_by: u64,
}

impl Client {
    /// `GET /headroom?QUERY`: `query` is `GET /allocation_candidates`'s query string,
    /// with `group_by=root|aggregate|trait:PREFIX` if a breakdown is wanted.
    pub async fn headroom(&self, query: &str) -> Result<Headroom> {
        let path = format!("/headroom?{}", query.trim_start_matches('?'));
        self.typed(Method::GET, &path, None).await
    }

    /// `GET /allocation_candidates/explain?QUERY`.
    pub async fn explain(&self, query: &str) -> Result<Explanation> {
        let path = format!(
            "/allocation_candidates/explain?{}",
            query.trim_start_matches('?')
        );
        self.typed(Method::GET, &path, None).await
    }
}
