//! The query string of `GET /traits` (1.6): which trait names to list, by their
//! names and by whether some provider has them.

use crate::error::ApiError;
use crate::http::Query;

/// The filters of `GET /traits`, read and checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TraitsQuery {
    /// `name=in:A,B` or `name=startswith:P`.
    pub name: Option<NameFilter>,
    /// `associated=true`: only the traits some provider has; `false`: only those no
    /// provider has.
    pub associated: Option<bool>,
}

/// The two forms of `name`.
#[derive(Debug, PartialEq, Eq)]
pub enum NameFilter {
    /// `in:A,B`: these names.
    In(Vec<String>),
    /// `startswith:P`: the names that start with this.
    Prefix(String),
}

impl NameFilter {
    /// Whether the filter lets `name` through.
    pub fn admits(&self, name: &str) -> bool {
        match self {
            NameFilter::In(list) => list.iter().any(|x| x == name),
            NameFilter::Prefix(p) => name.starts_with(p.as_str()),
        }
    }
}

impl TraitsQuery {
    /// Reads the query string: `name` and `associated` (each its last value), and no
    /// other parameter. Placement reads this listing's query without refusing one
    /// that is not UTF-8.
    pub fn read(raw: Option<&str>) -> Result<Self, ApiError> {
        let query = Query::parse(raw);
        query.only(&["name", "associated"])?;
        Ok(TraitsQuery {
            name: query.last("name").map(name_filter).transpose()?.flatten(),
            associated: query.last("associated").map(associated).transpose()?,
        })
    }
}

/// `name`: `in:` a list or `startswith:` a prefix. Placement accepts other operators
/// and ignores them (None); text without one is refused.
fn name_filter(q: &str) -> Result<Option<NameFilter>, ApiError> {
    match q.split_once(':') {
        Some(("in", names)) => Ok(Some(NameFilter::In(
            names.split(',').map(str::to_owned).collect(),
        ))),
        Some(("startswith", prefix)) => Ok(Some(NameFilter::Prefix(prefix.to_owned()))),
        Some(_) => Ok(None),
        None => Err(ApiError::bad_request(format!(
            "Badly formatted name parameter. Expected name query string parameter in form: \
             ?name=[in|startswith]:[name1,name2|prefix]. Got: \"{q}\""
        ))),
    }
}

/// `associated`: `true` or `false`, in any case.
fn associated(a: &str) -> Result<bool, ApiError> {
    if a.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if a.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(ApiError::bad_request(
            "The query parameter \"associated\" only accepts \"true\" or \"false\"",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters() {
        let q = TraitsQuery::read(Some("name=in:A,B&associated=TRUE")).unwrap();
        assert_eq!(q.name, Some(NameFilter::In(vec!["A".into(), "B".into()])));
        assert_eq!(q.associated, Some(true));
        let q = TraitsQuery::read(Some("name=startswith:CUSTOM_&name=other:x")).unwrap();
        assert_eq!(q, TraitsQuery::default());
        assert!(NameFilter::Prefix("CUSTOM_".into()).admits("CUSTOM_A"));
        assert!(!NameFilter::In(vec!["A".into()]).admits("B"));
        assert_eq!(TraitsQuery::read(None).unwrap(), TraitsQuery::default());
    }

    #[test]
    fn refusals() {
        let e = TraitsQuery::read(Some("name=A")).unwrap_err();
        assert!(e.message.starts_with("Badly formatted name parameter."));
        let e = TraitsQuery::read(Some("associated=yes")).unwrap_err();
        assert!(e.message.contains("only accepts"));
        let e = TraitsQuery::read(Some("x=1")).unwrap_err();
        assert!(e.message.contains("'x' was unexpected"));
    }
}
