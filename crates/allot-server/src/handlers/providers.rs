//! `/resource_providers` and `/resource_providers/{uuid}`: create, show, list with
//! filters, update (rename, re-parent) and delete providers.

use allot_core::ops::providers::{canonical_uuid, ProviderInfo};
use allot_core::query::ProviderQuery;
use allot_core::Uuid;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::http::{self, Query};
use crate::microversion::Version;
use crate::params::{is_dashed_uuid, uuid_like};
use crate::policy::authorize;
use crate::schema;
use crate::{schemas, wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/resource_providers", get(list).post(create))
        .route(
            "/resource_providers/{uuid}",
            get(show).put(update).delete(delete),
        )
}

/// The URL of a provider.
pub fn provider_url(uuid: &Uuid) -> String {
    format!("/resource_providers/{uuid}")
}

/// A provider's body at the request's microversion.
pub fn serialize(version: Version, p: &ProviderInfo) -> wire::ProviderBody<'_> {
    let url = provider_url(&p.uuid);
    let mut rels = vec!["inventories", "usages"];
    for (since, rel) in [(1, "aggregates"), (6, "traits"), (11, "allocations")] {
        if version.at_least(since) {
            rels.push(rel);
        }
    }
    let mut links = vec![wire::Link::to_self(url.clone())];
    links.extend(rels.into_iter().map(|rel| wire::Link {
        href: format!("{url}/{rel}"),
        rel,
    }));
    let in_tree = version.at_least(14);
    wire::ProviderBody {
        generation: p.generation,
        links,
        name: &p.name,
        parent_provider_uuid: in_tree.then_some(p.parent_uuid.as_ref()),
        root_provider_uuid: in_tree.then_some(&p.root_uuid),
        uuid: &p.uuid,
    }
}

/// The `{uuid}` of the URL. A segment that is not UTF-8 once decoded names no
/// provider.
fn path_uuid(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(uuid)| uuid)
        .map_err(|_| ApiError::not_found("The resource could not be found."))
}

fn not_found(uuid: &str) -> ApiError {
    ApiError::not_found(format!("No resource provider with uuid {uuid} found"))
}

/// `GET /resource_providers/{uuid}`.
pub async fn show(
    ctx: Ctx,
    State(app): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let uuid = path_uuid(path)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, "placement:resource_providers:show")?;
    let info = {
        let view = app.host.read();
        let provider = view
            .provider_by_uuid_str(&uuid)
            .ok_or_else(|| not_found(&uuid))?;
        view.provider_info(provider)
    };
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    Ok(ctx.cached(response, info.updated_at))
}

#[derive(Deserialize)]
struct CreateBody {
    name: String,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    parent_provider_uuid: Option<String>,
}

/// `POST /resource_providers`: 201 with only a `location` before 1.20, 200 with the
/// provider from 1.20.
pub async fn create(
    ctx: Ctx,
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    http::require_json_content(&headers, &body)?;
    authorize(
        &ctx,
        app.config.policy,
        "placement:resource_providers:create",
    )?;
    let schema = schemas::provider_create(ctx.version.at_least(14));
    let input: CreateBody = http::json_body(&headers, &body, &schema)?;
    // The schema let through only uuids that parse; any spelling is stored in the
    // canonical one.
    let uuid = match input.uuid.as_deref() {
        Some(u) if !u.is_empty() => uuid_like(u)
            .or_else(|| Uuid::try_parse(u).ok())
            .ok_or_else(|| {
                ApiError::bad_request(format!("JSON does not validate: '{u}' is not a 'uuid'"))
            })?,
        _ => Uuid::new_v4(),
    };
    let info = app
        .write(move |view, now| {
            view.create_provider(
                uuid,
                &input.name,
                input.parent_provider_uuid.as_deref(),
                now,
            )
        })
        .await?;
    let url = provider_url(&info.uuid);
    if !ctx.version.at_least(20) {
        return Ok(http::location(http::empty(StatusCode::CREATED), &url));
    }
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    // Placement's object has no timestamps of its own right after the insert: "now".
    Ok(http::location(
        http::cache_headers(response, app.host.now()),
        &url,
    ))
}

/// `PUT /resource_providers/{uuid}`: rename, and from 1.14 set the parent (from 1.37
/// change or remove it).
pub async fn update(
    ctx: Ctx,
    State(app): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let uuid = path_uuid(path)?;
    http::require_json_content(&headers, &body)?;
    authorize(
        &ctx,
        app.config.policy,
        "placement:resource_providers:update",
    )?;
    let target = {
        let view = app.host.read();
        view.provider_by_uuid_str(&uuid)
            .map(|p| p.uuid())
            .ok_or_else(|| not_found(&uuid))?
    };
    let schema = schemas::provider_update(ctx.version.at_least(14));
    let input: Value = http::json_body(&headers, &body, &schema)?;
    let name = input["name"].as_str().unwrap_or_default().to_owned();
    // Absent: keep the parent; null: no parent; a string: that parent.
    let parent: Option<Option<String>> = input
        .get("parent_provider_uuid")
        .map(|p| p.as_str().map(str::to_owned));
    let allow_reparenting = ctx.version.at_least(37);
    let (info, previous_update) = app
        .write(move |view, now| {
            let parent = parent.as_ref().map(|p| p.as_deref());
            view.update_provider(&target, &name, parent, allow_reparenting, now)
        })
        .await?;
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    Ok(ctx.cached(response, previous_update))
}

/// `DELETE /resource_providers/{uuid}`.
pub async fn delete(
    ctx: Ctx,
    State(app): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let uuid = path_uuid(path)?;
    authorize(
        &ctx,
        app.config.policy,
        "placement:resource_providers:delete",
    )?;
    let Some(target) = canonical_uuid(&uuid) else {
        return Err(ApiError::not_found(format!(
            "No resource provider with uuid {uuid} found for delete"
        )));
    };
    app.write(move |view, _| view.delete_provider(&target))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `GET /resource_providers?name=&uuid=&member_of=&resources=&in_tree=&required=`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, "placement:resource_providers:list")?;
    let query = list_query(ctx.version, raw.as_deref())?;
    let (infos, last_modified) = {
        let view = app.host.read();
        let found = view.query_providers(&query)?;
        let last_modified = found.iter().map(|p| p.row.updated_at).max();
        let infos: Vec<ProviderInfo> = found.iter().map(|p| view.provider_info(p)).collect();
        (infos, last_modified)
    };
    let body = wire::ProviderList {
        resource_providers: infos.iter().map(|i| serialize(ctx.version, i)).collect(),
    };
    let response = http::json(StatusCode::OK, &body);
    Ok(ctx.cached(response, last_modified.unwrap_or_else(|| app.host.now())))
}

fn invalid_query(message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("Invalid query string parameters: {message}"))
}

/// Turns the query string of a provider listing into filters, with Placement's
/// checks and messages at each microversion.
fn list_query(version: Version, raw: Option<&str>) -> Result<ProviderQuery, ApiError> {
    check_utf8_query(raw.unwrap_or(""))?;
    let query = &Query::parse(raw);
    // Single-valued parameters take their last value, as Placement's do.
    let mut values = Map::new();
    for (key, value) in &query.0 {
        values.insert(key.clone(), Value::String(value.clone()));
    }
    let values = Value::Object(values);
    schema::validate(&values, &schemas::provider_list_query(version.0)).map_err(invalid_query)?;
    let last = |key: &str| values.get(key).and_then(Value::as_str).map(str::to_owned);
    for key in ["uuid", "in_tree"] {
        if let Some(value) = last(key).filter(|v| !is_dashed_uuid(v)) {
            // The same words as a schema failure, which is what Placement reports.
            let repr = schema::py_repr(&json!(value));
            return Err(invalid_query(format!(
                "{repr} is not a 'uuid'\n\nFailed validating 'format' in \
                 schema['properties']['{key}']:\n    {{'type': 'string', 'format': 'uuid'}}\n\n\
                 On instance['{key}']:\n    {repr}"
            )));
        }
    }

    let mut filters = ProviderQuery::default();
    let member_of = query.all("member_of");
    if !member_of.is_empty() {
        (filters.member_of, filters.forbidden_aggregates) = member_of_filter(version, &member_of)?;
    }
    let required = query.all("required");
    if !required.is_empty() {
        (filters.required_traits, filters.forbidden_traits) = required_filter(version, &required)?;
    }
    filters.name = last("name");
    filters.uuid = last("uuid");
    filters.in_tree = last("in_tree");
    if let Some(resources) = last("resources") {
        filters.resources = resources_filter(&resources)?;
    }
    Ok(filters)
}

/// Refuses a query string whose names or values, once percent-decoded, are not UTF-8
/// (Placement fails to decode them and says so), where the query parser would
/// quietly put replacement characters in.
pub fn check_utf8_query(raw: &str) -> Result<(), ApiError> {
    for part in raw.split('&').flat_map(|pair| pair.splitn(2, '=')) {
        let bytes = percent_decode(part);
        if let Err(e) = std::str::from_utf8(&bytes) {
            let at = e.valid_up_to();
            let byte = bytes[at];
            let why = match e.error_len() {
                None => "unexpected end of data",
                Some(_) if (0x80..0xc2).contains(&byte) || byte > 0xf4 => "invalid start byte",
                Some(_) => "invalid continuation byte",
            };
            return Err(invalid_query(format!(
                "'utf-8' codec can't decode byte 0x{byte:02x} in position {at}: {why}"
            )));
        }
    }
    Ok(())
}

/// `application/x-www-form-urlencoded` decoding to bytes: `+` is a space, `%XX` a byte.
fn percent_decode(s: &str) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// `member_of` values: a uuid, `in:` and a list of uuids (any of them), and from 1.32
/// the forbidden forms `!uuid` and `!in:...`. Repeated parameters (1.24) AND together.
pub fn member_of_filter(
    version: Version,
    values: &[&str],
) -> Result<(Vec<Vec<Uuid>>, Vec<Uuid>), ApiError> {
    if !version.at_least(24) && values.len() > 1 {
        return Err(ApiError::bad_request(
            "Multiple member_of parameters are not supported",
        ));
    }
    let mut required = Vec::new();
    let mut forbidden = Vec::new();
    for value in values {
        if value.contains(',') && !(value.starts_with("in:") || value.starts_with("!in:")) {
            return Err(ApiError::bad_request(format!(
                "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword \
                 using the valid microversion. Got: {value}"
            )));
        }
        let (negated, list) = if let Some(rest) = value.strip_prefix("!in:") {
            (true, rest.split(',').collect::<Vec<_>>())
        } else if let Some(rest) = value.strip_prefix('!') {
            (true, vec![rest])
        } else if let Some(rest) = value.strip_prefix("in:") {
            (false, rest.split(',').collect())
        } else {
            (false, vec![*value])
        };
        let mut uuids = Vec::new();
        for item in list {
            let Some(u) = uuid_like(item) else {
                return Err(invalid_query(format!(
                    "Expected 'member_of' parameter to contain valid UUID(s). Got: {item}"
                )));
            };
            if !uuids.contains(&u) {
                uuids.push(u);
            }
        }
        if !negated {
            required.push(uuids);
        } else if !version.at_least(32) {
            return Err(ApiError::bad_request(
                "Forbidden member_of parameters are not supported in the specified microversion",
            ));
        } else {
            forbidden.extend(
                uuids
                    .into_iter()
                    .filter(|u| !forbidden.contains(u))
                    .collect::<Vec<_>>(),
            );
        }
    }
    Ok((required, forbidden))
}

/// `required` values: trait names separated by commas, from 1.22 `!NAME` for forbidden
/// traits, from 1.39 `in:A,B` for any-of and repeated parameters (AND). Before 1.39
/// only the last parameter counts.
pub fn required_filter(
    version: Version,
    values: &[&str],
) -> Result<(Vec<Vec<String>>, Vec<String>), ApiError> {
    let allow_forbidden = version.at_least(22);
    let allow_any = version.at_least(39);
    let values = if allow_any {
        values
    } else {
        &values[values.len().saturating_sub(1)..]
    };
    let mut required: Vec<Vec<String>> = Vec::new();
    let mut forbidden: Vec<String> = Vec::new();
    for value in values {
        if let Some(rest) = value.strip_prefix("in:") {
            if !allow_any {
                return Err(invalid_query(format!(
                    "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion \
                     1.39. Got: {value}"
                )));
            }
            let mut any: Vec<String> = Vec::new();
            for t in rest.split(',').map(str::trim) {
                if !any.iter().any(|a| a == t) {
                    any.push(t.to_owned());
                }
            }
            if any.iter().any(String::is_empty) {
                return Err(invalid_query(format!(
                    "Expected 'required' parameter value of the form: \
                     in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
                )));
            }
            if any.iter().any(|t| t.starts_with('!')) {
                return Err(invalid_query(format!(
                    "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden \
                     traits. Got: {value}"
                )));
            }
            required.push(any);
            continue;
        }
        let names: Vec<&str> = value.split(',').map(str::trim).collect();
        // Any number of leading '!' mean "forbidden", as in Placement.
        let negated: Vec<&str> = names
            .iter()
            .filter_map(|t| t.strip_prefix('!'))
            .map(|t| t.trim_start_matches('!'))
            .collect();
        if names.iter().chain(negated.iter()).any(|t| t.is_empty()) {
            let form = if allow_forbidden {
                "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
            } else {
                "HW_CPU_X86_VMX,CUSTOM_MAGIC"
            };
            return Err(invalid_query(format!(
                "Expected 'required' parameter value of the form: {form}. Got an empty trait in: \
                 {value}"
            )));
        }
        if !negated.is_empty() && !allow_forbidden {
            return Err(invalid_query(format!(
                "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. \
                 Got: {value}"
            )));
        }
        for name in names.iter().filter(|t| !t.starts_with('!')) {
            required.push(vec![(*name).to_owned()]);
        }
        for name in negated {
            if !forbidden.iter().any(|f| f == name) {
                forbidden.push(name.to_owned());
            }
        }
    }
    Ok((required, forbidden))
}

/// `resources=CLASS:AMOUNT,CLASS:AMOUNT`, amounts at least 1. A class named twice
/// keeps its place and takes the last amount.
pub fn resources_filter(value: &str) -> Result<Vec<(String, u64)>, ApiError> {
    const FORM: &str =
        "Badly formed resources parameter. Expected resources query string parameter \
                        in form: ?resources=VCPU:2,MEMORY_MB:1024.";
    if value.trim().is_empty() {
        return Err(ApiError::bad_request(format!("{FORM} Got: empty string.")));
    }
    let mut out: Vec<(String, u64)> = Vec::new();
    for item in value.split(',') {
        let mut parts = item.split(':');
        let (Some(class), Some(amount), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(ApiError::bad_request(format!("{FORM} Got: {item}.")));
        };
        let Some(amount) = py_int(amount) else {
            return Err(ApiError::bad_request(format!(
                "Requested resource {class} expected positive integer amount. Got: {amount}."
            )));
        };
        if amount < 1 {
            return Err(ApiError::bad_request(format!(
                "Requested resource {class} requires amount >= 1. Got: {amount}."
            )));
        }
        let amount = u64::try_from(amount).unwrap_or(u64::MAX);
        match out.iter_mut().find(|(c, _)| c == class) {
            Some(existing) => existing.1 = amount,
            None => out.push((class.to_owned(), amount)),
        }
    }
    Ok(out)
}

/// An integer as Python's `int()` reads one: surrounding whitespace, an optional
/// sign, decimal digits with single underscores between them. Values beyond `i128`
/// saturate (no inventory is that large anyway).
fn py_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let well_formed = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !well_formed {
        return None;
    }
    let magnitude = digits
        .chars()
        .filter(char::is_ascii_digit)
        .fold(0i128, |acc, d| {
            acc.saturating_mul(10)
                .saturating_add(i128::from(d as u8 - b'0'))
        });
    Some(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version(39);

    fn message(e: ApiError) -> String {
        e.message
    }

    #[test]
    fn member_of() {
        let a = "83a3d69d-8920-48e2-8914-cadfd8fa2f91";
        let b = "99652f11-9f77-46b9-80b7-4b1989be9f8c";
        let ua = Uuid::parse_str(a).unwrap();
        let ub = Uuid::parse_str(b).unwrap();
        let any = format!("in:{a},{b}");
        let not_any = format!("!in:{a},{b}");
        let not_a = format!("!{a}");
        let both = format!("{a},{b}");
        assert_eq!(member_of_filter(V, &[a]).unwrap(), (vec![vec![ua]], vec![]));
        assert_eq!(
            member_of_filter(V, &[&any, b]).unwrap(),
            (vec![vec![ua, ub], vec![ub]], vec![])
        );
        assert_eq!(
            member_of_filter(V, &[&not_any, &not_a]).unwrap(),
            (vec![], vec![ua, ub])
        );
        let refusals: Vec<(Version, Vec<&str>, &str)> = vec![
            (Version(23), vec![a, b], "Multiple member_of parameters are not supported"),
            (V, vec!["not a uuid"], "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: not a uuid"),
            (V, vec!["!(^o^)"], "Expected 'member_of' parameter to contain valid UUID(s). Got: (^o^)"),
            (V, vec!["in:"], "Got: "),
            (V, vec![&both], "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword"),
            (Version(31), vec![&not_a], "Forbidden member_of parameters are not supported in the specified microversion"),
        ];
        for (version, values, wanted) in refusals {
            let got = message(member_of_filter(version, &values).unwrap_err());
            assert!(got.contains(wanted), "{values:?}: {got}");
        }
    }

    #[test]
    fn required() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            required_filter(V, &["A, !B,!!C"]).unwrap(),
            (vec![s(&["A"])], s(&["B", "C"]))
        );
        assert_eq!(
            required_filter(V, &["in:A,B", "C"]).unwrap(),
            (vec![s(&["A", "B"]), s(&["C"])], vec![])
        );
        // Before 1.39 the last parameter wins.
        assert_eq!(
            required_filter(Version(38), &["A", "B"]).unwrap(),
            (vec![s(&["B"])], vec![])
        );
        let refusals: Vec<(Version, &str, &str)> = vec![
            (Version(38), "in:A,B", "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: in:A,B"),
            (V, "in:A,,B", "Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: in:A,,B"),
            (V, "in:A,!B", "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: in:A,!B"),
            (V, "", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: "),
            (V, "A,!", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: A,!"),
            (Version(21), "", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: "),
            (Version(21), "!A", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !A"),
        ];
        for (version, value, wanted) in refusals {
            let got = message(required_filter(version, &[value]).unwrap_err());
            assert_eq!(
                got,
                format!("Invalid query string parameters: {wanted}"),
                "{value}"
            );
        }
    }

    #[test]
    fn resources() {
        assert_eq!(
            resources_filter("VCPU:2,DISK_GB:10,VCPU: 3").unwrap(),
            vec![("VCPU".to_owned(), 3), ("DISK_GB".to_owned(), 10)]
        );
        let refusals = [
            ("", "Got: empty string."),
            ("VCPU", "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: VCPU."),
            ("DISK_GB:500,", "Got: ."),
            ("VCPU:1:2", "Got: VCPU:1:2."),
            ("VCPU:fred", "Requested resource VCPU expected positive integer amount. Got: fred."),
            ("VCPU:-2", "Requested resource VCPU requires amount >= 1. Got: -2."),
            ("VCPU:0", "Requested resource VCPU requires amount >= 1. Got: 0."),
        ];
        for (value, wanted) in refusals {
            let got = message(resources_filter(value).unwrap_err());
            assert!(got.contains(wanted), "{value}: {got}");
        }
        assert_eq!(
            resources_filter("VCPU:99999999999999999999999").unwrap()[0].1,
            u64::MAX
        );
    }

    #[test]
    fn undecodable_queries() {
        assert_eq!(
            percent_decode("a+b%20%e2%98%83%zz%4"),
            b"a b \xe2\x98\x83%zz%4".to_vec()
        );
        assert!(check_utf8_query("name=%e2%98%83&x").is_ok());
        let m = message(check_utf8_query("name=%FF").unwrap_err());
        assert_eq!(m, "Invalid query string parameters: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte");
        assert!(
            message(check_utf8_query("a%e2%98=1").unwrap_err()).contains("unexpected end of data")
        );
        assert!(message(check_utf8_query("a=%e2%28%a1").unwrap_err())
            .contains("byte 0xe2 in position 0: invalid continuation byte"));
    }

    #[test]
    fn query_by_microversion() {
        let q = |v: u16, raw: &str| list_query(Version(v), Some(raw));
        assert!(message(q(17, "required=A").unwrap_err())
            .contains("Additional properties are not allowed ('required' was unexpected)"));
        assert!(message(q(2, "member_of=x").unwrap_err())
            .contains("Additional properties are not allowed"));
        assert!(q(3, "member_of=83a3d69d-8920-48e2-8914-cadfd8fa2f91").is_ok());
        assert!(message(q(39, "spam=eggs").unwrap_err())
            .starts_with("Invalid query string parameters: "));
        assert!(message(q(39, "uuid=spameggs").unwrap_err()).contains("'spameggs' is not a 'uuid'"));
        assert!(
            message(q(39, "in_tree=2290d4af9e6e400b9d651ee01376f71a").unwrap_err())
                .contains("is not a 'uuid'")
        );
        let f = q(
            39,
            "name=a&name=b&resources=VCPU:1&in_tree=2290d4af-9e6e-400b-9d65-1ee01376f71a",
        )
        .unwrap();
        assert_eq!(f.name.as_deref(), Some("b"));
        assert_eq!(f.resources, vec![("VCPU".to_owned(), 1)]);
        assert_eq!(
            f.in_tree.as_deref(),
            Some("2290d4af-9e6e-400b-9d65-1ee01376f71a")
        );
    }

    #[test]
    fn links_by_microversion() {
        let info = ProviderInfo {
            uuid: Uuid::from_u128(1),
            name: "n".into(),
            generation: 3,
            parent_uuid: None,
            root_uuid: Uuid::from_u128(1),
            created_at: 0,
            updated_at: 0,
        };
        for (v, links, keys) in [
            (0, 3, 4),
            (1, 4, 4),
            (6, 5, 4),
            (11, 6, 4),
            (14, 6, 6),
            (39, 6, 6),
        ] {
            let body = serde_json::to_value(serialize(Version(v), &info)).unwrap();
            assert_eq!(body["links"].as_array().unwrap().len(), links, "1.{v}");
            assert_eq!(body.as_object().unwrap().len(), keys, "1.{v}");
        }
        let body = serde_json::to_value(serialize(Version(14), &info)).unwrap();
        assert_eq!(body["parent_provider_uuid"], Value::Null);
        assert_eq!(
            body["root_provider_uuid"],
            json!(Uuid::from_u128(1).to_string())
        );
    }
}
