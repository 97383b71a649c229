//! `inventories`: each provider's inventories, their class named, their counts
//! checked not negative, and the allocation ratio written as the dump writes a
//! number (Rust's shortest round-trip form).

use allot_store::dump::DumpInventory;
use anyhow::anyhow;

use super::cells::{named, non_negative, Cells, Names};
use super::providers::Providers;
use super::Table;
use crate::conn::Rows;

/// Reads the table.
pub(super) async fn select(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    table
        .read(
            "inventories",
            "SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, \
             max_unit, step_size, allocation_ratio FROM inventories",
        )
        .await
}

/// Gives each provider its inventories.
pub(super) fn decode(
    rows: &Rows,
    class_names: &Names,
    providers: &mut Providers,
) -> anyhow::Result<()> {
    for row in rows {
        let mut r = Cells::new(row, "inventories");
        let p = providers.index(r.int()?, "inventories")?;
        let class = named(class_names, r.int()?, "inventories", "resource class")?;
        let mut count = |what: &str| -> anyhow::Result<u64> {
            non_negative(r.int()?, &format!("inventories.{what}"))
        };
        let (total, reserved, min_unit) = (count("total")?, count("reserved")?, count("min_unit")?);
        let (max_unit, step_size) = (count("max_unit")?, count("step_size")?);
        let ratio_text = r.text()?;
        let ratio: f64 = ratio_text
            .parse()
            .map_err(|_| anyhow!("inventories: allocation_ratio {ratio_text:?} is no number"))?;
        providers.list[p].inventories.push(DumpInventory {
            resource_class: class,
            total,
            reserved,
            min_unit,
            max_unit,
            step_size,
            allocation_ratio: format!("{ratio:?}"),
        });
    }
    Ok(())
}
