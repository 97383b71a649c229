//! The pages about consumers, claims and headroom: one consumer's allocations and
//! claims (`/ui/consumers/{uuid}`), the live pending claims with their tags and a
//! countdown to expiry (`/ui/claims`, paged), and "how many more of this shape fit"
//! (`/ui/headroom`), which asks the same question as `GET /headroom` through the
//! same reading of the query (`request::headroom::parse`) and the same count
//! (`handlers::headroom::answer`).

use allot_core::Claim;
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use maud::html;

use super::format::{amount, grouped, provider_ref};
use super::providers::{expiry, UnitsCache};
use super::{page, page_number, pager, path_uuid, query_pairs, Tab, UiError, Viewer};
use crate::policy::Action;
use crate::wire;

/// Claims per page.
pub const PER_PAGE: usize = 50;
/// The most groups a headroom answer lists.
pub const GROUPS_SHOWN: usize = 200;

/// A claim's amounts, with the providers' names.
fn claim_amounts(
    view: &allot_core::State,
    c: &Claim,
    units: &mut UnitsCache,
    names: bool,
) -> maud::Markup {
    html! {
        ul.plain {
            @for a in c.allocations.iter() {
                @let un = units.get(view, &a.class);
                li {
                    code { (a.class.as_str()) } " " (amount(a.amount as i128, &un)) " on "
                    (provider_ref(view, &a.provider, names, None))
                }
            }
        }
    }
}

/// `GET /ui/consumers/{uuid}`.
pub async fn consumer(viewer: Viewer, Path(uuid): Path<String>) -> Result<Response, UiError> {
    viewer.require(&[Action::AllocationsList])?;
    let uuid = path_uuid(&uuid)?;
    let now = viewer.app.host.now();
    let view = viewer.app.host.read();
    let consumer = view.consumer(&uuid);
    let may_claims = viewer.may(Action::ClaimsList);
    let mut claims: Vec<&Claim> = if may_claims {
        view.claims().filter(|c| c.consumer == uuid).collect()
    } else {
        Vec::new()
    };
    claims.sort_by_key(|c| (c.created_at, c.uuid));
    if consumer.is_none() && claims.is_empty() {
        return Err(UiError::NotFound(format!(
            "No allocations or claims for consumer {uuid}."
        )));
    }
    let mut units = UnitsCache::default();
    let names = viewer.sees_providers();
    let content = html! {
        h1 { "Consumer " code.uuid { (uuid) } }
        @if let Some(c) = consumer {
            p.meta { "project " (c.row.project_id.as_str()) " · user " (c.row.user_id.as_str())
                " · generation " (c.row.generation)
                @if let Some(t) = &c.row.consumer_type { " · type " (t.as_str()) } }
            h2 { "Allocations" }
            table.allocations {
                thead { tr { th { "Provider" } th { "Class" } th.num { "Amount" } } }
                tbody {
                    @for a in c.allocations.iter() {
                        @let un = units.get(&view, &a.class);
                        tr {
                            td { (provider_ref(&view, &view.uuid_of(a.provider), names, None)) }
                            td { code { (a.class.as_str()) } }
                            td.num { (amount(a.used as i128, &un)) }
                        }
                    }
                }
            }
        } @else {
            p.hint { "No allocations." }
        }
        h2 { "Claims" }
        @if !may_claims { p.hint { "Not allowed (allot:claims:list)." } }
        @else if claims.is_empty() { p.hint { "None." } }
        @else {
            table.claims {
                thead { tr { th { "Claim" } th { "Tag" } th { "State" } th { "Amounts" } th { "Expires" } } }
                tbody {
                    @for c in &claims {
                        tr.claim data-claim=(c.uuid) {
                            td { code.uuid { (c.uuid) } }
                            td.tag { @if let Some(t) = &c.tag { (t.as_str()) } }
                            td { (c.state_at(now).as_str()) }
                            td { (claim_amounts(&view, c, &mut units, names)) }
                            td { @if c.live(now) { (expiry(c.expires_at, now)) } @else { span.hint { "—" } } }
                        }
                    }
                }
            }
        }
    };
    Ok(page(&viewer, Tab::Claims, "Consumer", content))
}

/// `GET /ui/claims?page=N`: live pending claims, soonest to expire first.
pub async fn claims(viewer: Viewer, RawQuery(raw): RawQuery) -> Result<Response, UiError> {
    viewer.require(&[Action::ClaimsList])?;
    let pairs = query_pairs(raw.as_deref())?;
    let page_no = page_number(&pairs)?;
    let now = viewer.app.host.now();
    let view = viewer.app.host.read();
    let mut live: Vec<&Claim> = view.claims().filter(|c| c.live(now)).collect();
    live.sort_by_key(|c| (c.expires_at.unwrap_or(i64::MAX), c.uuid));
    let total = live.len();
    let shown: Vec<&Claim> = live
        .into_iter()
        .skip((page_no - 1) * PER_PAGE)
        .take(PER_PAGE)
        .collect();
    let mut units = UnitsCache::default();
    let names = viewer.sees_providers();
    let content = html! {
        h1 { "Pending claims" }
        p.hint { "Claims promise capacity until they are confirmed, released or expire; capacity checks count them as used." }
        table.claims {
            thead { tr { th { "Claim" } th { "Tag" } th { "Consumer" } th { "Project" } th { "Amounts" } th { "Expires" } } }
            tbody {
                @for c in &shown {
                    tr.claim data-claim=(c.uuid) {
                        td { code.uuid { (c.uuid) } }
                        td.tag { @if let Some(t) = &c.tag { (t.as_str()) } }
                        td { a href={"/ui/consumers/" (c.consumer)} { code.uuid { (c.consumer) } } }
                        td { (c.project_id.as_str()) }
                        td { (claim_amounts(&view, c, &mut units, names)) }
                        td { (expiry(c.expires_at, now)) }
                    }
                }
                @if shown.is_empty() { tr { td colspan="6" { "No pending claim." } } }
            }
        }
        (pager("/ui/claims?", page_no, shown.len(), total, PER_PAGE))
    };
    Ok(page(&viewer, Tab::Claims, "Pending claims", content))
}

/// `GET /ui/headroom?resources=...&required=...&member_of=...&group_by=...`: the
/// form, and with a shape, its answer.
pub async fn headroom(viewer: Viewer, RawQuery(raw): RawQuery) -> Result<Response, UiError> {
    viewer.require(&[Action::Headroom])?;
    let pairs = query_pairs(raw.as_deref())?;
    let form = HeadroomForm::read(&pairs);
    let answer = if form.resources.is_empty() {
        None
    } else {
        Some(count_headroom(&viewer, &form.api_query()).await?)
    };
    let view = viewer.app.host.read();
    let content = html! {
        h1 { "Headroom" }
        p.hint { "How many more instances of one shape fit now: each counted as a pick-and-claim that would succeed, pending claims included (GET /headroom)." }
        (form.markup())
        @if let Some(a) = &answer { (headroom_answer(&view, a, form.group_by, viewer.sees_providers())) }
    };
    Ok(page(&viewer, Tab::Headroom, "Headroom", content))
}

/// The headroom form's fields as the page's query gives them, trimmed (empty when
/// left out).
struct HeadroomForm<'a> {
    resources: &'a str,
    required: &'a str,
    member_of: &'a str,
    group_by: &'a str,
    prefix: &'a str,
}

impl<'a> HeadroomForm<'a> {
    /// Reads the fields from the page's query.
    fn read(pairs: &'a [(String, String)]) -> Self {
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map_or("", |(_, v)| v.trim())
        };
        HeadroomForm {
            resources: get("resources"),
            required: get("required"),
            member_of: get("member_of"),
            group_by: get("group_by"),
            prefix: get("prefix"),
        }
    }

    /// The API's query, built from the form's fields (empty ones left out).
    fn api_query(&self) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("resources", self.resources),
            ("required", self.required),
            ("member_of", self.member_of),
        ] {
            if !value.is_empty() {
                query.append_pair(name, value);
            }
        }
        match self.group_by {
            "" | "none" => {}
            "trait" => {
                query.append_pair("group_by", &format!("trait:{}", self.prefix));
            }
            other => {
                query.append_pair("group_by", other);
            }
        }
        query.finish()
    }

    /// The form, filled in with the fields given.
    fn markup(&self) -> maud::Markup {
        html! {
            form.headroom method="get" action="/ui/headroom" {
                label { "Resources " input name="resources" value=(self.resources) placeholder="VCPU:2,MEMORY_MB:4096,DISK_GB:20" required; }
                label { "Required traits " input name="required" value=(self.required) placeholder="HW_CPU_X86_AVX2,!CUSTOM_X"; }
                label { "Member of " input name="member_of" value=(self.member_of) placeholder="in:AGG1,AGG2"; }
                label { "Group by "
                    select name="group_by" {
                        @for (value, name) in [("none", "nothing"), ("root", "host"), ("aggregate", "aggregate"), ("trait", "trait prefix")] {
                            option value=(value) selected[self.group_by == value] { (name) }
                        }
                    }
                }
                label { "Trait prefix " input name="prefix" value=(self.prefix) placeholder="CUSTOM_RACK_"; }
                button type="submit" { "Count" }
            }
        }
    }
}

/// Asks the API's question (`query`, as `GET /headroom` reads it) and counts the
/// answer off the async workers, as the API does.
async fn count_headroom(viewer: &Viewer, query: &str) -> Result<wire::Headroom, UiError> {
    let now = viewer.app.host.now();
    let question = crate::request::headroom::parse(Some(query), now)?;
    let options = viewer.app.config.settings.search_options();
    let host = viewer.app.host.clone();
    let answer = crate::handlers::off_workers("headroom", move || {
        crate::handlers::headroom::answer(&host.read(), &question, &options)
    })
    .await?;
    Ok(answer)
}

/// The count, and its groups largest first (at most [`GROUPS_SHOWN`]), a root named
/// by its provider's name where `group_by` is `root` and the caller may read
/// providers (`names`); else by the uuid `GET /headroom` answers it with.
fn headroom_answer(
    view: &allot_core::State,
    a: &wire::Headroom,
    group_by: &str,
    names: bool,
) -> maud::Markup {
    let mut sorted: Vec<(&String, &u64)> = a
        .groups
        .as_ref()
        .map(|g| g.iter().collect())
        .unwrap_or_default();
    sorted.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
    let group_name = |key: &str| -> String {
        if group_by == "root" && names {
            // The key is the answer's own uuid of a root, not request text.
            if let Some(p) = uuid::Uuid::try_parse(key)
                .ok()
                .and_then(|u| view.provider_by_uuid(&u))
            {
                return p.row.name.to_string();
            }
        }
        key.to_owned()
    };
    html! {
        p.answer { span.big { (grouped(a.headroom as i128)) } " more fit" }
        @if a.groups.is_some() {
            table.groups {
                thead { tr { th { "Group" } th.num { "Fit" } } }
                tbody {
                    @for (key, n) in sorted.iter().take(GROUPS_SHOWN) {
                        tr { td { (group_name(key)) } td.num { (grouped(**n as i128)) } }
                    }
                    @if sorted.is_empty() { tr { td colspan="2" { "No group." } } }
                }
            }
            @if sorted.len() > GROUPS_SHOWN { p.hint { "The " (GROUPS_SHOWN) " largest of " (grouped(sorted.len() as i128)) " groups." } }
        }
    }
}
