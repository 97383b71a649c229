//! `GET /headroom` (allot's extension, issue 24): how many more instances of a shape
//! fit now, in total and per group. The server writes its answer through this type.

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

impl Client {
    /// `GET /headroom?QUERY`: `query` is `GET /allocation_candidates`'s query string,
    /// with `group_by=root|aggregate|trait:PREFIX` if a breakdown is wanted.
    pub async fn headroom(&self, query: &str) -> Result<Headroom> {
        let path = format!("/headroom?{}", query.trim_start_matches('?'));
        self.typed(Method::GET, &path, None).await
    }
}
