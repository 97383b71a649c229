//! The pages about server groups and drains (issue 44): every server group with how
//! broken its rule is now (`/ui/groups`, paged), one group with where each member is
//! (`/ui/groups/{uuid}`), and every drain with its progress (`/ui/drains`).
//!
//! They read what `GET /server_groups/{uuid}` and `GET /drains` answer, from the
//! same view functions (`State::member_roots`, `member_domains`, `group_broken`,
//! `drains`), at the server's `now`, after the same policy rules, so that the page
//! and the API never disagree about where a member is or whether a rule holds.

use allot_core::drains::{Drain, DrainClaim};
use allot_core::names::SHARING_TRAIT;
use allot_core::server_groups::{Domain, ServerGroup};
use allot_core::{Claim, ClaimState, ProviderId, State, Timestamp};
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use maud::{html, Markup};

use super::format::{grouped, provider_ref};
use super::{page, page_number, pager, path_uuid, query_pairs, Tab, UiError, Viewer};
use crate::auth::format_utc;
use crate::policy::Action;

/// Groups per page of the list.
pub const PER_PAGE: usize = 50;
/// The most members listed on a group's page, and consumers on a drain.
pub const ROWS_SHOWN: usize = 500;

/// `GET /ui/groups?page=N`: every server group, by name then uuid.
pub async fn list(viewer: Viewer, RawQuery(raw): RawQuery) -> Result<Response, UiError> {
    viewer.require(&[Action::ServerGroupsList])?;
    let pairs = query_pairs(raw.as_deref())?;
    let page_no = page_number(&pairs)?;
    let now = viewer.app.host.now();
    let view = viewer.app.host.read();
    let mut groups: Vec<&ServerGroup> = view.server_groups().collect();
    // The view keeps groups in no order; a person looks them up by name.
    groups.sort_by(|a, b| a.name.cmp(&b.name).then(a.uuid.cmp(&b.uuid)));
    let total = groups.len();
    let shown: Vec<&ServerGroup> = groups
        .into_iter()
        .skip((page_no - 1) * PER_PAGE)
        .take(PER_PAGE)
        .collect();
    let content = html! {
        h1 { "Server groups" }
        p.hint { "Nova's affinity rules, kept by allot's writer: a write that would make a hard rule more broken is refused. "
            "Violations: how broken the rule is now (anti-affinity: members beyond the maximum in each domain, added up; affinity: placed members outside the domain that holds the most)." }
        table.server-groups {
            thead { tr { th { "Name" } th { "Project" } th { "Policy" } th { "Scope" } th.num { "Max per host" } th.num { "Members" } th.num { "Violations" } } }
            tbody {
                @for g in &shown {
                    tr data-group=(g.uuid) {
                        td { a href={"/ui/groups/" (g.uuid)} { (g.name) } br; code.uuid { (g.uuid) } }
                        td { (g.project_id) }
                        td.policy { (g.policy.as_str()) }
                        td { code { (g.scope) } }
                        td.num { (max_per_host(g)) }
                        td.num { (grouped(g.members.len() as i128)) }
                        // Only the page's rows are judged: each asks where every member is.
                        td.num { (violations(view.group_broken(&g.rule(), &g.members, now))) }
                    }
                }
                @if shown.is_empty() { tr { td colspan="7" { "No server group." } } }
            }
        }
        (pager("/ui/groups?", page_no, shown.len(), total, PER_PAGE))
    };
    Ok(page(&viewer, Tab::Groups, "Server groups", content))
}

/// Nova's `max_server_per_host`: a rule of the anti-affinity policies only.
fn max_per_host(g: &ServerGroup) -> Markup {
    if g.policy.is_anti() {
        html! { (g.max_per_domain) }
    } else {
        html! { span.hint { "—" } }
    }
}

/// A rule's number: "holds" at 0, else the number, marked (it is what to act on).
fn violations(broken: u64) -> Markup {
    html! {
        @if broken == 0 { span.holds data-violations="0" { "holds" } }
        @else { span.broken data-violations=(broken) { (grouped(broken as i128)) } }
    }
}

/// `GET /ui/groups/{uuid}`: the group, and where each member is now.
pub async fn show(viewer: Viewer, Path(uuid): Path<String>) -> Result<Response, UiError> {
    viewer.require(&[Action::ServerGroupsShow])?;
    let uuid = path_uuid(&uuid)?;
    let now = viewer.app.host.now();
    let view = viewer.app.host.read();
    let Some(g) = view.server_group(&uuid) else {
        return Err(UiError::NotFound(format!(
            "No server group with uuid {uuid} found."
        )));
    };
    let rule = g.rule();
    let names = viewer.sees_providers();
    let content = html! {
        h1 { "Server group " (g.name) }
        p.meta { code.uuid { (g.uuid) } " · project " (g.project_id) " · user " (g.user_id)
            " · made " (format_utc(g.created_at)) " · changed " (format_utc(g.updated_at)) }
        table.fields {
            tbody {
                tr { th { "Policy" } td.policy { (g.policy.as_str())
                    @if !g.policy.is_hard() { span.hint { " (preferred, never refused)" } } } }
                tr { th { "Scope" } td { code { (g.scope) } } }
                tr { th { "Max per host" } td { (max_per_host(g)) } }
                tr { th { "Checked on Placement's allocation writes" } td { @if g.enforce_on_allocations { "yes" } @else { "no" } } }
                tr { th { "Members" } td { (grouped(g.members.len() as i128)) } }
                tr { th { "Violations" } td { (violations(view.group_broken(&rule, &g.members, now))) } }
            }
        }
        h2 { "Members" }
        p.hint { "A member is on the roots of its live claims if it has any, else on those of its allocations; a sharing provider is no place." }
        table.members {
            thead { tr { th { "Consumer" } th { "Roots" } th { "Domains" } } }
            tbody {
                @for m in g.members.iter().take(ROWS_SHOWN) {
                    tr data-consumer=(m) {
                        td { a href={"/ui/consumers/" (m)} { code.uuid { (m) } } }
                        td { (roots(&view, &view.member_roots(m, now), names)) }
                        td { (domains(&view, &view.member_domains(&rule, m, now), names)) }
                    }
                }
                @if g.members.is_empty() { tr { td colspan="3" { "No member." } } }
            }
        }
        @if g.members.len() > ROWS_SHOWN {
            p.hint { "The first " (ROWS_SHOWN) " of " (grouped(g.members.len() as i128)) " members." }
        }
    };
    Ok(page(&viewer, Tab::Groups, &g.name, content))
}

/// Root providers by name, each linked to its page, for a caller who may read
/// providers (`names`), else by uuid; "nowhere" for none.
fn roots(view: &State, ids: &[ProviderId], names: bool) -> Markup {
    html! {
        @if ids.is_empty() { span.hint { "nowhere (holds nothing)" } }
        @for (i, id) in ids.iter().enumerate() {
            @if i > 0 { ", " }
            (provider_ref(view, &view.uuid_of(*id), names, Some("root")))
        }
    }
}

/// A member's failure domains, by the keys the API gives them (a root by its name
/// for a caller who may read providers, `names`, else by the uuid the API gives; an
/// aggregate linked to its headroom).
fn domains(view: &State, keys: &[Domain], names: bool) -> Markup {
    html! {
        @if keys.is_empty() { span.hint { "none" } }
        @for (i, d) in keys.iter().enumerate() {
            @if i > 0 { ", " }
            @match d {
                Domain::Root(u) => (provider_ref(view, u, names, None)),
                Domain::Aggregate(u) => a href={"/ui/headroom?member_of=" (u)} { code { (u) } },
                Domain::Trait(t) => code { (t.as_str()) },
            }
        }
    }
}

/// `GET /ui/drains`: every drain, oldest first, with its claims' progress.
pub async fn drains(viewer: Viewer) -> Result<Response, UiError> {
    viewer.require(&[Action::DrainsShow])?;
    let now = viewer.app.host.now();
    let view = viewer.app.host.read();
    let all: Vec<&Drain> = view.drains().collect();
    let content = html! {
        h1 { "Drains" }
        p.hint { "A drain takes every consumer off some roots: each consumer's new home is held by a pending claim until the move is confirmed. "
            "Its roots take nothing new from allot while it is open." }
        @for d in &all { (drain_section(&view, d, now, viewer.sees_providers())) }
        @if all.is_empty() { p.hint { "No drain." } }
    };
    Ok(page(&viewer, Tab::Drains, "Drains", content))
}

/// How many of a drain's claims are in each state at `now`, and how many the view
/// no longer holds.
fn progress(view: &State, claims: &[DrainClaim], now: Timestamp) -> ([usize; 4], usize) {
    let mut counts = [0usize; 4];
    let mut gone = 0;
    for c in claims {
        match view.claim(&c.claim) {
            Some(claim) => {
                let state = claim.state_at(now);
                // `ALL` is in the order of a claim's life, the order of the counts.
                if let Some(i) = ClaimState::ALL.iter().position(|s| *s == state) {
                    counts[i] += 1;
                }
            }
            None => gone += 1,
        }
    }
    (counts, gone)
}

/// One drain: its state, roots, progress and each consumer's target.
fn drain_section(view: &State, d: &Drain, now: Timestamp, names: bool) -> Markup {
    let (counts, gone) = progress(view, &d.claims, now);
    html! {
        section.drain id={"drain-" (d.uuid)} data-drain=(d.uuid) {
            h2 { "Drain " code.uuid { (d.uuid) } " · " span.state { (d.state.as_str()) } }
            p.meta { "made " (format_utc(d.created_at))
                @if let Some(at) = d.ended_at { " · ended " (format_utc(at)) } }
            p { "Roots: " span.roots { (uuid_roots(view, &d.roots, names)) }
                @if !d.disabled.is_empty() { " · disabled by it: " (uuid_roots(view, &d.disabled, names)) } }
            p.progress {
                (grouped(d.claims.len() as i128)) " consumers: "
                @for (i, state) in ClaimState::ALL.iter().enumerate() {
                    @if i > 0 { ", " }
                    span data-state=(state.as_str()) { (counts[i]) " " (state.as_str()) }
                }
                @if gone > 0 { ", " (gone) " no longer held" }
            }
            table.drain-claims {
                thead { tr { th { "Consumer" } th { "Target root" } th { "Claim" } th { "State" } } }
                tbody {
                    @for c in d.claims.iter().take(ROWS_SHOWN) {
                        @let claim = view.claim(&c.claim);
                        tr data-consumer=(c.consumer) {
                            td { a href={"/ui/consumers/" (c.consumer)} { code.uuid { (c.consumer) } } }
                            td { @match claim { Some(cl) => (roots(view, &target_roots(view, cl), names)), None => span.hint { "—" } } }
                            td { code.uuid { (c.claim) } }
                            td.state { @match claim { Some(cl) => (cl.state_at(now).as_str()), None => span.hint { "no longer held" } } }
                        }
                    }
                    @if d.claims.is_empty() { tr { td colspan="4" { "No consumer." } } }
                }
            }
            @if d.claims.len() > ROWS_SHOWN {
                p.hint { "The first " (ROWS_SHOWN) " of " (grouped(d.claims.len() as i128)) " consumers." }
            }
        }
    }
}

/// Providers named by uuid (a drain's roots), by name where the view has them and
/// the caller may read providers (`names`).
fn uuid_roots(view: &State, uuids: &[uuid::Uuid], names: bool) -> Markup {
    html! {
        @for (i, u) in uuids.iter().enumerate() {
            @if i > 0 { ", " }
            (provider_ref(view, u, names, Some("root")))
        }
    }
}

/// The roots of the providers a claim names, each once: a drain claim's target.
/// Sharing providers are left out, as `State::member_roots` leaves them out: a pool
/// serves many roots and is no one's home.
fn target_roots(view: &State, claim: &Claim) -> Vec<ProviderId> {
    let mut out: Vec<ProviderId> = Vec::new();
    for a in claim.allocations.iter() {
        let Some(p) = view.provider_by_uuid(&a.provider) else {
            continue;
        };
        if p.traits.contains(SHARING_TRAIT) || out.contains(&p.row.root) {
            continue;
        }
        out.push(p.row.root);
    }
    out
}
