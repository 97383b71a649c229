//! The schema revisions this build understands (`alembic_version`, the table
//! Placement's `placement-manage db sync` keeps its alembic history's head in), and
//! the check that both directions make before they read or write anything else.

use anyhow::{bail, Context};

use crate::conn::Conn;

/// Placement 16.0.0's schema revision (the head of its alembic history).
pub const HEAD_REVISION: &str = "a082b8bb98d0";

/// The revisions this build reads, newest first, and whether the schema has the
/// `consumer_types` table (added by 422ece571366; older consumers have no type).
/// The revisions between the initial schema and the head change indexes and add
/// checks, not the tables read here.
pub const READABLE_REVISIONS: &[(&str, bool)] = &[
    (HEAD_REVISION, true),
    ("422ece571366", true),
    ("b5c396305c25", false),
    ("611cd6dffd7b", false),
    ("b4ed3a175331", false),
];

impl Conn {
    /// The schema revision, checked against those this build understands; returns
    /// whether the schema has consumer types.
    pub(crate) async fn revision(&mut self) -> anyhow::Result<(String, bool)> {
        let rows = self
            .rows("SELECT version_num FROM alembic_version")
            .await
            .context(
                "reading alembic_version (is this a Placement database, made by \
             `placement-manage db sync`?)",
            )?;
        let found: Vec<String> = rows.into_iter().flatten().flatten().collect();
        let supported = READABLE_REVISIONS
            .iter()
            .map(|(r, _)| *r)
            .collect::<Vec<_>>()
            .join(", ");
        match found.as_slice() {
            [one] => match READABLE_REVISIONS.iter().find(|(r, _)| r == one) {
                Some(&(_, types)) => Ok((one.clone(), types)),
                None => bail!(
                    "unsupported Placement schema revision {one}: this build reads {supported} \
                     (Placement 16.0.0 is {HEAD_REVISION})"
                ),
            },
            [] => bail!(
                "alembic_version is empty: the Placement schema was never made \
                 (run `placement-manage db sync`); this build reads {supported}"
            ),
            many => bail!(
                "alembic_version holds several revisions ({}); this build reads one of {supported}",
                many.join(", ")
            ),
        }
    }
}
