//! Usages: what allocations use of a provider's inventories
//! (`GET /resource_providers/{uuid}/usages`), and what a project's consumers hold in
//! all (`GET /usages`, 1.9; grouped by consumer type from 1.38).
//!
//! The sums are the core's (`allot_core::usage`); here are Placement's checks, in its
//! order, and the bodies. Usages describe "now", so from 1.15 both answers carry
//! `cache-control: no-cache` and a `last-modified` of the time of the request, as
//! Placement's do. The bodies are written by hand from the core's sums (see
//! `provider_body`, `totals_body`, `grouped_body`), in the shape of
//! `wire::usages`, which the tests keep as the oracle for their bytes.

use std::collections::BTreeMap;

use allot_core::usage::GroupUsage;
use allot_core::ResourceClass;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::context::Ctx;
use crate::error::ApiResult;
use crate::http;
use crate::policy::{authorize, authorize_target, Action};
use crate::request::path::{no_provider, ProviderPath};
use crate::request::usages::TotalsQuery;
use crate::request::QueryParams;
use crate::wire::write;
use crate::AppState;

const PROVIDER_USAGES: Action = Action::ProviderUsages;
const TOTAL_USAGES: Action = Action::TotalUsages;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/resource_providers/{uuid}/usages", get(provider_usages))
        .route("/usages", get(total_usages))
}

/// `GET /resource_providers/{uuid}/usages`: the usage of every class the provider has
/// inventory of, and its generation.
pub async fn provider_usages(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
) -> ApiResult {
    path.raw()?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, PROVIDER_USAGES)?;
    let response = {
        let view = app.host.read();
        // The lookup's words, wrapped in the endpoint's.
        let provider = path.provider(&view, |uuid| {
            format!("{}: {}", no_provider(uuid), no_provider(uuid))
        })?;
        let body = provider_body(provider.row.generation, &view.provider_usages(provider));
        http::json_bytes(StatusCode::OK, body)
    };
    Ok(ctx.cached(response, app.host.now()))
}

// ----- writing bodies -----
//
// The bodies are written straight from the core's sums into one buffer sized up
// front, in the shape of `wire::usages` (the tests keep those types as the oracle and
// hold the two to the same bytes): no map of names is built on the way.

/// `{"resource_provider_generation": N, "usages": {class: used}}`.
fn provider_body(generation: u64, usages: &[(&ResourceClass, u64)]) -> Vec<u8> {
    let classes = usages.iter().map(|(c, _)| *c);
    let mut out = Vec::with_capacity(48 + write::INT + amounts_size(classes));
    out.extend_from_slice(b"{\"resource_provider_generation\":");
    write::uint(&mut out, generation);
    out.extend_from_slice(b",\"usages\":");
    write::amounts(&mut out, usages.iter().map(|(c, n)| (c.as_str(), *n)));
    out.push(b'}');
    out
}

/// The body before 1.38: `{"usages": {class: used}}`.
fn totals_body(sums: &BTreeMap<ResourceClass, u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + amounts_size(sums.keys()));
    out.extend_from_slice(b"{\"usages\":");
    write::amounts(&mut out, sums.iter().map(|(c, n)| (c.as_str(), *n)));
    out.push(b'}');
    out
}

/// The 1.38 body: `{"usages": {type: {class: used, ..., "consumer_count": N}}}`, the
/// count after the classes in each group (where a sorted map puts it: class names
/// are upper case).
fn grouped_body(groups: &BTreeMap<String, GroupUsage>) -> Vec<u8> {
    let size = 16
        + groups
            .iter()
            .map(|(name, g)| name.len() + 24 + write::INT + amounts_size(g.usages.keys()))
            .sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(b"{\"usages\":{");
    for (i, (name, group)) in groups.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write::string(&mut out, name);
        out.extend_from_slice(b":{");
        let sums = group.usages.iter().map(|(c, n)| (c.as_str(), *n));
        if write::amount_entries(&mut out, sums) {
            out.push(b',');
        }
        out.extend_from_slice(b"\"consumer_count\":");
        write::uint(&mut out, group.consumer_count as u64);
        out.push(b'}');
    }
    out.extend_from_slice(b"}}");
    out
}

/// Room for `{class: used}` of these classes.
fn amounts_size<'a>(classes: impl Iterator<Item = &'a ResourceClass>) -> usize {
    2 + classes
        .map(|c| c.as_str().len() + write::AMOUNT_ENTRY)
        .sum::<usize>()
}

/// `GET /usages?project_id=&user_id=` (1.9): what the consumers of a project, or of
/// one of its users, hold in all; from 1.38 grouped by consumer type and filtered by
/// `consumer_type`.
pub async fn total_usages(
    ctx: Ctx,
    State(app): State<AppState>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    ctx.require(9)?;
    ctx.require_json_accept()?;
    let query = QueryParams::parse(raw.as_deref())?;
    // Policy looks at the project asked about before the query is validated.
    authorize_target(
        &ctx,
        app.config.settings.policy,
        TOTAL_USAGES,
        query.text("project_id"),
    )?;
    let wanted = TotalsQuery::read(ctx.version.0, &query)?;
    let response = {
        let view = app.host.read();
        let user = wanted.user_id.as_deref();
        match wanted.consumer_types.filter() {
            None => {
                let sums = view.project_usages(&wanted.project_id, user);
                http::json_bytes(StatusCode::OK, totals_body(&sums))
            }
            Some(filter) => {
                let groups = view.project_usages_by_type(&wanted.project_id, user, filter);
                http::json_bytes(StatusCode::OK, grouped_body(&groups))
            }
        }
    };
    Ok(ctx.cached(response, app.host.now()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::same;
    use crate::wire;
    use allot_core::usage::TypeFilter;

    /// Sums by class name, as the bodies were built before they were written by hand.
    fn by_class<'a>(
        sums: impl IntoIterator<Item = (&'a ResourceClass, u64)>,
    ) -> BTreeMap<&'a str, u64> {
        sums.into_iter()
            .map(|(class, used)| (class.as_str(), used))
            .collect()
    }

    /// The 1.38 body as it was built before [`grouped_body`]: the oracle for the bytes.
    fn grouped_body_by_maps(groups: &BTreeMap<String, GroupUsage>) -> wire::UsagesByType<'_> {
        let usages = groups
            .iter()
            .map(|(name, group)| {
                let usages = wire::ConsumerTypeUsages {
                    usages: by_class(group.usages.iter().map(|(c, n)| (c, *n))),
                    consumer_count: group.consumer_count,
                };
                (name.as_str(), usages)
            })
            .collect();
        wire::UsagesByType { usages }
    }

    /// `GET /usages?project_id=p1` at 1.37 and 1.38, the core's sums and the body
    /// written by hand (for the figures of `docs/performance.md`: `toggle-collect`
    /// in callgrind finds these by name).
    #[inline(never)]
    fn measure_written(view: &allot_core::State) -> usize {
        let sums = view.project_usages("p1", None);
        let groups = view.project_usages_by_type("p1", None, TypeFilter::EachType);
        totals_body(&sums).len() + grouped_body(&groups).len()
    }

    /// The same, through the maps and `serde_json` as before.
    #[inline(never)]
    fn measure_maps(view: &allot_core::State) -> usize {
        let sums = view.project_usages("p1", None);
        let groups = view.project_usages_by_type("p1", None, TypeFilter::EachType);
        let totals = wire::Usages {
            usages: by_class(sums.iter().map(|(c, n)| (c, *n))),
        };
        let a = serde_json::to_vec(&totals).unwrap_or_default().len();
        a + serde_json::to_vec(&grouped_body_by_maps(&groups))
            .unwrap_or_default()
            .len()
    }

    /// Both, in alternation, on a project of about 3,300 consumers (of 10,000): median times.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn project_usages_cost() {
        let (view, _) = crate::handlers::test_support::world(3, 2, 11_100);
        let runs = std::env::var("RUNS").map_or(21, |r| r.parse().unwrap());
        let (mut written, mut maps) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let start = std::time::Instant::now();
            let a = measure_written(&view);
            written.push(start.elapsed());
            let start = std::time::Instant::now();
            let b = measure_maps(&view);
            maps.push(start.elapsed());
            assert_eq!(a, b);
        }
        written.sort();
        maps.sort();
        println!(
            "written {:?}, maps {:?} (medians of {runs})",
            written[runs / 2],
            maps[runs / 2]
        );
    }

    #[test]
    fn grouped_bodies_mix_classes_and_counts() {
        let mut groups = BTreeMap::new();
        groups.insert(
            "unknown".to_string(),
            GroupUsage {
                usages: [(ResourceClass::new_unchecked("VCPU"), 7)]
                    .into_iter()
                    .collect(),
                consumer_count: 3,
            },
        );
        // The count comes after the classes, as in a sorted map.
        assert_eq!(
            String::from_utf8(grouped_body(&groups)).unwrap(),
            r#"{"usages":{"unknown":{"VCPU":7,"consumer_count":3}}}"#
        );
        same(grouped_body(&groups), &grouped_body_by_maps(&groups), "one");
        // A group of no classes (which the core never makes) still reads as JSON.
        groups.insert("EMPTY".into(), GroupUsage::default());
        same(grouped_body(&groups), &grouped_body_by_maps(&groups), "two");
        assert_eq!(
            String::from_utf8(grouped_body(&BTreeMap::new())).unwrap(),
            r#"{"usages":{}}"#
        );
    }

    /// Every usages body writes the same bytes as the maps it replaces: each provider
    /// (with many consumers, or none), and each project's totals, with and without a
    /// user, ungrouped and under every kind of consumer type filter.
    #[test]
    fn bodies_match_the_maps() {
        use crate::handlers::test_support::{world, PROJECTS, USERS};
        let (view, _) = world(5, 6, 200);
        let mut providers = 0;
        for provider in view.providers() {
            let usages = view.provider_usages(provider);
            let oracle = wire::ProviderUsages {
                resource_provider_generation: provider.row.generation,
                usages: by_class(usages.iter().copied()),
            };
            same(
                provider_body(provider.row.generation, &usages),
                &oracle,
                "provider",
            );
            providers += 1;
        }
        assert_eq!(providers, 6);
        let filters = [
            TypeFilter::EachType,
            TypeFilter::All,
            TypeFilter::Unknown,
            TypeFilter::Named("INSTANCE"),
            TypeFilter::Named("NOPE"),
        ];
        let mut groups_seen = 0;
        for project in PROJECTS.into_iter().chain(["nobody"]) {
            for user in USERS.into_iter().map(Some).chain([None, Some("nobody")]) {
                let sums = view.project_usages(project, user);
                let oracle = wire::Usages {
                    usages: by_class(sums.iter().map(|(c, n)| (c, *n))),
                };
                same(totals_body(&sums), &oracle, project);
                for filter in filters {
                    let groups = view.project_usages_by_type(project, user, filter);
                    groups_seen += groups.len();
                    let what = format!("{project} {user:?} {filter:?}");
                    same(grouped_body(&groups), &grouped_body_by_maps(&groups), &what);
                }
            }
        }
        assert!(groups_seen > 20, "{groups_seen}");
    }
}
