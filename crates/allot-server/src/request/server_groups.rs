//! The requests of the server groups API (an allot extension, issue 44): the bodies
//! of `POST /server_groups`, `PUT /server_groups/{uuid}` and
//! `POST /server_groups/{uuid}/members`, and the query
//! strings of `GET /server_groups` and `DELETE /server_groups/{uuid}`.

use allot_client::server_groups::{Members, NewServerGroup as Body};
use allot_core::ops::server_groups::NewServerGroup;
use allot_core::server_groups::{Policy, Scope};
use allot_core::Uuid;

use super::{JsonBody, QueryParams};
use crate::error::ApiError;
use crate::schemas;

/// Reads `POST /server_groups`: the group, its uuid drawn when the body names none
/// (`drawn`), its user the caller's when the body names none.
pub fn read_create(body: &JsonBody, drawn: Uuid, caller: &str) -> Result<NewServerGroup, ApiError> {
    convert(body.read(&schemas::server_group_create())?, drawn, caller)
}

/// Reads `PUT /server_groups/{uuid}`: the group named `uuid`, and its members.
pub fn read_put(
    body: &JsonBody,
    uuid: Uuid,
    caller: &str,
) -> Result<(NewServerGroup, Vec<Uuid>), ApiError> {
    let mut body: Body = body.read(&schemas::server_group_put())?;
    let members = body.members.take().unwrap_or_default();
    Ok((convert(body, uuid, caller)?, members))
}

/// A group's body, checked by its schema, as the core takes it.
fn convert(body: Body, drawn: Uuid, caller: &str) -> Result<NewServerGroup, ApiError> {
    // The schema's enum admits only Nova's names.
    let policy = Policy::parse(&body.policy)
        .ok_or_else(|| ApiError::bad_request(format!("Unknown policy {:?}.", body.policy)))?;
    let scope = match body.scope.as_deref() {
        None => Scope::Root,
        Some(text) => Scope::parse(text).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid scope {text:?}: 'root', 'aggregate' or 'trait:PREFIX', PREFIX the \
                 start of a trait's name (upper-case letters, digits and '_')."
            ))
        })?,
    };
    let max = body.rules.and_then(|r| r.max_server_per_host);
    if max.is_some() && !policy.is_anti() {
        // As Nova: the rule is an anti-affinity group's.
        return Err(ApiError::bad_request(
            "rules.max_server_per_host goes with 'anti-affinity' or 'soft-anti-affinity'.",
        ));
    }
    Ok(NewServerGroup {
        uuid: body.uuid.unwrap_or(drawn),
        name: body.name,
        project_id: body.project_id,
        user_id: body.user_id.unwrap_or_else(|| caller.to_owned()),
        policy,
        max_per_domain: max.unwrap_or(1),
        scope,
        enforce_on_allocations: body.enforce_on_allocations.unwrap_or(false),
    })
}

/// Reads `POST /server_groups/{uuid}/members`: the consumers to add and to remove.
pub fn read_members(body: &JsonBody) -> Result<Members, ApiError> {
    body.read(&schemas::server_group_members())
}

/// The query string of `GET /server_groups`.
#[derive(Debug, Default)]
pub struct ListQuery {
    /// Groups of this project.
    pub project_id: Option<String>,
    /// Groups of this policy.
    pub policy: Option<Policy>,
    /// At most this many.
    pub limit: Option<usize>,
    /// Groups after this one.
    pub marker: Option<Uuid>,
}

impl ListQuery {
    /// Reads and checks the query string.
    pub fn read(raw: Option<&str>) -> Result<Self, ApiError> {
        let q = QueryParams::checked(raw, &schemas::server_groups_query())?;
        Ok(ListQuery {
            project_id: q.owned("project_id"),
            // The schema's enum admits only Nova's names.
            policy: q.text("policy").and_then(Policy::parse),
            // As `GET /claims`: one past usize is no limit.
            limit: q
                .text("limit")
                .map(|l| l.parse::<usize>().unwrap_or(usize::MAX)),
            marker: q.uuid("marker")?,
        })
    }
}

/// The query string of `DELETE /server_groups/{uuid}`: whether members go too.
pub fn read_delete_query(raw: Option<&str>) -> Result<bool, ApiError> {
    let q = QueryParams::checked(raw, &schemas::server_group_delete_query())?;
    Ok(q.text("force") == Some("true"))
}

/// A group a `PUT` names: any uuid, which becomes the group's in its canonical
/// spelling (anything else is a 400: the path names what to make).
pub fn uuid_in_path(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::try_parse(raw)
        .map_err(|_| ApiError::bad_request(format!("Invalid server group uuid {raw:?}.")))
}

/// A group named in a path: a uuid not spelled canonically names no group (404).
pub fn group_in_path(raw: &str) -> Result<Uuid, ApiError> {
    allot_core::names::canonical_uuid(raw)
        .ok_or_else(|| ApiError::not_found(format!("No server group with uuid {raw} found.")))
}
