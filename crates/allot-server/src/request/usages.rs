//! The query string of `GET /usages` (1.9; `consumer_type` from 1.38).

use allot_core::usage::TypeFilter;

use super::QueryParams;
use crate::error::ApiError;
use crate::params::invalid_query;
use crate::schemas;

/// The parameters of `GET /usages`, validated.
#[derive(Debug, PartialEq, Eq)]
pub struct TotalsQuery {
    /// The project asked about.
    pub project_id: String,
    /// The user within it, if any.
    pub user_id: Option<String>,
    /// How the answer groups consumers by type, and which it counts.
    pub consumer_types: ConsumerTypes,
}

/// How `GET /usages` treats consumer types: the microversion and `consumer_type` read
/// once, into what they ask for.
#[derive(Debug, PartialEq, Eq)]
pub enum ConsumerTypes {
    /// Before 1.38: one set of sums over every consumer, types aside.
    Ungrouped,
    /// From 1.38 without `consumer_type`: one group per type (consumers without one
    /// under `unknown`).
    EachType,
    /// `consumer_type=all`: every consumer, in one group.
    All,
    /// `consumer_type=unknown`: only consumers without a type.
    Untyped,
    /// Any other `consumer_type`: only consumers of this type.
    Named(String),
}

impl ConsumerTypes {
    /// What the microversion and the `consumer_type` parameter ask for; the core's
    /// [`TypeFilter::from_param`] says which values are the keywords.
    fn read(minor: u16, param: Option<&str>) -> Self {
        if minor < 38 {
            return ConsumerTypes::Ungrouped;
        }
        match TypeFilter::from_param(param) {
            TypeFilter::EachType => ConsumerTypes::EachType,
            TypeFilter::All => ConsumerTypes::All,
            TypeFilter::Unknown => ConsumerTypes::Untyped,
            TypeFilter::Named(name) => ConsumerTypes::Named(name.to_owned()),
        }
    }

    /// The core's filter for the grouped answer (None: the ungrouped one).
    pub fn filter(&self) -> Option<TypeFilter<'_>> {
        match self {
            ConsumerTypes::Ungrouped => None,
            ConsumerTypes::EachType => Some(TypeFilter::EachType),
            ConsumerTypes::All => Some(TypeFilter::All),
            ConsumerTypes::Untyped => Some(TypeFilter::Unknown),
            ConsumerTypes::Named(name) => Some(TypeFilter::Named(name)),
        }
    }
}

impl TotalsQuery {
    /// Checks the decoded query string of `GET /usages` at `1.minor` against
    /// Placement's schema (the handler decodes it first: policy looks at the project
    /// asked about before the query is checked). A parameter given several times
    /// counts with its last value, as in Placement.
    pub fn read(minor: u16, query: &QueryParams) -> Result<Self, ApiError> {
        query.check(&schemas::usages_query(minor))?;
        Ok(TotalsQuery {
            project_id: query
                .owned("project_id")
                .ok_or_else(|| invalid_query("'project_id' is a required property"))?,
            user_id: query.owned("user_id"),
            consumer_types: ConsumerTypes::read(minor, query.text("consumer_type")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::require_utf8_query;

    fn parse(minor: u16, raw: &str) -> Result<TotalsQuery, String> {
        TotalsQuery::read(minor, &QueryParams::parse(Some(raw)).unwrap()).map_err(|e| {
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            e.message
        })
    }

    #[test]
    fn query_validation_by_microversion() {
        let long = "x".repeat(256);
        // (minor, query, the error's start, or None if accepted)
        let cases: Vec<(u16, String, Option<&str>)> = vec![
            (9, "project_id=p".into(), None),
            (9, "project_id=p&user_id=u".into(), None),
            (9, "".into(), Some("'project_id' is a required property")),
            (
                9,
                "user_id=u".into(),
                Some("'project_id' is a required property"),
            ),
            (9, "project_id=".into(), Some("'' should be non-empty")),
            (
                9,
                "project_id=p&user_id=".into(),
                Some("'' should be non-empty"),
            ),
            (9, format!("project_id={long}"), Some("'xxxx")),
            (9, format!("project_id=p&user_id={long}"), Some("'xxxx")),
            (
                9,
                "project_id=p&dummy=1".into(),
                Some("Additional properties are not allowed ('dummy' was unexpected)"),
            ),
            // consumer_type only from 1.38.
            (
                37,
                "project_id=p&consumer_type=PONY".into(),
                Some("Additional properties are not allowed ('consumer_type' was unexpected)"),
            ),
            (38, "project_id=p&consumer_type=PONY".into(), None),
            (38, "project_id=p&consumer_type=all".into(), None),
            (38, "project_id=p&consumer_type=unknown".into(), None),
            (38, "project_id=p&consumer_type=ALL".into(), None),
            (
                38,
                "project_id=p&consumer_type=pony".into(),
                Some("'pony' does not match"),
            ),
            (
                38,
                "project_id=p&consumer_type=".into(),
                Some("'' does not match"),
            ),
        ];
        for (minor, raw, wanted) in cases {
            let got = parse(minor, &raw);
            match wanted {
                None => assert!(got.is_ok(), "{minor} {raw}: {got:?}"),
                Some(start) => {
                    let message = got.expect_err(&raw);
                    let prefix = format!("Invalid query string parameters: {start}");
                    assert!(message.starts_with(&prefix), "{minor} {raw}: {message}");
                }
            }
        }
        let long_message = parse(9, &format!("project_id={long}")).unwrap_err();
        assert!(long_message.contains("Failed validating 'maxLength'"));
    }

    #[test]
    fn undecodable_queries_are_refused() {
        let message = |raw: &str| require_utf8_query(raw).map_err(|e| e.message);
        assert!(message("project_id=p&user_id=%C3%A9+x").is_ok());
        assert_eq!(
            message("project_id=%ff").unwrap_err(),
            "Invalid query string parameters: 'utf-8' codec can't decode byte 0xff in \
             position 0: invalid start byte"
        );
        assert_eq!(
            message("project_id=ab%C3").unwrap_err(),
            "Invalid query string parameters: 'utf-8' codec can't decode byte 0xc3 in \
             position 2: unexpected end of data"
        );
        // A lone '%' is taken as it is.
        assert!(message("project_id=100%").is_ok());
    }

    #[test]
    fn query_values() {
        assert_eq!(
            parse(9, "project_id=a&project_id=b&user_id=u").unwrap(),
            TotalsQuery {
                project_id: "b".into(),
                user_id: Some("u".into()),
                consumer_types: ConsumerTypes::Ungrouped,
            }
        );
        let types = |raw: &str| parse(38, raw).unwrap().consumer_types;
        assert_eq!(types("project_id=a"), ConsumerTypes::EachType);
        assert_eq!(types("project_id=a&consumer_type=all"), ConsumerTypes::All);
        assert_eq!(
            types("project_id=a&consumer_type=unknown"),
            ConsumerTypes::Untyped
        );
        assert_eq!(
            types("project_id=a&consumer_type=ALL"),
            ConsumerTypes::Named("ALL".into())
        );
        assert_eq!(
            parse(37, "project_id=a").unwrap().consumer_types,
            ConsumerTypes::Ungrouped
        );
    }
}
