//! `projects`, `users`, `consumer_types` and `consumers`: each consumer with its
//! project's and user's external ids, its type's name and its generation. A consumer
//! whose project or user row is gone is an "incomplete consumer", given the
//! placeholders Placement's own online migration gives it.

use std::collections::BTreeMap;

use allot_store::dump::DumpConsumer;
use uuid::Uuid;

use super::cells::{named, non_negative, Cells, Names};
use super::{Placeholders, Table};
use crate::conn::Rows;

/// Reads `projects`.
pub(super) async fn select_projects(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    table
        .read("projects", "SELECT id, external_id FROM projects")
        .await
}

/// Reads `users`.
pub(super) async fn select_users(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    table
        .read("users", "SELECT id, external_id FROM users")
        .await
}

/// Reads `consumer_types`, where the schema has it (the bar steps past it where not).
pub(super) async fn select_types(table: &mut Table<'_>, has_types: bool) -> anyhow::Result<Rows> {
    if has_types {
        table
            .read("consumer_types", "SELECT id, name FROM consumer_types")
            .await
    } else {
        table.bar.inc(1);
        Ok(Vec::new())
    }
}

/// Reads `consumers` (their type NULL where the schema has no consumer types).
pub(super) async fn select(table: &mut Table<'_>, has_types: bool) -> anyhow::Result<Rows> {
    let type_column = if has_types {
        "consumer_type_id"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT uuid, project_id, user_id, generation, {type_column}, {}, {} FROM consumers",
        table.epoch("created_at"),
        table.epoch("updated_at")
    );
    table.read("consumers", &sql).await
}

/// What a consumer row names by id: its project, user and type.
pub(super) struct ConsumerNames {
    projects: Names,
    users: Names,
    types: Names,
}

impl ConsumerNames {
    /// The external ids of projects and users, and the names of consumer types.
    pub(super) fn decode(
        project_rows: &Rows,
        user_rows: &Rows,
        type_rows: &Rows,
    ) -> anyhow::Result<ConsumerNames> {
        Ok(ConsumerNames {
            projects: external(project_rows, "projects")?,
            users: external(user_rows, "users")?,
            types: external(type_rows, "consumer_types")?,
        })
    }
}

/// The rows of a table of `id, name`, as a map.
fn external(rows: &Rows, table: &str) -> anyhow::Result<Names> {
    rows.iter()
        .map(|row| {
            let mut r = Cells::new(row, table);
            Ok((r.int()?, r.text()?))
        })
        .collect()
}

/// The consumers by uuid, with no allocations yet, and how many of them were given
/// the placeholders.
pub(super) fn decode(
    rows: &Rows,
    names: &ConsumerNames,
    placeholders: &Placeholders,
) -> anyhow::Result<(BTreeMap<Uuid, DumpConsumer>, usize)> {
    let mut consumers: BTreeMap<Uuid, DumpConsumer> = BTreeMap::new();
    let mut incomplete = 0;
    for row in rows {
        let mut r = Cells::new(row, "consumers");
        let uuid = r.uuid()?;
        let (project, user) = (r.int()?, r.int()?);
        let generation = non_negative(r.int()?, "consumers.generation")?;
        let consumer_type = match r.opt_int()? {
            Some(id) => Some(named(&names.types, id, "consumers", "consumer type")?),
            None => None,
        };
        let (created_at, updated_at) = (r.opt_int()?.unwrap_or(0), r.opt_int()?);
        let (project_id, user_id) = match (names.projects.get(&project), names.users.get(&user)) {
            (Some(p), Some(u)) => (p.clone(), u.clone()),
            _ => {
                incomplete += 1;
                (
                    placeholders.project_id.clone(),
                    placeholders.user_id.clone(),
                )
            }
        };
        consumers.insert(
            uuid,
            DumpConsumer {
                uuid,
                project_id,
                user_id,
                consumer_type,
                generation,
                created_at,
                updated_at: updated_at.unwrap_or(created_at),
                allocations: Vec::new(),
            },
        );
    }
    Ok((consumers, incomplete))
}
