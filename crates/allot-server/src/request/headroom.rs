//! The query string of `GET /headroom` (allot's extension, issue 24): the candidate
//! query's parameters, read as `GET /allocation_candidates` reads them at 1.39, and
//! `group_by`.

use allot_core::candidates::CandidateQuery;
use allot_core::server_groups::Scope;
use allot_core::Timestamp;

use crate::error::ApiError;
use crate::http::Query;
use crate::request::candidates;

/// The question: the shape, and the breakdown.
#[derive(Debug)]
pub struct HeadroomQuery {
    /// The shape of one instance.
    pub query: CandidateQuery,
    /// The breakdown, if asked: by the domains of the root each instance would land
    /// on, as server groups' rules key them.
    pub group_by: Option<Scope>,
}

/// Reads the query string. `limit`, `sort` and `prefer` are accepted (a scheduler's
/// query can be pasted as it is) and change nothing: every instance that fits counts.
pub fn parse(raw: Option<&str>, now: Timestamp) -> Result<HeadroomQuery, ApiError> {
    let (group_by, rest) = take_param(raw.unwrap_or(""), "group_by")?;
    let group_by = group_by
        .map(|value| {
            Scope::parse(&value).ok_or_else(|| {
                ApiError::query_bad_value(format!(
                    "Invalid group_by {value:?}: root, aggregate or trait:PREFIX (a trait \
                     name's beginning, e.g. trait:CUSTOM_RACK_)."
                ))
            })
        })
        .transpose()?;
    let query = candidates::parse(crate::microversion::MAX, Some(&rest), now, 0)?;
    Ok(HeadroomQuery { query, group_by })
}

/// `raw` (a query string) without its parameter `key`, and that parameter's value
/// (percent-decoded), if it has one; given twice is a 400. For allot's own
/// parameters of `GET /headroom` (`group_by`, `shape`), taken out before the rest is
/// read as a candidate query.
pub fn take_param(raw: &str, key: &str) -> Result<(Option<String>, String), ApiError> {
    let mut value = None;
    let mut rest: Vec<&str> = Vec::new();
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        if pair.split('=').next() != Some(key) {
            rest.push(pair);
            continue;
        }
        if value.is_some() {
            return Err(ApiError::query_duplicate_key(format!(
                "Query parameter '{key}' may be specified only once."
            )));
        }
        let values = Query::parse(Some(pair));
        value = Some(values.all(key).first().copied().unwrap_or("").to_owned());
    }
    Ok((value, rest.join("&")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_by_and_the_shape() {
        let q = parse(
            Some("resources=VCPU:2&group_by=trait:CUSTOM_RACK_&limit=3"),
            5,
        )
        .unwrap();
        assert_eq!(q.group_by, Some(Scope::TraitPrefix("CUSTOM_RACK_".into())));
        assert_eq!(q.query.groups[0].resources.len(), 1);
        assert_eq!(q.query.now, 5);
        assert_eq!(
            parse(Some("resources=VCPU:1&group_by=root"), 0)
                .unwrap()
                .group_by,
            Some(Scope::Root)
        );
        assert_eq!(parse(Some("resources=VCPU:1"), 0).unwrap().group_by, None);
        for bad in ["group_by=rack", "group_by=trait:", "group_by=trait:lower"] {
            let e = parse(Some(&format!("resources=VCPU:1&{bad}")), 0).unwrap_err();
            assert!(
                e.message.contains("Invalid group_by"),
                "{bad}: {}",
                e.message
            );
        }
        let e = parse(Some("resources=VCPU:1&group_by=root&group_by=aggregate"), 0).unwrap_err();
        assert!(e.message.contains("only once"), "{}", e.message);
        // The shape is checked as the candidate query is.
        let e = parse(Some("resources=VCPU:x"), 0).unwrap_err();
        assert_eq!(e.status, 400);
    }
}
