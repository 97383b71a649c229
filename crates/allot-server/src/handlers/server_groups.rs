//! Server groups, an allot extension (issue 44) available at every microversion:
//! `POST/GET /server_groups`, `GET/DELETE /server_groups/{uuid}` and
//! `POST /server_groups/{uuid}/members`.
//!
//! The rules (what a group is, when a member may join, what breaks a rule) are the
//! core's (`allot_core::ops::server_groups`); here are the HTTP concerns, in the
//! order of every handler: content negotiation, policy, the input, then the rule
//! through the host. Members join with their claims too (`server_group` on
//! `POST /claims`), and every allot write that places a member is checked there.

use allot_core::server_groups::ServerGroup;
use allot_core::Uuid;
use allot_store::WriteKind;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::params::invalid_query;
use crate::policy::{authorize, Action};
use crate::request::server_groups::{
    group_in_path, read_create, read_delete_query, read_members, read_put, ListQuery,
};
use crate::request::JsonBody;
use crate::wire::server_groups::server_group_body;
use crate::{http, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/server_groups", get(list).post(create))
        .route("/server_groups/{uuid}", get(show).put(put).delete(delete))
        .route("/server_groups/{uuid}/members", post(members))
}

/// `POST /server_groups`: a new group, without members; 201 with it.
pub async fn create(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::ServerGroupsCreate)?;
    let caller = ctx.identity.as_ref().map_or("", |i| i.user_id.as_str());
    let new = read_create(&body, Uuid::new_v4(), caller)?;
    let (group, now) = app
        .write(WriteKind::ServerGroup, move |view, now| {
            let (group, changes) = view.plan_create_server_group(new, now)?;
            Ok(((group, now), changes))
        })
        .await?;
    let view = app.host.read();
    let response = http::json(
        StatusCode::CREATED,
        &server_group_body(&view, &group, now, false),
    );
    Ok(http::location(
        response,
        &format!("/server_groups/{}", group.uuid),
    ))
}

/// `GET /server_groups`: the groups the filters admit, by uuid, paged by `limit`
/// and `marker` (the last uuid of the page before).
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ServerGroupsList)?;
    let query = ListQuery::read(raw.as_deref())?;
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        if let Some(marker) = query.marker.filter(|m| view.server_group(m).is_none()) {
            return Err(invalid_query(format!(
                "marker '{marker}' is not a server group"
            )));
        }
        let mut groups: Vec<&ServerGroup> = view
            .server_groups()
            .filter(|g| query.marker.is_none_or(|m| g.uuid > m))
            .filter(|g| {
                query
                    .project_id
                    .as_deref()
                    .is_none_or(|p| g.project_id == p)
            })
            .filter(|g| query.policy.is_none_or(|p| g.policy == p))
            .collect();
        groups.sort_by_key(|g| g.uuid);
        groups.truncate(query.limit.unwrap_or(usize::MAX));
        let body = allot_client::server_groups::ServerGroupList {
            server_groups: groups
                .into_iter()
                .map(|g| server_group_body(&view, g, now, false))
                .collect(),
        };
        http::json(StatusCode::OK, &body)
    };
    Ok(ctx.cached(response, now))
}

/// `GET /server_groups/{uuid}`: the group, where each member is now, and how broken
/// its rule is.
pub async fn show(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ServerGroupsShow)?;
    let uuid = group_in_path(&raw)?;
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let group = view.server_group(&uuid).ok_or_else(|| unknown(&uuid))?;
        http::json(StatusCode::OK, &server_group_body(&view, group, now, true))
    };
    Ok(ctx.cached(response, now))
}

/// `PUT /server_groups/{uuid}`: the group made or replaced whole, members included,
/// as another system holds it (`allot server-groups import`): where the members are
/// is not checked, and the answer's `violations` says how broken the group is.
pub async fn put(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
    body: JsonBody,
) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::ServerGroupsCreate)?;
    let uuid = crate::request::server_groups::uuid_in_path(&raw)?;
    let caller = ctx.identity.as_ref().map_or("", |i| i.user_id.as_str());
    let (new, members) = read_put(&body, uuid, caller)?;
    let (group, now) = app
        .write(WriteKind::ServerGroup, move |view, now| {
            let (group, changes) = view.plan_put_server_group(new, &members, now)?;
            Ok(((group, now), changes))
        })
        .await?;
    let view = app.host.read();
    Ok(http::json(
        StatusCode::OK,
        &server_group_body(&view, &group, now, true),
    ))
}

/// `DELETE /server_groups/{uuid}`: refused (409) while it has members, unless
/// `?force=true`; the members stay consumers.
pub async fn delete(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, Action::ServerGroupsDelete)?;
    let uuid = group_in_path(&raw)?;
    let force = read_delete_query(query.as_deref())?;
    app.write(WriteKind::ServerGroup, move |view, _| {
        view.plan_delete_server_group(&uuid, force)
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `POST /server_groups/{uuid}/members`: `{"add": [...], "remove": [...]}`. A
/// member added where it would make a hard rule more broken is refused (409
/// `allot.server_group.violated`), as its claim there would be.
pub async fn members(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
    body: JsonBody,
) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(
        &ctx,
        app.config.settings.policy,
        Action::ServerGroupsMembers,
    )?;
    let uuid = group_in_path(&raw)?;
    let members = read_members(&body)?;
    let (group, now) = app
        .write(WriteKind::ServerGroup, move |view, now| {
            let (group, changes) =
                view.plan_server_group_members(&uuid, &members.add, &members.remove, now)?;
            Ok(((group, now), changes))
        })
        .await?;
    let view = app.host.read();
    Ok(http::json(
        StatusCode::OK,
        &server_group_body(&view, &group, now, true),
    ))
}

fn unknown(uuid: &Uuid) -> ApiError {
    ApiError::not_found(format!("No server group with uuid {uuid} found."))
}
