//! `resource_classes`: the custom classes go into the dump (the standard ones are
//! names both sides know), and every class's id is kept to name the class of an
//! inventory or allocation row.

use allot_store::dump::DumpClass;

use super::cells::{Cells, Names};
use super::Table;
use crate::conn::Rows;

/// Reads the table.
pub(super) async fn select(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    let sql = format!(
        "SELECT id, name, {}, {} FROM resource_classes",
        table.epoch("created_at"),
        table.epoch("updated_at")
    );
    table.read("resource_classes", &sql).await
}

/// The custom classes, by name, and every class's name by its id.
pub(super) fn decode(rows: &Rows) -> anyhow::Result<(Vec<DumpClass>, Names)> {
    let mut class_names = Names::new();
    let mut resource_classes = Vec::new();
    for row in rows {
        let mut r = Cells::new(row, "resource_classes");
        let (id, name) = (r.int()?, r.text()?);
        let (created_at, updated_at) = (r.opt_int()?.unwrap_or(0), r.opt_int()?);
        if name.starts_with("CUSTOM_") {
            resource_classes.push(DumpClass {
                name: name.clone(),
                created_at,
                updated_at: updated_at.unwrap_or(created_at),
                metadata: None,
            });
        }
        class_names.insert(id, name);
    }
    resource_classes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((resource_classes, class_names))
}
