//! Typed calls for server groups (an allot extension, issue 44; `docs/api.md`,
//! "Server groups"): create, list, show, delete, and members added or removed.
//!
//! As with claims, the answer types are the ones the server writes its answers
//! through, so they are the wire contract itself; times are RFC 3339 strings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{path_segment, Client, Method, Result, StatusCode};

/// Nova's rules of a group: `max_server_per_host` (anti-affinity policies only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// How many members one domain may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_server_per_host: Option<u32>,
}

/// A server group as the server answers it. Fields in alphabetical order, as the
/// server's bodies have them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerGroup {
    /// When it was made.
    pub created_at: String,
    /// Whether Placement's allocation writes answer to it too.
    pub enforce_on_allocations: bool,
    /// The members (consumer uuids), sorted.
    pub members: Vec<Uuid>,
    /// Its name.
    pub name: String,
    /// `affinity`, `anti-affinity`, `soft-affinity` or `soft-anti-affinity`.
    pub policy: String,
    /// Its project.
    pub project_id: String,
    /// Nova's rules.
    pub rules: Rules,
    /// `root`, `aggregate` or `trait:PREFIX`.
    pub scope: String,
    /// When it last changed.
    pub updated_at: String,
    /// Its user.
    pub user_id: String,
    /// Its id.
    pub uuid: Uuid,
    /// With `GET /server_groups/{uuid}`: how broken the rule is now (0: it holds;
    /// see `docs/api.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<u64>,
    /// With `GET /server_groups/{uuid}`: where each member is, by consumer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<BTreeMap<Uuid, MemberPlace>>,
}

/// Where a member is: the roots of its live claims if it has any, else of its
/// allocations, and the scope's domains of those roots.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberPlace {
    /// The roots (empty: it holds nothing).
    pub roots: Vec<Uuid>,
    /// The domains' keys, as `GET /headroom`'s `group_by` writes them.
    pub domains: Vec<String>,
}

/// The body of `POST /server_groups`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewServerGroup {
    /// The group's uuid (Nova's, to keep a group's identity; drawn when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<Uuid>,
    /// Its name.
    pub name: String,
    /// Its project.
    pub project_id: String,
    /// Its user (the caller's when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Nova's policy name.
    pub policy: String,
    /// Nova's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Rules>,
    /// `root` (the default), `aggregate` or `trait:PREFIX`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Whether Placement's allocation writes answer to it too (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforce_on_allocations: Option<bool>,
    /// With `PUT /server_groups/{uuid}` only: the members, whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<Uuid>>,
}

/// The body of `POST /server_groups/{uuid}/members`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Members {
    /// Consumers to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Uuid>,
    /// Consumers to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<Uuid>,
}

/// `GET /server_groups`: one page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerGroupList {
    /// The groups, by uuid.
    pub server_groups: Vec<ServerGroup>,
}

/// Which groups `GET /server_groups` lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerGroupFilter {
    /// Groups of this project.
    pub project_id: Option<String>,
    /// Groups of this policy.
    pub policy: Option<String>,
    /// At most this many.
    pub limit: Option<u64>,
    /// Groups after this one.
    pub marker: Option<Uuid>,
}

impl Client {
    /// `POST /server_groups`: 201 with the group.
    pub async fn create_server_group(&self, group: &NewServerGroup) -> Result<ServerGroup> {
        let body = serde_json::to_value(group).expect("a new group always serialises");
        let response = self
            .expect(
                Method::POST,
                "/server_groups",
                Some(&body),
                &[StatusCode::CREATED],
            )
            .await?;
        crate::claims::parse(Method::POST, "/server_groups", &response.body)
    }

    /// `PUT /server_groups/{uuid}`: creates or replaces the group whole, members
    /// included, without checking where they are (an import of a group as Nova
    /// holds it); the group as `GET` shows it, `violations` saying how broken it is.
    pub async fn put_server_group(
        &self,
        uuid: &Uuid,
        group: &NewServerGroup,
    ) -> Result<ServerGroup> {
        let path = format!("/server_groups/{uuid}");
        let body = serde_json::to_value(group).expect("a group always serialises");
        self.typed(Method::PUT, &path, Some(&body)).await
    }

    /// `GET /server_groups?...`: one page of groups, by uuid.
    pub async fn server_groups(&self, filter: &ServerGroupFilter) -> Result<Vec<ServerGroup>> {
        let query = crate::claims::query_string(&[
            ("project_id", filter.project_id.clone()),
            ("policy", filter.policy.clone()),
            ("limit", filter.limit.map(|l| l.to_string())),
            ("marker", filter.marker.map(|u| u.to_string())),
        ]);
        let path = match query.is_empty() {
            true => "/server_groups".to_owned(),
            false => format!("/server_groups?{query}"),
        };
        let list: ServerGroupList = self.typed(Method::GET, &path, None).await?;
        Ok(list.server_groups)
    }

    /// `GET /server_groups/{uuid}`: the group, where each member is and how broken
    /// its rule is.
    pub async fn server_group(&self, uuid: &Uuid) -> Result<ServerGroup> {
        let path = format!("/server_groups/{}", path_segment(&uuid.to_string()));
        self.typed(Method::GET, &path, None).await
    }

    /// `DELETE /server_groups/{uuid}[?force=true]`: refused (409) while it has
    /// members unless `force`.
    pub async fn delete_server_group(&self, uuid: &Uuid, force: bool) -> Result<()> {
        let mut path = format!("/server_groups/{uuid}");
        if force {
            path.push_str("?force=true");
        }
        self.expect(Method::DELETE, &path, None, &[StatusCode::NO_CONTENT])
            .await
            .map(drop)
    }

    /// `POST /server_groups/{uuid}/members`: adds and removes members; the group as
    /// it is after.
    pub async fn server_group_members(
        &self,
        uuid: &Uuid,
        members: &Members,
    ) -> Result<ServerGroup> {
        let path = format!("/server_groups/{uuid}/members");
        let body = serde_json::to_value(members).expect("uuids always serialise");
        self.typed(Method::POST, &path, Some(&body)).await
    }
}
