//! `GET /allocation_candidates` (1.10–1.39): where a request for resources fits.
//!
//! The handler turns the query string into a [`CandidateQuery`] with Placement's checks
//! and messages at each microversion (the groups and their suffixes, `group_policy`,
//! `limit`, `root_required`, `same_subtree`), runs the in-memory search of
//! `allot_core::candidates` on a blocking thread under the view's read lock, and
//! writes the answer in the form of the microversion, straight from the search's
//! output (the shape of `wire::candidates`, which the tests keep as the oracle):
//! allocation requests as lists before 1.12 and as objects (with `mappings` from 1.34)
//! after; provider summaries with traits from 1.17, every inventory from 1.27, parent
//! and root from 1.29.

use std::sync::OnceLock;

use allot_core::candidates::{
    AllocationRequest, CandidateQuery, Candidates, ProviderSummary, RequestGroup, SearchOptions,
    SummaryResource,
};
use allot_core::{
    ProviderId, ProviderRef, RequestedName, ResourceClass, State as View, TraitName, Uuid,
};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use regex::Regex;
use serde_json::{json, Map, Value};

use crate::context::Ctx;
use crate::error::{codes, ApiError, ApiResult};
use crate::http::{self, Query};
use crate::microversion::Version;
use crate::params::filters::{member_of_filter, required_filter, resources_filter};
use crate::params::{require_utf8_query, uuid_like};
use crate::policy::{authorize, Action};
use crate::wire::write::{self, UUID_LEN};
use crate::{schema, schemas, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/allocation_candidates", get(list))
}

/// `GET /allocation_candidates`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require(10)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::AllocationCandidatesList)?;
    let query = CandidateQuery {
        // Pending claims live now count as used (allot's extension API).
        now: app.host.now(),
        ..parse_query(ctx.version, raw.as_deref())?
    };
    let options = SearchOptions {
        max_candidates: app
            .config
            .max_allocation_candidates
            .unwrap_or(allot_core::candidates::DEFAULT_MAX_CANDIDATES),
        random_seed: app
            .config
            .randomize_allocation_candidates
            .then(|| Uuid::new_v4().as_u64_pair().0),
        ..Default::default()
    };
    let version = ctx.version;
    let host = app.host.clone();
    // The search can take milliseconds of CPU: keep it off the async workers. The read
    // guard lives only inside the blocking task, so the answer, which borrows from the
    // view, is serialized to bytes there too.
    let body = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, ApiError> {
        let view = host.read();
        let found = view.allocation_candidates(&query, &options)?;
        if found.truncated {
            tracing::warn!(
                returned = found.requests.len(),
                "allocation candidates cut short by max_allocation_candidates or the search \
                 step budget"
            );
        }
        // Written once, into a buffer sized for it up front.
        let bytes = render(&view, version, &query, &found).to_bytes();
        Ok(bytes)
    })
    .await
    .map_err(|join| {
        tracing::error!(error = %join, "allocation candidates task failed");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "")
    })??;
    Ok(ctx.cached(http::json_bytes(StatusCode::OK, body), app.host.now()))
}

fn invalid_query(message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("Invalid query string parameters: {message}"))
}

/// Python's `repr` of a list of strings, as Placement puts suffix lists in messages.
fn py_list(items: &[&str]) -> String {
    let parts: Vec<String> = items.iter().map(|s| schema::py_repr(&json!(s))).collect();
    format!("[{}]", parts.join(", "))
}

/// A group being parsed: its names as the request gave them, for the checks and
/// messages here, until [`GroupBuilder::finish`] sorts them for the core.
#[derive(Default)]
struct GroupBuilder {
    suffix: String,
    resources: Vec<(String, u64)>,
    required: Vec<Vec<String>>,
    forbidden: Vec<String>,
    member_of: Vec<Vec<Uuid>>,
    forbidden_aggregates: Vec<Uuid>,
    in_tree: Option<String>,
}

impl GroupBuilder {
    /// The core's group: every name sorted into a name or text that names nothing
    /// (the search reports both alike, at Placement's step), `in_tree` as a provider
    /// reference.
    fn finish(self) -> RequestGroup {
        RequestGroup {
            suffix: self.suffix,
            resources: self
                .resources
                .iter()
                .map(|(class, amount)| (ResourceClass::requested(class), *amount))
                .collect(),
            required: self.required.iter().map(|any| traits(any)).collect(),
            forbidden: traits(&self.forbidden),
            member_of: self.member_of,
            forbidden_aggregates: self.forbidden_aggregates,
            in_tree: self.in_tree.as_deref().map(ProviderRef::parse),
        }
    }
}

/// Trait names as the request gave them, sorted for the core.
fn traits(names: &[String]) -> Vec<RequestedName<TraitName>> {
    names.iter().map(|t| TraitName::requested(t)).collect()
}

/// Turns the query string into a request, with Placement's checks in Placement's
/// order.
fn parse_query(version: Version, raw: Option<&str>) -> Result<CandidateQuery, ApiError> {
    require_utf8_query(raw.unwrap_or(""))?;
    let query = Query::parse(raw);
    let schema = schemas::allocation_candidates_query(version.0);
    let mut last = Map::new();
    for (key, value) in &query.0 {
        last.insert(key.clone(), Value::String(value.clone()));
    }
    schema::validate(&Value::Object(last), &schema).map_err(invalid_query)?;

    // Request-wide parameters. Placement reads the first `limit` and `group_policy`
    // (the schema saw the last ones).
    let limit = match query.all("limit").first() {
        None => None,
        Some(first) => {
            let only_limit = json!({
                "type": "object",
                "properties": {"limit": schema["properties"]["limit"].clone()},
            });
            schema::validate(&json!({ "limit": first }), &only_limit).map_err(invalid_query)?;
            Some(first.parse::<usize>().unwrap_or(usize::MAX))
        }
    };
    let group_policy = query
        .all("group_policy")
        .first()
        .copied()
        .filter(|p| !p.is_empty());
    let mut root_required = Vec::new();
    let mut root_forbidden = Vec::new();
    let roots = query.all("root_required");
    if roots.len() > 1 {
        return Err(ApiError::bad_request(
            "Query parameter 'root_required' may be specified only once.",
        )
        .with_code(codes::QUERY_DUPLICATE_KEY));
    }
    if let Some(value) = roots.first() {
        // No `in:` form here, at any microversion; forbidden traits are allowed.
        let (required, forbidden) = required_filter(Version(38), &[value])?;
        root_required = required.into_iter().flatten().collect::<Vec<_>>();
        root_required.dedup();
        root_forbidden = forbidden;
        let mut conflicts: Vec<&str> = root_required
            .iter()
            .filter(|t| root_forbidden.contains(t))
            .map(String::as_str)
            .collect();
        conflicts.sort_unstable();
        conflicts.dedup();
        if !conflicts.is_empty() {
            return Err(ApiError::bad_request(format!(
                "Conflicting required and forbidden traits found in root_required: {}",
                conflicts.join(", ")
            ))
            .with_code(codes::QUERY_BAD_VALUE));
        }
    }
    let mut same_subtrees: Vec<Vec<String>> = Vec::new();
    for value in query.all("same_subtree") {
        let mut set: Vec<String> = Vec::new();
        for s in value.split(',').map(str::trim) {
            if s.is_empty() {
                return Err(ApiError::bad_request(
                    "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                )
                .with_code(codes::QUERY_BAD_VALUE));
            }
            if !set.iter().any(|x| x == s) {
                set.push(s.to_owned());
            }
        }
        same_subtrees.push(set);
    }

    // The groups, in the order their first parameter appears.
    // Compiled once per process, not per request (a regex build costs thousands of
    // allocations).
    static NAMED: OnceLock<Regex> = OnceLock::new();
    static NUMBERED: OnceLock<Regex> = OnceLock::new();
    let key_pattern = if version.at_least(33) {
        NAMED.get_or_init(|| group_key_pattern("[a-zA-Z0-9_-]{1,64}"))
    } else {
        NUMBERED.get_or_init(|| group_key_pattern("[1-9][0-9]*"))
    };
    let mut groups: Vec<GroupBuilder> = Vec::new();
    for (key, value) in &query.0 {
        let Some(m) = key_pattern.captures(key) else {
            continue;
        };
        let prefix = m.get(1).map_or("", |x| x.as_str());
        let suffix = m.get(2).map_or("", |x| x.as_str());
        let at = match groups.iter().position(|g| g.suffix == suffix) {
            Some(i) => i,
            None => {
                groups.push(GroupBuilder {
                    suffix: suffix.to_owned(),
                    ..Default::default()
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[at];
        match prefix {
            "resources" => g.resources = resources_filter(value)?,
            "required" => (g.required, g.forbidden) = required_filter(version, &query.all(key))?,
            "member_of" => {
                (g.member_of, g.forbidden_aggregates) =
                    member_of_values(version, suffix, &query.all(key))?
            }
            _ => {
                let trimmed = value.trim();
                if uuid_like(trimmed).is_none() {
                    return Err(invalid_query(format!(
                        "Expected 'in_tree' parameter to be a format of uuid. Got: {value}"
                    )));
                }
                g.in_tree = Some(trimmed.to_owned());
            }
        }
    }

    if version.at_least(36) {
        check_resourceless(&groups, &same_subtrees)?;
    } else {
        check_orphans(&groups)?;
    }
    if version.at_least(22) {
        check_conflicting_traits(&groups)?;
    }
    if group_policy.is_none() && groups.iter().filter(|g| !g.suffix.is_empty()).count() > 1 {
        return Err(ApiError::bad_request(
            "The \"group_policy\" parameter is required when specifying more than one \
             \"resources{N}\" parameter.",
        ));
    }

    Ok(CandidateQuery {
        groups: groups.into_iter().map(GroupBuilder::finish).collect(),
        isolate: group_policy == Some("isolate"),
        limit,
        root_required: traits(&root_required),
        root_forbidden: traits(&root_forbidden),
        same_subtrees,
        nested_aware: version.at_least(29),
        now: 0,
    })
}

/// Required aggregates (at least one of each list) and forbidden ones.
type Aggregates = (Vec<Vec<Uuid>>, Vec<Uuid>);

/// `member_ofS` values: Placement's checks of repeated (1.24) and forbidden (1.32)
/// values, worded with the group's suffix, around the shared parser of one value.
fn member_of_values(
    version: Version,
    suffix: &str,
    values: &[&str],
) -> Result<Aggregates, ApiError> {
    if !version.at_least(24) && values.len() > 1 {
        return Err(ApiError::bad_request(format!(
            "Multiple member_of{suffix} parameters are not supported"
        )));
    }
    let mut required = Vec::new();
    let mut forbidden: Vec<Uuid> = Vec::new();
    for value in values {
        let (r, f) = member_of_filter(Version(39), &[value])?;
        required.extend(r);
        if !f.is_empty() && !version.at_least(32) {
            return Err(ApiError::bad_request(format!(
                "Forbidden member_of{suffix} parameters are not supported in the specified \
                 microversion"
            )));
        }
        for u in f {
            if !forbidden.contains(&u) {
                forbidden.push(u);
            }
        }
    }
    Ok((required, forbidden))
}

/// From 1.36: groups without resources must be named in `same_subtree`, and
/// `same_subtree` names only real groups.
fn check_resourceless(
    groups: &[GroupBuilder],
    same_subtrees: &[Vec<String>],
) -> Result<(), ApiError> {
    let resourceless: Vec<&str> = groups
        .iter()
        .filter(|g| g.resources.is_empty())
        .map(|g| g.suffix.as_str())
        .collect();
    if resourceless.len() == groups.len() {
        return Err(ApiError::bad_request(
            "There must be at least one resources or resources[$S] parameter.",
        )
        .with_code(codes::QUERY_MISSING_VALUE));
    }
    let named: Vec<&str> = same_subtrees.iter().flatten().map(String::as_str).collect();
    let bad: Vec<&str> = resourceless
        .iter()
        .copied()
        .filter(|s| !named.contains(s))
        .collect();
    if !bad.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Resourceless suffixed group request should be specified in `same_subtree` query \
             param: bad group(s) - {}.",
            py_list(&bad)
        ))
        .with_code(codes::QUERY_BAD_VALUE));
    }
    let mut unknown: Vec<&str> = named
        .iter()
        .copied()
        .filter(|s| !groups.iter().any(|g| g.suffix == *s))
        .collect();
    unknown.dedup();
    if !unknown.is_empty() {
        let all: Vec<&str> = groups.iter().map(|g| g.suffix.as_str()).collect();
        return Err(ApiError::bad_request(format!(
            "Real suffixes should be specified in `same_subtree`: {} not found in {}.",
            py_list(&unknown),
            py_list(&all)
        ))
        .with_code(codes::QUERY_BAD_VALUE));
    }
    Ok(())
}

/// Before 1.36: every group has resources.
fn check_orphans(groups: &[GroupBuilder]) -> Result<(), ApiError> {
    let orphans: Vec<String> = groups
        .iter()
        .filter(|g| !g.required.is_empty() && g.resources.is_empty())
        .map(|g| format!("required{}", g.suffix))
        .collect();
    if !orphans.is_empty() {
        return Err(ApiError::bad_request(format!(
            "All traits parameters must be associated with resources.  Found the following \
             orphaned traits keys: {}",
            orphans.join(", ")
        )));
    }
    let orphans: Vec<String> = groups
        .iter()
        .filter(|g| {
            g.resources.is_empty()
                && (!g.member_of.is_empty() || !g.forbidden_aggregates.is_empty())
        })
        .map(|g| format!("member_of{}", g.suffix))
        .collect();
    if !orphans.is_empty() {
        return Err(ApiError::bad_request(format!(
            "All member_of parameters must be associated with resources. Found the following \
             orphaned member_of keys: {}",
            orphans.join(", ")
        )));
    }
    if groups.iter().any(|g| g.resources.is_empty()) {
        return Err(ApiError::bad_request(
            "All request groups must specify resources.",
        ));
    }
    if groups.is_empty() {
        return Err(ApiError::bad_request(
            "At least one request group (`resources` or `resources{$S}`) is required.",
        ));
    }
    Ok(())
}

/// From 1.22: an any-of set of required traits all of which are forbidden.
fn check_conflicting_traits(groups: &[GroupBuilder]) -> Result<(), ApiError> {
    let mut conflicts: Vec<String> = Vec::new();
    for g in groups {
        for any in &g.required {
            if any.iter().all(|t| g.forbidden.contains(t)) {
                let mut names: Vec<&str> = any.iter().map(String::as_str).collect();
                names.sort_unstable();
                conflicts.push(format!("required{}: ({})", g.suffix, names.join(", ")));
            }
        }
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    conflicts.sort();
    Err(ApiError::bad_request(format!(
        "Conflicting required and forbidden traits found in the following traits keys: {}",
        conflicts.join(", ")
    )))
}

/// The answer at the request's microversion, to be written by [`Answer::write`]
/// straight from the search's answer and the view: no map or list is built per
/// candidate or per provider, each provider's uuid is formatted once however many
/// candidates name it, and one summary's lists are refilled for every provider. The
/// keys come out in the order the `BTreeMap`s of `wire::candidates` would give them;
/// the tests hold the two to the same bytes.
fn render<'a>(
    view: &'a View,
    version: Version,
    query: &'a CandidateQuery,
    found: &'a Candidates,
) -> Answer<'a> {
    // Class indices in name order, group indices in suffix order: sorted once, then
    // every candidate's maps are written in that order.
    let mut class_order: Vec<usize> = (0..found.classes.len()).collect();
    class_order.sort_by_key(|&i| found.class_name(i));
    let mut group_order: Vec<usize> = (0..query.groups.len()).collect();
    group_order.sort_by_key(|&i| query.groups[i].suffix.as_str());
    let mut summaries: Vec<(Uuid, ProviderId)> = found
        .summaries
        .iter()
        .map(|&id| (view.uuid_of(id), id))
        .collect();
    summaries.sort_unstable_by_key(|&(uuid, _)| uuid);
    summaries.dedup_by_key(|&mut (uuid, _)| uuid);
    // The summarised providers include every provider a candidate allocates from.
    let mut texts: Vec<(ProviderId, [u8; UUID_LEN])> = summaries
        .iter()
        .map(|(uuid, id)| (*id, write::uuid_text(uuid)))
        .collect();
    texts.sort_unstable_by_key(|&(id, _)| id);
    Answer {
        view,
        query,
        found,
        keyed: version.at_least(12),
        with_mappings: version.at_least(34),
        with_traits: version.at_least(17),
        all_resources: version.at_least(27),
        in_tree: version.at_least(29),
        class_order,
        group_order,
        summaries,
        texts,
    }
}

/// What [`render`] returns: the search's answer and what is needed to write it.
struct Answer<'a> {
    view: &'a View,
    query: &'a CandidateQuery,
    found: &'a Candidates,
    /// Allocation requests as objects keyed by provider (1.12).
    keyed: bool,
    /// With `mappings` (1.34).
    with_mappings: bool,
    /// Summaries with traits (1.17).
    with_traits: bool,
    /// Summaries with every inventory, not only the requested classes (1.27).
    all_resources: bool,
    /// Summaries with parent and root (1.29).
    in_tree: bool,
    /// Indices of `found.classes`, sorted by name.
    class_order: Vec<usize>,
    /// Indices of `query.groups`, sorted by suffix.
    group_order: Vec<usize>,
    /// The providers to summarise, sorted by uuid.
    summaries: Vec<(Uuid, ProviderId)>,
    /// The summarised providers' uuids as text, sorted by provider id.
    texts: Vec<(ProviderId, [u8; UUID_LEN])>,
}

/// One allocation of a candidate: provider, class index, amount.
type Allocation = (ProviderId, usize, u64);

/// A candidate's allocations, one slice per provider (they are sorted by provider).
fn by_provider(allocations: &[Allocation]) -> impl Iterator<Item = &[Allocation]> {
    allocations.chunk_by(|a, b| a.0 == b.0)
}

/// Room for a quoted uuid and the punctuation around it.
const QUOTED_UUID: usize = UUID_LEN + 4;
/// Room for an integer.
const INT: usize = 20;

impl Answer<'_> {
    /// The answer's JSON.
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_hint());
        self.write(&mut out);
        out
    }

    /// A bound on the body's size, for its buffer: exact enough for the candidates
    /// (counted from their allocations), a generous guess per summary. Capacity that
    /// is never written is never touched, so it costs address space, not memory; what
    /// this saves is growing a megabytes-long buffer by doubling and copying it.
    fn size_hint(&self) -> usize {
        let classes: usize = 64;
        let mut size = 64;
        for r in &self.found.requests {
            size += 32;
            for part in by_provider(&r.allocations) {
                size += QUOTED_UUID + 48 + part.len() * (classes / 2 + INT);
            }
            if self.with_mappings {
                for (g, ids) in self.query.groups.iter().zip(&r.mappings) {
                    size += g.suffix.len() + 8 + ids.len() * QUOTED_UUID;
                }
            }
        }
        // A summary at 1.39 with a few inventories and traits is 300 to 400 bytes.
        size + self.summaries.len() * 768
    }

    /// A provider's quoted uuid.
    fn quoted_uuid(&self, out: &mut Vec<u8>, id: ProviderId) {
        match self.texts.binary_search_by_key(&id, |&(id, _)| id) {
            Ok(at) => write::quoted_uuid(out, &self.texts[at].1),
            // Not summarised (not expected): looked up in the view.
            Err(_) => write::quoted_uuid(out, &write::uuid_text(&self.view.uuid_of(id))),
        }
    }

    /// `{"allocation_requests": [...], "provider_summaries": {...}}`.
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"allocation_requests\":[");
        for (i, request) in self.found.requests.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.write_request(out, request);
        }
        out.extend_from_slice(b"],\"provider_summaries\":{");
        let mut summary = ProviderSummary::default();
        let mut first = true;
        for &(uuid, id) in &self.summaries {
            if !self
                .view
                .fill_provider_summary(id, self.query.now, &mut summary)
            {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            write::quoted_uuid(out, &write::uuid_text(&uuid));
            out.push(b':');
            self.write_summary(out, &summary);
        }
        out.extend_from_slice(b"}}");
    }

    /// One candidate, as a list of providers (before 1.12) or an object keyed by
    /// provider uuid.
    fn write_request(&self, out: &mut Vec<u8>, request: &AllocationRequest) {
        let allocations = &request.allocations;
        if !self.keyed {
            // Providers in the order of their ids, as the search sorted them:
            // `{"resource_provider": {"uuid": ...}, "resources": {...}}` each.
            out.extend_from_slice(b"{\"allocations\":[");
            for (i, part) in by_provider(allocations).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"resource_provider\":{\"uuid\":");
                self.quoted_uuid(out, part[0].0);
                out.extend_from_slice(b"},\"resources\":");
                self.write_amounts(out, part);
                out.push(b'}');
            }
            out.extend_from_slice(b"]}");
            return;
        }
        // `{uuid: {"resources": {...}}}` in uuid order. A candidate has few providers:
        // they are sorted on the stack, each uuid looked up once; a list is allocated
        // only for a candidate of many providers.
        out.extend_from_slice(b"{\"allocations\":{");
        const ON_STACK: usize = 8;
        let mut few: [([u8; UUID_LEN], &[Allocation]); ON_STACK] = [([0; UUID_LEN], &[]); ON_STACK];
        let mut many: Vec<([u8; UUID_LEN], &[Allocation])> = Vec::new();
        let mut count = 0;
        for part in by_provider(allocations) {
            let id = part[0].0;
            let text = match self.texts.binary_search_by_key(&id, |&(id, _)| id) {
                Ok(at) => self.texts[at].1,
                // Not summarised (not expected): looked up in the view.
                Err(_) => write::uuid_text(&self.view.uuid_of(id)),
            };
            let entry = (text, part);
            if count < ON_STACK {
                few[count] = entry;
            } else {
                if many.is_empty() {
                    many.extend_from_slice(&few);
                }
                many.push(entry);
            }
            count += 1;
        }
        let parts = if count <= ON_STACK {
            &mut few[..count]
        } else {
            &mut many[..]
        };
        // The text orders as the uuid does.
        parts.sort_unstable_by_key(|&(text, _)| text);
        for (i, (text, part)) in parts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write::quoted_uuid(out, text);
            out.extend_from_slice(b":{\"resources\":");
            self.write_amounts(out, part);
            out.push(b'}');
        }
        out.push(b'}');
        if self.with_mappings {
            // Each group's providers, by suffix (from 1.34).
            out.extend_from_slice(b",\"mappings\":{");
            let groups = self
                .group_order
                .iter()
                .filter_map(|&g| Some((g, request.mappings.get(g)?)));
            for (i, (g, ids)) in groups.enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write::string(out, &self.query.groups[g].suffix);
                out.extend_from_slice(b":[");
                for (j, id) in ids.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    self.quoted_uuid(out, *id);
                }
                out.push(b']');
            }
            out.push(b'}');
        }
        out.push(b'}');
    }

    /// `{class: amount}` for one provider, in class name order.
    fn write_amounts(&self, out: &mut Vec<u8>, part: &[Allocation]) {
        out.push(b'{');
        let mut first = true;
        for &class in &self.class_order {
            let Some(a) = part.iter().find(|a| a.1 == class) else {
                continue;
            };
            if !first {
                out.push(b',');
            }
            first = false;
            write::string(out, self.found.class_name(class));
            out.push(b':');
            write::uint(out, a.2);
        }
        out.push(b'}');
    }

    /// One provider summary at the request's microversion.
    fn write_summary(&self, out: &mut Vec<u8>, summary: &ProviderSummary) {
        out.push(b'{');
        if self.in_tree {
            out.extend_from_slice(b"\"parent_provider_uuid\":");
            match &summary.parent_uuid {
                Some(parent) => write::quoted_uuid(out, &write::uuid_text(parent)),
                None => out.extend_from_slice(b"null"),
            }
            out.push(b',');
        }
        out.extend_from_slice(b"\"resources\":{");
        // The requested classes before 1.27, all of them from 1.27, by class name.
        let wanted = |r: &&SummaryResource| {
            self.all_resources || self.found.classes.iter().any(|c| c.as_str() == r.class)
        };
        let write_entry = |out: &mut Vec<u8>, i: usize, r: &SummaryResource| {
            if i > 0 {
                out.push(b',');
            }
            write::string(out, r.class);
            out.extend_from_slice(b":{\"capacity\":");
            write::int(out, r.capacity);
            out.extend_from_slice(b",\"used\":");
            write::uint(out, r.used);
            out.push(b'}');
        };
        let resources = &summary.resources;
        if resources.is_sorted_by_key(|r| r.class) {
            for (i, r) in resources.iter().filter(wanted).enumerate() {
                write_entry(out, i, r);
            }
        } else {
            // Not expected (the view keeps inventories by class), but the order on the
            // wire is the names' order whatever the view's is.
            let mut sorted: Vec<&SummaryResource> = resources.iter().collect();
            sorted.sort_by_key(|r| r.class);
            for (i, r) in sorted.into_iter().filter(wanted).enumerate() {
                write_entry(out, i, r);
            }
        }
        out.push(b'}');
        if self.in_tree {
            out.extend_from_slice(b",\"root_provider_uuid\":");
            write::quoted_uuid(out, &write::uuid_text(&summary.root_uuid));
        }
        if self.with_traits {
            out.extend_from_slice(b",\"traits\":[");
            for (i, t) in summary.traits.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write::string(out, t);
            }
            out.push(b']');
        }
        out.push(b'}');
    }
}

/// The query keys that make or join a request group, with the group suffix of the
/// microversion (numbers before 1.33, names from it).
fn group_key_pattern(suffix: &str) -> Regex {
    Regex::new(&format!(
        "^(resources|required|member_of|in_tree)({suffix})?$"
    ))
    .expect("a valid pattern")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;
    use std::collections::BTreeMap;

    /// The answer as it was built before [`render`] wrote it straight from the search:
    /// the `wire::candidates` maps, the oracle for the bytes.
    fn render_by_maps<'a>(
        view: &'a View,
        version: Version,
        query: &'a CandidateQuery,
        found: &'a Candidates,
    ) -> wire::AllocationCandidates<'a> {
        let keyed = version.at_least(12);
        let with_mappings = version.at_least(34);
        let with_traits = version.at_least(17);
        let all_resources = version.at_least(27);
        let in_tree = version.at_least(29);

        let allocation_requests = found
            .requests
            .iter()
            .map(|r| {
                // Allocations grouped by provider (they are sorted by provider).
                let mut by_provider: Vec<(Uuid, BTreeMap<&str, u64>)> = Vec::new();
                for &(id, class, amount) in &r.allocations {
                    let uuid = view.uuid_of(id);
                    let name = found.class_name(class);
                    match by_provider.last_mut() {
                        Some((last, resources)) if *last == uuid => {
                            resources.insert(name, amount);
                        }
                        _ => by_provider.push((uuid, BTreeMap::from([(name, amount)]))),
                    }
                }
                if !keyed {
                    let allocations = by_provider
                        .into_iter()
                        .map(|(uuid, resources)| wire::ProviderResources {
                            resource_provider: wire::ProviderRef { uuid },
                            resources,
                        })
                        .collect();
                    return wire::AllocationRequest::Listed(wire::ListedRequest { allocations });
                }
                let mappings = with_mappings.then(|| {
                    query
                        .groups
                        .iter()
                        .zip(&r.mappings)
                        .map(|(g, ids)| {
                            let uuids = ids.iter().map(|id| view.uuid_of(*id)).collect();
                            (g.suffix.as_str(), uuids)
                        })
                        .collect()
                });
                wire::AllocationRequest::Keyed(wire::KeyedRequest {
                    allocations: by_provider
                        .into_iter()
                        .map(|(uuid, resources)| (uuid, wire::Resources { resources }))
                        .collect(),
                    mappings,
                })
            })
            .collect();

        let mut provider_summaries = BTreeMap::new();
        for id in &found.summaries {
            let Some(s) = view.provider_summary(*id, query.now) else {
                continue;
            };
            let resources = s
                .resources
                .iter()
                .filter(|r| all_resources || found.classes.iter().any(|c| c.as_str() == r.class))
                .map(|r| {
                    let summary = wire::SummaryResource {
                        capacity: r.capacity,
                        used: r.used,
                    };
                    (r.class, summary)
                })
                .collect();
            let summary = wire::ProviderSummary {
                parent_provider_uuid: in_tree.then_some(s.parent_uuid),
                resources,
                root_provider_uuid: in_tree.then_some(s.root_uuid),
                traits: with_traits.then_some(s.traits),
            };
            provider_summaries.insert(s.uuid, summary);
        }
        wire::AllocationCandidates {
            allocation_requests,
            provider_summaries,
        }
    }

    fn message(raw: &str, v: u16) -> String {
        parse_query(Version(v), Some(raw)).unwrap_err().message
    }

    #[test]
    fn groups_and_request_wide_parameters() {
        let q = parse_query(
            Version(39),
            Some(
                "resources=VCPU:1&resources_A=VGPU:1&required_A=in:CUSTOM_X,CUSTOM_Y\
                 &required_A=!CUSTOM_Z&resources1=DISK_GB:5&group_policy=isolate\
                 &group_policy=none&limit=3&limit=9&same_subtree=_A,1",
            ),
        )
        .unwrap();
        let suffixes: Vec<&str> = q.groups.iter().map(|g| g.suffix.as_str()).collect();
        assert_eq!(suffixes, vec!["", "_A", "1"]);
        assert_eq!(
            q.groups[1].required,
            vec![vec![
                TraitName::requested("CUSTOM_X"),
                TraitName::requested("CUSTOM_Y")
            ]]
        );
        assert_eq!(
            q.groups[1].forbidden,
            vec![TraitName::requested("CUSTOM_Z")]
        );
        assert_eq!(
            q.groups[0].resources,
            vec![(ResourceClass::requested("VCPU"), 1)]
        );
        assert!(q.isolate);
        assert_eq!(q.limit, Some(3));
        assert_eq!(q.same_subtrees, vec![vec!["_A", "1"]]);
        assert!(q.nested_aware);
    }

    /// A small cloud: a root with two NUMA children and their devices, a second root,
    /// a sharing disk provider.
    fn cloud() -> View {
        use allot_core::ProviderRef;
        use allot_core::{Change, Inventory, ResourceClass, TraitName};
        let mut s = View::new();
        let agg = Uuid::from_u128(0xa);
        let add = |s: &mut View, n: u128, parent: Option<u128>| {
            let parent = parent.map(|p| ProviderRef::from(Uuid::from_u128(p)));
            let (_, c) = s
                .create_provider(Uuid::from_u128(n), &format!("p{n}"), parent, 0)
                .unwrap();
            s.apply(&c);
            s.provider_by_uuid(&Uuid::from_u128(n)).unwrap().id()
        };
        let root = add(&mut s, 1, None);
        let numa = [add(&mut s, 2, Some(1)), add(&mut s, 3, Some(1))];
        let gpus = [add(&mut s, 4, Some(2)), add(&mut s, 5, Some(2))];
        let other = add(&mut s, 6, None);
        let ss = add(&mut s, 7, None);
        let inv = |c: &str, t: u64| (ResourceClass::new_unchecked(c), Inventory::with_total(t));
        let mut changes = vec![
            Change::SetInventories(root, vec![inv("DISK_GB", 100)]),
            Change::SetInventories(other, vec![inv("VCPU", 4), inv("MEMORY_MB", 1024)]),
            Change::SetInventories(ss, vec![inv("DISK_GB", 1000)]),
            Change::SetTraits(
                ss,
                vec![TraitName::new_unchecked("MISC_SHARES_VIA_AGGREGATE")],
            ),
            Change::SetAggregates(ss, vec![agg]),
            Change::SetAggregates(root, vec![agg]),
            Change::SetTraits(root, vec![TraitName::new_unchecked("HW_CPU_X86_AVX2")]),
        ];
        for n in numa {
            changes.push(Change::SetInventories(
                n,
                vec![inv("VCPU", 8), inv("MEMORY_MB", 4096)],
            ));
            changes.push(Change::SetTraits(
                n,
                vec![TraitName::new_unchecked("HW_NUMA_ROOT")],
            ));
        }
        for g in gpus {
            changes.push(Change::SetInventories(g, vec![inv("VGPU", 1)]));
        }
        s.apply(&changes);
        s
    }

    /// Random query strings from the parameters' vocabulary never make the parser, the
    /// search or the renderer panic, at any microversion.
    #[test]
    fn random_queries_never_panic() {
        let view = cloud();
        let keys = [
            "resources",
            "resources1",
            "resources_A",
            "resources2",
            "required",
            "required1",
            "required_A",
            "member_of",
            "member_of1",
            "in_tree",
            "in_tree1",
            "group_policy",
            "limit",
            "root_required",
            "same_subtree",
            "bogus",
            "resources0",
        ];
        let values = [
            "VCPU:1",
            "VGPU:1",
            "DISK_GB:10",
            "VCPU:1,MEMORY_MB:512",
            "VGPU:2",
            "NOPE:1",
            "VCPU:0",
            "VCPU:-1",
            "VCPU:99999999999999999999999",
            "",
            ",",
            "VCPU",
            "HW_NUMA_ROOT",
            "!HW_NUMA_ROOT",
            "in:HW_NUMA_ROOT,HW_CPU_X86_AVX2",
            "CUSTOM_X",
            "!!X",
            "in:",
            "none",
            "isolate",
            "1",
            "0",
            "7",
            "_A,1",
            "_A",
            "1,2",
            ",,",
            "00000000-0000-0000-0000-00000000000a",
            "!00000000-0000-0000-0000-00000000000a",
            "in:00000000-0000-0000-0000-00000000000a,00000000-0000-0000-0000-00000000000b",
            "00000000-0000-0000-0000-000000000002",
            "00000000-0000-0000-0000-000000000001",
            "not-a-uuid",
            "%FF",
            "18446744073709551616",
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut answered = 0;
        for _ in 0..4000 {
            let n = next(6);
            let mut raw: Vec<String> = (0..n)
                .map(|_| format!("{}={}", keys[next(keys.len())], values[next(values.len())]))
                .collect();
            // Mostly with resources that exist.
            raw.insert(next(n + 1), format!("resources={}", values[next(4)]));
            let raw = raw.join("&");
            let version = Version(10 + next(30) as u16);
            let Ok(query) = parse_query(version, Some(&raw)) else {
                continue;
            };
            for seed in [None, Some(3)] {
                let options = SearchOptions {
                    random_seed: seed,
                    ..Default::default()
                };
                if let Ok(found) = view.allocation_candidates(&query, &options) {
                    answered += usize::from(!found.requests.is_empty());
                    let body = render(&view, version, &query, &found).to_bytes();
                    let maps = serde_json::to_vec(&render_by_maps(&view, version, &query, &found));
                    assert_eq!(body, maps.unwrap(), "{raw} at {version:?}");
                }
            }
        }
        assert!(answered > 300, "the queries reach the search ({answered})");
    }

    /// Candidates of more providers than [`KeyedProviders`] sorts on the stack are
    /// written as the maps wrote them.
    #[test]
    fn many_providers_in_one_candidate() {
        use allot_core::{Change, Inventory};
        let mut view = View::new();
        let (_, c) = view
            .create_provider(Uuid::from_u128(0xf00), "root", None, 0)
            .unwrap();
        view.apply(&c);
        let root = ProviderRef::from(Uuid::from_u128(0xf00));
        let mut changes = Vec::new();
        // Uuids in an order unlike the creation order.
        for n in 0..10u128 {
            let uuid = Uuid::from_u128(((n * 7) % 10 + 1) << 64);
            let (_, c) = view
                .create_provider(uuid, &format!("gpu{n}"), Some(root.clone()), 0)
                .unwrap();
            view.apply(&c);
            let id = view.provider_by_uuid(&uuid).unwrap().id();
            let inv = (
                ResourceClass::new_unchecked("VGPU"),
                Inventory::with_total(1),
            );
            changes.push(Change::SetInventories(id, vec![inv]));
        }
        view.apply(&changes);
        let groups: Vec<String> = (1..=9).map(|n| format!("resources{n}=VGPU:1")).collect();
        let raw = format!("{}&group_policy=isolate&limit=3", groups.join("&"));
        for version in [29, 34, 39] {
            let version = Version(version);
            let query = parse_query(version, Some(&raw)).unwrap();
            let found = view
                .allocation_candidates(&query, &SearchOptions::default())
                .unwrap();
            assert_eq!(found.requests.len(), 3);
            assert_eq!(found.requests[0].allocations.len(), 9);
            let body = render(&view, version, &query, &found).to_bytes();
            let maps = serde_json::to_vec(&render_by_maps(&view, version, &query, &found)).unwrap();
            assert_eq!(body, maps, "at {version:?}");
        }
    }

    #[test]
    fn refusals() {
        let cases: Vec<(&str, u16, &str)> = vec![
            ("", 10, "'resources' is a required property"),
            ("resources=VCPU:1&limit=5", 15, "'limit' was unexpected"),
            ("resources=VCPU:1&limit=0", 16, "Failed validating 'pattern'"),
            ("resources=VCPU:1&limit=x&limit=1", 16, "Failed validating 'pattern'"),
            ("resources=", 10, "Got: empty string."),
            ("resources1=VCPU:1&resources2=VCPU:1", 25, "The \"group_policy\" parameter is required"),
            ("resources1=VCPU:1&required2=CUSTOM_A", 25, "All traits parameters must be associated with resources.  Found the following orphaned traits keys: required2"),
            ("resources=VCPU:1&member_of1=5f6b1e2e-4f0e-4b8e-9f69-2f6c1f0a1b2c", 25, "orphaned member_of keys: member_of1"),
            ("resources=VCPU:1&in_tree1=5f6b1e2e-4f0e-4b8e-9f69-2f6c1f0a1b2c", 31, "All request groups must specify resources."),
            ("resources=VCPU:1&in_tree=life", 31, "Expected 'in_tree' parameter to be a format of uuid. Got: life"),
            ("resources1=VCPU:1&required2=CUSTOM_A&group_policy=none", 36, "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - ['2']."),
            ("required1=CUSTOM_A", 36, "There must be at least one resources or resources[$S] parameter."),
            ("resources_A=VCPU:1&same_subtree=A", 36, "Real suffixes should be specified in `same_subtree`: ['A'] not found in ['_A']."),
            ("resources_A=VCPU:1&same_subtree=_A,,_B", 36, "Empty string (unsuffixed group) can not be specified in `same_subtree` "),
            ("resources=VCPU:1&required=CUSTOM_A,!CUSTOM_A", 22, "Conflicting required and forbidden traits found in the following traits keys: required: (CUSTOM_A)"),
            ("resources=VCPU:1&root_required=A,!A", 35, "Conflicting required and forbidden traits found in root_required: A"),
            ("resources=VCPU:1&root_required=A&root_required=B", 35, "Query parameter 'root_required' may be specified only once."),
            ("resources=VCPU:1&root_required=in:A,B", 39, "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39."),
            ("resources=VCPU:1&member_of=5f6b1e2e-4f0e-4b8e-9f69-2f6c1f0a1b2c&member_of=5f6b1e2e-4f0e-4b8e-9f69-2f6c1f0a1b2c", 23, "Multiple member_of parameters are not supported"),
            ("resources1=VCPU:1&member_of1=!5f6b1e2e-4f0e-4b8e-9f69-2f6c1f0a1b2c", 31, "Forbidden member_of1 parameters are not supported in the specified microversion"),
            ("resources_A=VCPU:1", 32, "does not match any of the regexes"),
            ("resources=VCPU:1&root_required=A", 34, "'root_required' does not match any of the regexes"),
        ];
        for (raw, v, want) in cases {
            let got = message(raw, v);
            assert!(got.contains(want), "{raw} at 1.{v}: {got}");
        }
    }
}
