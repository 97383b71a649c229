//! `resource_classes`: the standard classes Placement has not synced yet, under
//! their os-resource-classes index as id, then the dump's custom ones from 10000 on
//! (where Placement numbers them from).

use std::collections::{BTreeSet, HashMap};

use allot_core::standard;
use allot_store::dump::Dump;
use anyhow::anyhow;

use super::sql::{insert, text};
use crate::conn::Conn;

/// Where custom resource class ids start in Placement.
const FIRST_CUSTOM_CLASS_ID: i64 = 10000;

/// The id each resource class was written under, by name.
pub(super) struct ClassIds<'a>(HashMap<&'a str, i64>);

impl ClassIds<'_> {
    /// The id of the class `name`, standard or custom.
    pub(super) fn id(&self, name: &str) -> anyhow::Result<i64> {
        self.0
            .get(name)
            .copied()
            .ok_or_else(|| anyhow!("resource class {name} is neither standard nor custom"))
    }
}

/// Writes the classes; `now` is the time standard rows are stamped with.
pub(super) async fn write<'a>(
    conn: &mut Conn,
    dump: &'a Dump,
    now: &str,
) -> anyhow::Result<ClassIds<'a>> {
    let present: BTreeSet<String> = conn
        .rows("SELECT name FROM resource_classes")
        .await?
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect();
    let mut class_ids: HashMap<&str, i64> = HashMap::new();
    let mut rows = Vec::new();
    for (i, name) in standard::RESOURCE_CLASSES.iter().enumerate() {
        class_ids.insert(name, i as i64);
        if !present.contains(*name) {
            rows.push(vec![
                (i as i64).to_string(),
                text(name)?,
                now.to_owned(),
                "NULL".into(),
            ]);
        }
    }
    for (i, c) in dump.resource_classes.iter().enumerate() {
        let id = FIRST_CUSTOM_CLASS_ID + i as i64;
        class_ids.insert(&c.name, id);
        rows.push(vec![
            id.to_string(),
            text(&c.name)?,
            conn.datetime_of(c.created_at),
            conn.datetime_of(c.updated_at),
        ]);
    }
    insert(
        conn,
        "resource_classes",
        "id, name, created_at, updated_at",
        &rows,
    )
    .await?;
    Ok(ClassIds(class_ids))
}
