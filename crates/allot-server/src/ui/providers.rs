//! The providers pages: a searchable, paged list (`/ui/providers`), and one provider
//! (`/ui/providers/{uuid}`) with its whole tree, the sharing providers its tree
//! reaches through aggregates, usage bars per class, traits, aggregates, the
//! allocations against it and the pending claims on it.
//!
//! The list walks the view once per page: the match is on the name (any part, in
//! any case) or the uuid, and only the page's rows are drawn.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use allot_core::{Provider, ProviderId, ResourceClass, State, Timestamp};
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use maud::{html, Markup};

use super::format::{self, amount, countdown, grouped, Usage};
use super::{page, page_number, pager, path_uuid, query_pairs, Tab, UiError, Viewer};
use crate::policy::Action;

/// Rows per page of the list.
pub const PER_PAGE: usize = 50;
/// The most allocations listed on a provider's page.
pub const ALLOCATIONS_SHOWN: usize = 200;
/// The longest search text.
pub const MAX_SEARCH: usize = 255;

/// Units per class, looked up once per page.
#[derive(Default)]
pub struct UnitsCache(HashMap<ResourceClass, String>);

impl UnitsCache {
    /// The class's units.
    pub fn get(&mut self, view: &State, class: &ResourceClass) -> String {
        self.0
            .entry(class.clone())
            .or_insert_with(|| format::units_of(view, class))
            .clone()
    }
}

/// A provider's usage of each class it has inventory of, with what live claims
/// promise at `pending_at`; `None` for a caller who may not read pending claims
/// (`allot:claims:pending`): the bars then show what `GET .../usages` shows it.
pub fn usages(p: &Provider, pending_at: Option<Timestamp>) -> Vec<(&ResourceClass, Usage)> {
    p.inventories
        .iter()
        .map(|(class, inventory)| {
            let used = p.usage.by_class.get(class).copied().unwrap_or(0);
            (
                class,
                Usage::of(
                    inventory,
                    used,
                    pending_at.map_or(0, |now| p.pending(class.as_str(), now)),
                ),
            )
        })
        .collect()
}

/// When a page's bars count live claims: now, for a caller who may read them
/// (`allot:claims:pending`), else never (see [`usages`]).
pub fn pending_at(viewer: &Viewer) -> Option<Timestamp> {
    let now = viewer.app.host.now();
    viewer.may(Action::ClaimsPending).then_some(now)
}

/// A provider's bars, compact (the list and the tree).
fn mini_bars(view: &State, p: &Provider, now: Option<Timestamp>, units: &mut UnitsCache) -> Markup {
    html! {
        div.minibars {
            @for (class, u) in usages(p, now) {
                @let un = units.get(view, class);
                div.mini {
                    span.cls { (class.as_str()) }
                    (u.bar(class.as_str(), &un))
                    span.nums { (amount((u.used + u.pending) as i128, &un)) " / " (amount(u.capacity, &un)) }
                }
            }
        }
    }
}

/// `GET /ui/providers?q=TEXT&page=N`.
pub async fn list(viewer: Viewer, RawQuery(raw): RawQuery) -> Result<Response, UiError> {
    viewer.require(&[
        Action::ProvidersList,
        Action::InventoriesList,
        Action::ProviderUsages,
    ])?;
    let pairs = query_pairs(raw.as_deref())?;
    let page_no = page_number(&pairs)?;
    let q = pairs
        .iter()
        .find(|(k, _)| k == "q")
        .map_or("", |(_, v)| v.trim());
    if q.chars().count() > MAX_SEARCH {
        return Err(UiError::BadRequest(format!(
            "The search is longer than {MAX_SEARCH} characters."
        )));
    }
    let roots_only = pairs.iter().any(|(k, v)| k == "roots" && v == "1");
    let needle = q.to_lowercase();
    // A search box, not the API: a uuid in any standard spelling finds its provider.
    let as_uuid = uuid::Uuid::try_parse(q).ok();
    let pending_at = pending_at(&viewer);
    let view = viewer.app.host.read();
    let mut total = 0usize;
    let skip = (page_no - 1) * PER_PAGE;
    let mut rows: Vec<&Provider> = Vec::with_capacity(PER_PAGE);
    for p in view.providers() {
        if roots_only && p.row.parent.is_some() {
            continue;
        }
        let hit = match as_uuid {
            Some(u) => p.uuid() == u,
            None => needle.is_empty() || p.row.name.to_lowercase().contains(&needle),
        };
        if !hit {
            continue;
        }
        if total >= skip && rows.len() < PER_PAGE {
            rows.push(p);
        }
        total += 1;
    }
    let mut units = UnitsCache::default();
    let base = format!(
        "/ui/providers?q={}{}&",
        form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>(),
        if roots_only { "&roots=1" } else { "" }
    );
    let content = html! {
        h1 { "Providers" }
        form.search method="get" action="/ui/providers" role="search" {
            input type="search" name="q" value=(q) placeholder="name or uuid" aria-label="Search providers" maxlength=(MAX_SEARCH);
            label.check { input type="checkbox" name="roots" value="1" checked[roots_only]; " roots only" }
            button type="submit" { "Search" }
        }
        table.providers {
            thead { tr { th { "Name" } th { "Parent" } th { "Usage (used and pending / capacity)" } } }
            tbody {
                @for p in &rows {
                    tr data-uuid=(p.uuid()) {
                        td { a href={"/ui/providers/" (p.uuid())} { (p.row.name) } br; code.uuid { (p.uuid()) } }
                        td { @if let Some(parent) = p.row.parent.and_then(|id| view.provider(id)) {
                            a href={"/ui/providers/" (parent.uuid())} { (parent.row.name) } } @else { span.hint { "root" } } }
                        td { (mini_bars(&view, p, pending_at, &mut units)) }
                    }
                }
                @if rows.is_empty() { tr { td colspan="3" { "No provider matches." } } }
            }
        }
        (pager(&base, page_no, rows.len(), total, PER_PAGE))
    };
    Ok(page(&viewer, Tab::Providers, "Providers", content))
}

/// The tree under `id`, nested, with `current` marked.
fn tree(
    view: &State,
    id: ProviderId,
    current: ProviderId,
    now: Option<Timestamp>,
    units: &mut UnitsCache,
    depth: usize,
) -> Markup {
    let Some(p) = view.provider(id) else {
        return super::nothing();
    };
    // Placement bounds trees far below this; the page stays finite whatever happens.
    let children: Vec<ProviderId> = if depth < 64 {
        p.children.iter().copied().collect()
    } else {
        Vec::new()
    };
    html! {
        li.current[id == current] {
            a href={"/ui/providers/" (p.uuid())} { (p.row.name) }
            (mini_bars(view, p, now, units))
            @if !children.is_empty() {
                ul { @for c in children { (tree(view, c, current, now, units, depth + 1)) } }
            }
        }
    }
}

/// `GET /ui/providers/{uuid}`.
pub async fn show(viewer: Viewer, Path(uuid): Path<String>) -> Result<Response, UiError> {
    viewer.require(&[
        Action::ProvidersShow,
        Action::InventoriesList,
        Action::ProviderUsages,
    ])?;
    let uuid = path_uuid(&uuid)?;
    let now = viewer.app.host.now();
    let bars_at = viewer.may(Action::ClaimsPending).then_some(now);
    let view = viewer.app.host.read();
    let Some(p) = view.provider_by_uuid(&uuid) else {
        return Err(UiError::NotFound(format!(
            "No resource provider with uuid {uuid} found."
        )));
    };
    let mut units = UnitsCache::default();
    let root = p.row.root;
    // The tree's aggregates, and the sharing providers in any of them.
    let mut tree_aggregates: BTreeSet<uuid::Uuid> = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        if let Some(node) = view.provider(id) {
            tree_aggregates.extend(node.aggregates.iter().copied());
            stack.extend(node.children.iter().copied());
        }
    }
    let sharing: Vec<&Provider> = view
        .sharing_providers()
        .filter(|s| s.row.root != root)
        .filter(|s| s.aggregates.iter().any(|a| tree_aggregates.contains(a)))
        .collect();
    let content = html! {
        h1 { (p.row.name) }
        p.meta { code.uuid { (p.uuid()) } " · generation " (p.row.generation)
            @if let Some(parent) = p.row.parent.and_then(|id| view.provider(id)) {
                " · parent " a href={"/ui/providers/" (parent.uuid())} { (parent.row.name) } } }
        section {
            h2 { "Usage" }
            (usage_table(&view, p, bars_at, &mut units))
        }
        section.two {
            div {
                h2 { "Traits" }
                @if !viewer.may(Action::ProviderTraitsList) { p.hint { "Not allowed (placement:resource_providers:traits:list)." } }
                @else if p.traits.is_empty() { p.hint { "None." } }
                @else { ul.tags { @for t in p.traits.iter() { li { code { (t.as_str()) } } } } }
            }
            div {
                h2 { "Aggregates" }
                @if !viewer.may(Action::AggregatesList) { p.hint { "Not allowed (placement:resource_providers:aggregates:list)." } }
                @else if p.aggregates.is_empty() { p.hint { "None." } }
                @else { ul.tags { @for a in p.aggregates.iter() { li { a href={"/ui/headroom?member_of=" (a)} { code { (a) } } } } } }
            }
        }
        section {
            h2 { "Tree" }
            ul.tree { (tree(&view, root, p.id(), bars_at, &mut units, 0)) }
            @if !sharing.is_empty() {
                h3 { "Sharing providers of its aggregates" }
                ul.tree {
                    @for s in &sharing {
                        li {
                            a href={"/ui/providers/" (s.uuid())} { (s.row.name) }
                            span.hint { " shares via " @for (i, a) in s.aggregates.iter().filter(|a| tree_aggregates.contains(*a)).enumerate() { @if i > 0 { ", " } code { (a) } } }
                            (mini_bars(&view, s, bars_at, &mut units))
                        }
                    }
                }
            }
        }
        section {
            h2 { "Pending claims on it" }
            @if viewer.may(Action::ClaimsPending) { (pending_here(&view, p, now, &mut units)) }
            @else { p.hint { "Not allowed (allot:claims:pending)." } }
        }
        section {
            h2 { "Allocations against it" }
            @if viewer.may(Action::ProviderAllocationsList) { (allocations_here(&view, p, &mut units)) }
            @else { p.hint { "Not allowed (placement:resource_providers:allocations:list)." } }
        }
    };
    Ok(page(&viewer, Tab::Providers, &p.row.name, content))
}

/// A provider's classes: bar, capacity, used, pending, free, reserved, ratio.
fn usage_table(
    view: &State,
    p: &Provider,
    now: Option<Timestamp>,
    units: &mut UnitsCache,
) -> Markup {
    html! {
        table.usage {
            thead { tr { th { "Class" } th { "Usage" } th.num { "Used" } th.num { "Pending" } th.num { "Free" } th.num { "Reserved" } th.num { "Capacity" } th.num { "Ratio" } th.num { "Total" } } }
            tbody {
                @for (class, u) in usages(p, now) {
                    @let un = units.get(view, class);
                    @let ratio = p.inventories.get(class).map_or(1.0, |i| i.allocation_ratio);
                    tr data-class=(class.as_str()) {
                        td { strong { (format::label_of(view, class)) } br; code { (class.as_str()) } }
                        td.barcell { (u.bar(class.as_str(), &un)) }
                        td.num { (amount(u.used as i128, &un)) }
                        td.num { (amount(u.pending as i128, &un)) }
                        td.num { (amount(u.free(), &un)) }
                        td.num { (amount(u.reserved as i128, &un)) }
                        td.num { (amount(u.capacity, &un)) }
                        td.num { (ratio) }
                        td.num { (amount(u.total as i128, &un)) }
                    }
                }
                @if p.inventories.is_empty() { tr { td colspan="9" { "No inventory." } } }
            }
        }
    }
}

/// The live pending claims on a provider, one row per claim.
fn pending_here(view: &State, p: &Provider, now: Timestamp, units: &mut UnitsCache) -> Markup {
    let mut by_claim: BTreeMap<uuid::Uuid, Vec<(&ResourceClass, u64)>> = BTreeMap::new();
    for e in p.pending.iter().filter(|e| e.live(now)) {
        by_claim
            .entry(e.claim)
            .or_default()
            .push((&e.class, e.amount));
    }
    if by_claim.is_empty() {
        return html! { p.hint { "None." } };
    }
    html! {
        table.claims {
            thead { tr { th { "Claim" } th { "Tag" } th { "Consumer" } th { "Here" } th { "Expires" } } }
            tbody {
                @for (uuid, amounts) in &by_claim {
                    @let claim = view.claim(uuid);
                    tr.claim data-claim=(uuid) {
                        td { code.uuid { (uuid) } }
                        td.tag { @if let Some(tag) = claim.and_then(|c| c.tag.as_ref()) { (tag.as_str()) } }
                        td { @if let Some(c) = claim { a href={"/ui/consumers/" (c.consumer)} { code.uuid { (c.consumer) } } } }
                        td { @for (class, n) in amounts {
                            @let un = units.get(view, class);
                            code { (class.as_str()) } " " (amount(*n as i128, &un)) " " } }
                        td { (expiry(claim.and_then(|c| c.expires_at), now)) }
                    }
                }
            }
        }
    }
}

/// An expiry with its countdown (kept going by the page's script).
pub fn expiry(expires_at: Option<Timestamp>, now: Timestamp) -> Markup {
    match expires_at {
        None => html! { span.hint { "never" } },
        Some(at) => html! {
            time.countdown datetime=(crate::auth::format_utc(at)) data-expires=(at) title=(crate::auth::format_utc(at)) {
                (countdown(at, now))
            }
        },
    }
}

/// The allocations against a provider, by consumer.
fn allocations_here(view: &State, p: &Provider, units: &mut UnitsCache) -> Markup {
    let consumers: Vec<uuid::Uuid> = p.usage.consumers.iter().copied().collect();
    if consumers.is_empty() {
        return html! { p.hint { "None." } };
    }
    html! {
        table.allocations {
            thead { tr { th { "Consumer" } th { "Project" } th { "User" } th { "Here" } } }
            tbody {
                @for uuid in consumers.iter().take(ALLOCATIONS_SHOWN) {
                    @if let Some(c) = view.consumer(uuid) {
                        tr {
                            td { a href={"/ui/consumers/" (uuid)} { code.uuid { (uuid) } } }
                            td { (c.row.project_id.as_str()) }
                            td { (c.row.user_id.as_str()) }
                            td { @for a in c.allocations.iter().filter(|a| a.provider == p.id()) {
                                @let un = units.get(view, &a.class);
                                code { (a.class.as_str()) } " " (amount(a.used as i128, &un)) " " } }
                        }
                    }
                }
            }
        }
        @if consumers.len() > ALLOCATIONS_SHOWN {
            p.hint { "The first " (ALLOCATIONS_SHOWN) " of " (grouped(consumers.len() as i128)) " consumers." }
        }
    }
}
