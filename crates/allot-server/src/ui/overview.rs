//! The overview page (`/ui`): capacity, used and pending per resource class across
//! the cloud (allocation ratios applied, in the class's units), the fullest and
//! emptiest hosts, and the claims refused recently.
//!
//! One walk over one version of the view gathers everything: per class the sum of
//! every provider's [`Usage`], and per root provider (a host) its fill, the fullest
//! class on any provider of its tree (used and pending over capacity). At flat 10,000
//! roots the walk takes milliseconds (docs/ui.md has the measured page time).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use allot_core::{ResourceClass, State};
use axum::response::Response;
use maud::{html, Markup};

use super::format::{self, ago, amount, grouped, Usage};
use super::{page, Tab, UiError, Viewer};
use crate::metrics::Refusal;
use crate::policy::Action;

/// How many hosts each of the fullest and emptiest lists shows.
pub const HOSTS_SHOWN: usize = 10;
/// How many recent refusals are listed.
pub const REFUSALS_SHOWN: usize = 10;

/// What one walk over the view finds.
#[derive(Debug, Default)]
pub struct Totals {
    /// Per class, the sum over providers.
    pub by_class: BTreeMap<ResourceClass, Usage>,
    /// Per root with any inventory in its tree: (fill, the root's id, the class
    /// that fill is of).
    pub hosts: Vec<(f64, u64, ResourceClass)>,
    /// Providers in all.
    pub providers: usize,
    /// Of which roots.
    pub roots: usize,
}

/// Walks the view once (see the module doc), counting live claims at `pending_at`
/// (`None`: not at all, [`super::providers::usages`]).
pub fn totals(view: &State, pending_at: Option<allot_core::Timestamp>) -> Totals {
    let mut t = Totals::default();
    let mut fullest: HashMap<u64, (f64, ResourceClass)> = HashMap::new();
    for p in view.providers() {
        t.providers += 1;
        if p.row.parent.is_none() {
            t.roots += 1;
        }
        for (class, u) in super::providers::usages(p, pending_at) {
            let fill = u.fill();
            t.by_class.entry(class.clone()).or_default().add(&u);
            let entry = fullest
                .entry(p.row.root.0)
                .or_insert_with(|| (fill, class.clone()));
            if fill > entry.0 {
                *entry = (fill, class.clone());
            }
        }
    }
    t.hosts = fullest
        .into_iter()
        .map(|(root, (fill, class))| (fill, root, class))
        .collect();
    t.hosts
        .sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    t
}

/// `GET /ui`.
pub async fn show(viewer: Viewer) -> Result<Response, UiError> {
    viewer.require(&[
        Action::ProvidersList,
        Action::InventoriesList,
        Action::ProviderUsages,
    ])?;
    let started = Instant::now();
    let app = viewer.app.clone();
    let now = app.host.now();
    let view = app.host.read();
    let t = totals(&view, super::providers::pending_at(&viewer));
    // Each card only for a caller the API would tell: consumers are counted from the
    // allocations against providers, claims from the claim list.
    let consumers = viewer
        .may(Action::ProviderAllocationsList)
        .then(|| view.consumers().count());
    let pending_claims = viewer
        .may(Action::ClaimsList)
        .then(|| view.claims().filter(|c| c.live(now)).count());
    let metrics = viewer.may(Action::MetricsShow).then(|| {
        (
            app.config.metrics.totals(),
            app.config.metrics.recent_refusals(),
        )
    });
    let content = html! {
        h1 { "Capacity" }
        section.cards {
            div.card { span.big { (grouped(t.providers as i128)) } span { "providers" } }
            div.card { span.big { (grouped(t.roots as i128)) } span { "root providers" } }
            @if let Some(n) = consumers { div.card { span.big { (grouped(n as i128)) } span { "consumers" } } }
            @if let Some(n) = pending_claims { div.card { a href="/ui/claims" { span.big { (grouped(n as i128)) } span { "pending claims" } } } }
        }
        (classes_section(&view, &t))
        (hosts_section(&view, &t))
        (refusals_section(metrics.as_ref()))
        p.footnote { "Read from the view at " (crate::auth::format_utc(now)) " in " (format!("{:.1}", started.elapsed().as_secs_f64() * 1000.0)) " ms." }
    };
    Ok(page(&viewer, Tab::Overview, "Overview", content))
}

/// Per resource class: the usage bar, capacity, used, pending, free, reserved and
/// fill, in the class's units.
fn classes_section(view: &State, t: &Totals) -> Markup {
    html! {
        section {
            h2 { "By resource class" }
            p.hint { "Capacity is (total − reserved) × allocation ratio, summed over providers; the bar shows used, pending, free and reserved." }
            table.classes {
                thead { tr { th { "Class" } th { "Usage" } th.num { "Capacity" } th.num { "Used" } th.num { "Pending" } th.num { "Free" } th.num { "Reserved" } th.num { "Full" } } }
                tbody {
                    @for (class, u) in &t.by_class {
                        @let units = format::units_of(view, class);
                        tr data-class=(class.as_str()) {
                            td { strong { (format::label_of(view, class)) } br; code { (class.as_str()) } }
                            td.barcell { (u.bar(class.as_str(), &units)) }
                            td.num { (amount(u.capacity, &units)) }
                            td.num { (amount(u.used as i128, &units)) }
                            td.num { (amount(u.pending as i128, &units)) }
                            td.num { (amount(u.free(), &units)) }
                            td.num { (amount(u.reserved as i128, &units)) }
                            td.num { (format!("{:.1}%", u.fill() * 100.0)) }
                        }
                    }
                    @if t.by_class.is_empty() { tr { td colspan="8" { "No provider has inventory yet." } } }
                }
            }
        }
    }
}

/// The [`HOSTS_SHOWN`] fullest and emptiest hosts, side by side.
fn hosts_section(view: &State, t: &Totals) -> Markup {
    let host_row = |(fill, root, class): &(f64, u64, ResourceClass)| {
        let p = view.provider(allot_core::ProviderId(*root));
        html! {
            tr {
                td { @if let Some(p) = p { a href={"/ui/providers/" (p.uuid())} { (p.row.name) } } }
                td.num { (format!("{:.1}%", fill * 100.0)) }
                td { (format::label_of(view, class)) }
            }
        }
    };
    let fullest: Vec<_> = t.hosts.iter().take(HOSTS_SHOWN).collect();
    let emptiest: Vec<_> = t.hosts.iter().rev().take(HOSTS_SHOWN).collect();
    html! {
        section.two {
            div {
                h2 { "Fullest hosts" }
                table { thead { tr { th { "Host" } th.num { "Full" } th { "Fullest class" } } }
                    tbody { @for h in &fullest { (host_row(h)) } } }
            }
            div {
                h2 { "Emptiest hosts" }
                table { thead { tr { th { "Host" } th.num { "Full" } th { "Fullest class" } } }
                    tbody { @for h in &emptiest { (host_row(h)) } } }
            }
        }
    }
}

/// The claims refused since the start and the latest refusals, for a caller who
/// may read the metrics (`metrics`: their totals and recent refusals).
fn refusals_section(metrics: Option<&(crate::metrics::Totals, Vec<Refusal>)>) -> Markup {
    let wall_now = crate::auth::now_unix();
    html! {
        section {
            h2 { "Claims refused recently" }
            @match metrics {
                None => p.hint { "Your role may not read the metrics (allot:metrics)." },
                Some((totals, recent)) => {
                    p { (grouped(totals.claims_refused as i128)) " allocation writes and pending claims refused, "
                        (grouped(totals.claims_accepted as i128)) " accepted since the start." }
                    @if recent.is_empty() { p.hint { "None refused since the start." } }
                    @else {
                        table.refusals {
                            thead { tr { th { "When" } th { "What" } th.num { "Status" } th { "Code" } } }
                            tbody {
                                @for r in recent.iter().take(REFUSALS_SHOWN) {
                                    tr { td { (ago(r.at, wall_now)) } td { (r.kind) } td.num { (r.status) } td { code { (r.code) } } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
