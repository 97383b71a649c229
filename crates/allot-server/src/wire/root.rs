//! `GET /`: version discovery.

use serde::Serialize;

use super::Link;

/// The version document: the one API version this service speaks and its
/// microversion range. The same at every microversion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Versions {
    /// Always exactly one.
    pub versions: [ApiVersion; 1],
}

/// One API version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiVersion {
    /// `v` and the lowest microversion (`v1.0`).
    pub id: String,
    /// Its `self` link.
    pub links: Vec<Link>,
    /// The highest microversion, `1.39`.
    pub max_version: String,
    /// The lowest microversion, `1.0`.
    pub min_version: String,
    /// Always `CURRENT`.
    pub status: &'static str,
}
