//! `allocations`: each consumer's allocations, their provider and class named. An
//! allocation whose consumer has no row is an "incomplete consumer"'s, which is made
//! up with the placeholders Placement's own online migration gives it, generation 0.

use std::collections::BTreeMap;

use allot_store::dump::{DumpAllocation, DumpConsumer};
use uuid::Uuid;

use super::cells::{named, non_negative, Cells, Names};
use super::providers::Providers;
use super::{Placeholders, Table};
use crate::conn::Rows;

/// Reads the table.
pub(super) async fn select(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    let sql = format!(
        "SELECT consumer_id, resource_provider_id, resource_class_id, used, {} FROM allocations",
        table.epoch("created_at")
    );
    table.read("allocations", &sql).await
}

/// The consumers in uuid order, each with its allocations (the consumers made up
/// counted in `incomplete`).
pub(super) fn decode(
    rows: &Rows,
    providers: &Providers,
    class_names: &Names,
    placeholders: &Placeholders,
    mut consumers: BTreeMap<Uuid, DumpConsumer>,
    incomplete: &mut usize,
) -> anyhow::Result<Vec<DumpConsumer>> {
    for row in rows {
        let mut r = Cells::new(row, "allocations");
        let consumer = r.uuid()?;
        let p = providers.index(r.int()?, "allocations")?;
        let class = named(class_names, r.int()?, "allocations", "resource class")?;
        let used = non_negative(r.int()?, "allocations.used")?;
        let created_at = r.opt_int()?.unwrap_or(0);
        let entry = consumers.entry(consumer).or_insert_with(|| {
            *incomplete += 1;
            DumpConsumer {
                uuid: consumer,
                project_id: placeholders.project_id.clone(),
                user_id: placeholders.user_id.clone(),
                consumer_type: None,
                generation: 0,
                created_at,
                updated_at: created_at,
                allocations: Vec::new(),
            }
        });
        entry.allocations.push(DumpAllocation {
            provider: providers.list[p].uuid,
            resource_class: class,
            used,
        });
    }
    let mut consumers: Vec<DumpConsumer> = consumers.into_values().collect();
    for c in &mut consumers {
        c.allocations
            .sort_by(|a, b| (a.provider, &a.resource_class).cmp(&(b.provider, &b.resource_class)));
    }
    Ok(consumers)
}
