//! `placement_aggregates` and `resource_provider_aggregates`: each provider gets the
//! uuids of its aggregates (Placement numbers aggregates; the dump names them).

use std::collections::HashMap;

use anyhow::anyhow;
use uuid::Uuid;

use super::cells::Cells;
use super::providers::Providers;
use super::Table;
use crate::conn::Rows;

/// Reads `placement_aggregates`.
pub(super) async fn select(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    table
        .read(
            "placement_aggregates",
            "SELECT id, uuid FROM placement_aggregates",
        )
        .await
}

/// Reads `resource_provider_aggregates`.
pub(super) async fn select_provider_aggregates(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    table
        .read(
            "resource_provider_aggregates",
            "SELECT resource_provider_id, aggregate_id FROM resource_provider_aggregates",
        )
        .await
}

/// Gives each provider its aggregates' uuids.
pub(super) fn decode(
    aggregate_rows: &Rows,
    provider_aggregate_rows: &Rows,
    providers: &mut Providers,
) -> anyhow::Result<()> {
    let mut aggregates: HashMap<i64, Uuid> = HashMap::new();
    for row in aggregate_rows {
        let mut r = Cells::new(row, "placement_aggregates");
        aggregates.insert(r.int()?, r.uuid()?);
    }
    for row in provider_aggregate_rows {
        let mut r = Cells::new(row, "resource_provider_aggregates");
        let p = providers.index(r.int()?, "resource_provider_aggregates")?;
        let id = r.int()?;
        let uuid = aggregates.get(&id).copied().ok_or_else(|| {
            anyhow!(
                "resource_provider_aggregates: aggregate id {id} is not in placement_aggregates"
            )
        })?;
        providers.list[p].aggregates.push(uuid);
    }
    Ok(())
}
