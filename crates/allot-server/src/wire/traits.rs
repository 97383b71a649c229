//! `/traits` (1.6). `GET /traits/{name}` has no body (204).

use serde::Serialize;

/// `GET /traits`: trait names, standard ones first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraitList<'a> {
    /// The names that pass the filters.
    pub traits: Vec<&'a str>,
}
