//! `projects`, `users`, `consumer_types` and `consumers`: the consumers' owners and
//! types first, numbered by the database, then the consumers by those ids.

use std::collections::BTreeSet;

use allot_store::dump::{Dump, DumpConsumer};

use super::sql::{id_in, ids, insert, text};
use crate::conn::Conn;

/// Writes the consumers, with their projects, users and types.
pub(super) async fn write(conn: &mut Conn, dump: &Dump) -> anyhow::Result<()> {
    let owners = |pick: fn(&DumpConsumer) -> Option<&str>| {
        dump.consumers
            .iter()
            .filter_map(pick)
            .collect::<BTreeSet<&str>>()
            .into_iter()
            .map(|s| Ok(vec![text(s)?]))
            .collect::<anyhow::Result<Vec<_>>>()
    };
    insert(
        conn,
        "projects",
        "external_id",
        &owners(|c| Some(&c.project_id))?,
    )
    .await?;
    insert(conn, "users", "external_id", &owners(|c| Some(&c.user_id))?).await?;
    insert(
        conn,
        "consumer_types",
        "name",
        &owners(|c| c.consumer_type.as_deref())?,
    )
    .await?;
    let projects = ids(conn, "SELECT external_id, id FROM projects").await?;
    let users = ids(conn, "SELECT external_id, id FROM users").await?;
    let types = ids(conn, "SELECT name, id FROM consumer_types").await?;
    let mut consumers = Vec::new();
    for c in &dump.consumers {
        consumers.push(vec![
            text(&c.uuid.to_string())?,
            id_in(&projects, &c.project_id, "project")?.to_string(),
            id_in(&users, &c.user_id, "user")?.to_string(),
            c.generation.to_string(),
            c.consumer_type
                .as_ref()
                .map_or(Ok("NULL".to_owned()), |t| {
                    id_in(&types, t, "consumer type").map(|id| id.to_string())
                })?,
            conn.datetime_of(c.created_at),
            conn.datetime_of(c.updated_at),
        ]);
    }
    insert(
        conn,
        "consumers",
        "uuid, project_id, user_id, generation, consumer_type_id, created_at, updated_at",
        &consumers,
    )
    .await
}
