//! The query string of `GET /allocation_candidates` (1.10–1.39), parsed and checked
//! once into the core's [`CandidateQuery`].
//!
//! Placement checks this query string in a fixed order and words every refusal in its
//! own way, and clients match on those words; the checks here follow that order at
//! each microversion: the JSON Schema of the microversion (on the last value of each
//! key), the request-wide parameters (`limit`, `group_policy`, `root_required`,
//! `same_subtree`), the groups and their suffixes (numbers before 1.33, names from
//! it), then the rules between groups (resourceless groups from 1.36, orphans before,
//! conflicting traits from 1.22, `group_policy` with several suffixed groups). What
//! comes out is a question the search can answer without looking at text again;
//! names that name nothing stay [`RequestedName`]s, because the search reports them
//! at Placement's step, not here.

use std::sync::OnceLock;

use allot_core::candidates::{CandidateQuery, RequestGroup, Sort, Weigh};
use allot_core::{ProviderRef, RequestedName, ResourceClass, Timestamp, TraitName, Uuid};
use regex::Regex;
use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::http::Query;
use crate::microversion::Version;
use crate::params::filters::{member_of_filter, required_filter, resources_filter};
use crate::params::{invalid_query, require_utf8_query, uuid_like};
use crate::{schema, schemas};

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

/// Turns the query string into the search's question, with Placement's checks in
/// Placement's order. `now` is the moment the question is asked: pending claims live
/// then count as used (allot's extension API). `seed` shuffles the candidates if the
/// query asks `sort=random` (the caller draws it: nothing here is random).
pub fn parse(
    version: Version,
    raw: Option<&str>,
    now: Timestamp,
    seed: u64,
) -> Result<CandidateQuery, ApiError> {
    require_utf8_query(raw.unwrap_or(""))?;
    let query = Query::parse(raw);
    let schema = schemas::allocation_candidates_query(version.0);
    check_schema(&query, &schema)?;

    // Request-wide parameters. Placement reads the first `limit` and `group_policy`
    // (the schema saw the last ones).
    let limit = limit(&query, &schema)?;
    let group_policy = query
        .all("group_policy")
        .first()
        .copied()
        .filter(|p| !p.is_empty());
    let (root_required, root_forbidden) = root_traits(&query)?;
    let same_subtrees = same_subtrees(&query)?;

    let groups = groups(version, &query)?;
    check_between_groups(version, &groups, &same_subtrees, group_policy)?;

    Ok(CandidateQuery {
        groups: groups.into_iter().map(GroupBuilder::finish).collect(),
        isolate: group_policy == Some("isolate"),
        limit,
        root_required: traits(&root_required),
        root_forbidden: traits(&root_forbidden),
        same_subtrees,
        nested_aware: version.at_least(29),
        now,
        weigh: weigh(&query, seed)?,
    })
}

/// Placement's schema of the microversion, exactly (its refusals print it), on the
/// last value of each key: allot's own parameters are read apart ([`weigh`]).
fn check_schema(query: &Query, schema: &Value) -> Result<(), ApiError> {
    let mut last = Map::new();
    for (key, value) in &query.0 {
        if !ALLOT_PARAMETERS.contains(&key.as_str()) {
            last.insert(key.clone(), Value::String(value.clone()));
        }
    }
    schema::validate(&Value::Object(last), schema).map_err(invalid_query)
}

/// `limit`: the first one given, checked against the schema's `limit` on its own.
fn limit(query: &Query, schema: &Value) -> Result<Option<usize>, ApiError> {
    let Some(first) = query.all("limit").first().copied() else {
        return Ok(None);
    };
    let only_limit = json!({
        "type": "object",
        "properties": {"limit": schema["properties"]["limit"].clone()},
    });
    schema::validate(&json!({ "limit": first }), &only_limit).map_err(invalid_query)?;
    Ok(Some(first.parse::<usize>().unwrap_or(usize::MAX)))
}

/// `root_required`: given at most once, its required traits (in the request's order,
/// without repeats next to each other) and its forbidden ones, none of them both.
fn root_traits(query: &Query) -> Result<(Vec<String>, Vec<String>), ApiError> {
    let roots = query.all("root_required");
    if roots.len() > 1 {
        return Err(ApiError::query_duplicate_key(
            "Query parameter 'root_required' may be specified only once.",
        ));
    }
    let Some(value) = roots.first() else {
        return Ok((Vec::new(), Vec::new()));
    };
    // No `in:` form here, at any microversion; forbidden traits are allowed.
    let (required, forbidden) = required_filter(Version(38), &[value])?;
    let mut required = required.into_iter().flatten().collect::<Vec<_>>();
    required.dedup();
    let mut conflicts: Vec<&str> = required
        .iter()
        .filter(|t| forbidden.contains(t))
        .map(String::as_str)
        .collect();
    conflicts.sort_unstable();
    conflicts.dedup();
    if !conflicts.is_empty() {
        return Err(ApiError::query_bad_value(format!(
            "Conflicting required and forbidden traits found in root_required: {}",
            conflicts.join(", ")
        )));
    }
    Ok((required, forbidden))
}

/// Every `same_subtree`: each a set of group suffixes, in the order given.
fn same_subtrees(query: &Query) -> Result<Vec<Vec<String>>, ApiError> {
    let mut same_subtrees: Vec<Vec<String>> = Vec::new();
    for value in query.all("same_subtree") {
        let mut set: Vec<String> = Vec::new();
        for s in value.split(',').map(str::trim) {
            if s.is_empty() {
                return Err(ApiError::query_bad_value(
                    "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                ));
            }
            if !set.iter().any(|x| x == s) {
                set.push(s.to_owned());
            }
        }
        same_subtrees.push(set);
    }
    Ok(same_subtrees)
}

/// The request groups, in the order their first parameter appears, each parameter
/// read with its group's rules.
fn groups(version: Version, query: &Query) -> Result<Vec<GroupBuilder>, ApiError> {
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
            _ => g.in_tree = Some(in_tree_value(value)?),
        }
    }
    Ok(groups)
}

/// An `in_treeS` value, trimmed: a uuid in any spelling Placement accepts here
/// (`params::uuid_like`); only the canonical one names a provider
/// ([`GroupBuilder::finish`]).
fn in_tree_value(value: &str) -> Result<String, ApiError> {
    let trimmed = value.trim();
    if uuid_like(trimmed).is_none() {
        return Err(invalid_query(format!(
            "Expected 'in_tree' parameter to be a format of uuid. Got: {value}"
        )));
    }
    Ok(trimmed.to_owned())
}

/// The rules between groups, at the microversion: resourceless groups (from 1.36) or
/// orphans (before), conflicting traits (from 1.22), and `group_policy` with several
/// suffixed groups.
fn check_between_groups(
    version: Version,
    groups: &[GroupBuilder],
    same_subtrees: &[Vec<String>],
    group_policy: Option<&str>,
) -> Result<(), ApiError> {
    if version.at_least(36) {
        check_resourceless(groups, same_subtrees)?;
    } else {
        check_orphans(groups)?;
    }
    if version.at_least(22) {
        check_conflicting_traits(groups)?;
    }
    if group_policy.is_none() && groups.iter().filter(|g| !g.suffix.is_empty()).count() > 1 {
        return Err(ApiError::bad_request(
            "The \"group_policy\" parameter is required when specifying more than one \
             \"resources{N}\" parameter.",
        ));
    }
    Ok(())
}

/// The query parameters allot adds to Placement's (issue 24).
const ALLOT_PARAMETERS: [&str; 2] = ["sort", "prefer"];

/// `sort` and `prefer` given apart from a query (a drain's body), read as
/// [`weigh`] reads them from one.
pub fn weigh_of(sort: Option<&str>, prefer: Option<&str>, seed: u64) -> Result<Weigh, ApiError> {
    let pairs = [("sort", sort), ("prefer", prefer)];
    let query = Query(
        pairs
            .iter()
            .filter_map(|(k, v)| Some(((*k).to_owned(), (*v)?.to_owned())))
            .collect(),
    );
    weigh(&query, seed)
}

/// allot's `sort` and `prefer` (issue 24): `sort` is one of three words, the last
/// given; `prefer` is a comma-separated list of traits, and may be repeated.
fn weigh(query: &Query, seed: u64) -> Result<Weigh, ApiError> {
    let sort = match query.all("sort").last().copied() {
        None => None,
        Some("pack") => Some(Sort::Pack),
        Some("spread") => Some(Sort::Spread),
        Some("random") => Some(Sort::Random(seed)),
        Some(other) => {
            return Err(ApiError::query_bad_value(format!(
                "Invalid query string parameters: sort={other:?} is not one of pack, \
                 spread, random."
            )))
        }
    };
    let mut prefer: Vec<String> = Vec::new();
    for value in query.all("prefer") {
        for name in value.split(',').map(str::trim) {
            if name.is_empty() {
                return Err(ApiError::query_bad_value(format!(
                    "Invalid query string parameters: prefer={value:?} names an empty trait."
                )));
            }
            if !prefer.iter().any(|p| p == name) {
                prefer.push(name.to_owned());
            }
        }
    }
    Ok(Weigh {
        sort,
        prefer: traits(&prefer),
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
        return Err(ApiError::query_missing_value(
            "There must be at least one resources or resources[$S] parameter.",
        ));
    }
    let named: Vec<&str> = same_subtrees.iter().flatten().map(String::as_str).collect();
    let bad: Vec<&str> = resourceless
        .iter()
        .copied()
        .filter(|s| !named.contains(s))
        .collect();
    if !bad.is_empty() {
        return Err(ApiError::query_bad_value(format!(
            "Resourceless suffixed group request should be specified in `same_subtree` query \
             param: bad group(s) - {}.",
            py_list(&bad)
        )));
    }
    let mut unknown: Vec<&str> = named
        .iter()
        .copied()
        .filter(|s| !groups.iter().any(|g| g.suffix == *s))
        .collect();
    unknown.dedup();
    if !unknown.is_empty() {
        let all: Vec<&str> = groups.iter().map(|g| g.suffix.as_str()).collect();
        return Err(ApiError::query_bad_value(format!(
            "Real suffixes should be specified in `same_subtree`: {} not found in {}.",
            py_list(&unknown),
            py_list(&all)
        )));
    }
    Ok(())
}

/// Before 1.36: every group has resources.
fn check_orphans(groups: &[GroupBuilder]) -> Result<(), ApiError> {
    let orphans = orphan_keys(groups, "required", |g| !g.required.is_empty());
    if !orphans.is_empty() {
        return Err(ApiError::bad_request(format!(
            "All traits parameters must be associated with resources.  Found the following \
             orphaned traits keys: {}",
            orphans.join(", ")
        )));
    }
    let orphans = orphan_keys(groups, "member_of", |g| {
        !g.member_of.is_empty() || !g.forbidden_aggregates.is_empty()
    });
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

/// The keys (`{param}{suffix}`) of the groups that give `param` but no resources,
/// as Placement names them in its refusals.
fn orphan_keys(
    groups: &[GroupBuilder],
    param: &str,
    gives: impl Fn(&GroupBuilder) -> bool,
) -> Vec<String> {
    groups
        .iter()
        .filter(|g| g.resources.is_empty() && gives(g))
        .map(|g| format!("{param}{}", g.suffix))
        .collect()
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

    fn message(raw: &str, v: u16) -> String {
        parse(Version(v), Some(raw), 0, 0).unwrap_err().message
    }

    #[test]
    fn sort_and_prefer() {
        let q = parse(
            Version(10),
            Some("resources=VCPU:1&sort=pack&prefer=CUSTOM_A,CUSTOM_B&prefer=CUSTOM_A"),
            0,
            7,
        )
        .unwrap();
        assert_eq!(q.weigh.sort, Some(Sort::Pack));
        assert_eq!(
            q.weigh.prefer,
            traits(&["CUSTOM_A".into(), "CUSTOM_B".into()])
        );
        let q = parse(Version(39), Some("resources=VCPU:1&sort=random"), 0, 7).unwrap();
        assert_eq!(q.weigh.sort, Some(Sort::Random(7)));
        let q = parse(Version(39), Some("resources=VCPU:1"), 0, 7).unwrap();
        assert!(!q.weigh.is_set());
        let m = message("resources=VCPU:1&sort=heaviest", 39);
        assert!(m.contains("sort=\"heaviest\" is not one of pack"), "{m}");
        // Placement's refusals print Placement's own schema, without allot's keys.
        for v in [14, 39] {
            let m = message("resources=VCPU:1&foo=1", v);
            assert!(m.contains("'foo'") && !m.contains("spread"), "{m}");
        }
        let m = message("resources=VCPU:1&prefer=CUSTOM_A,,CUSTOM_B", 39);
        assert!(m.contains("names an empty trait"), "{m}");
    }

    #[test]
    fn groups_and_request_wide_parameters() {
        let q = parse(
            Version(39),
            Some(
                "resources=VCPU:1&resources_A=VGPU:1&required_A=in:CUSTOM_X,CUSTOM_Y\
                 &required_A=!CUSTOM_Z&resources1=DISK_GB:5&group_policy=isolate\
                 &group_policy=none&limit=3&limit=9&same_subtree=_A,1",
            ),
            0,
            0,
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
