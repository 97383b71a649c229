//! `inventories`: each provider's inventories, their class by the id it was written
//! under, stamped with the provider's last change.

use allot_store::dump::Dump;
use anyhow::anyhow;

use super::classes::ClassIds;
use super::providers::ProviderIds;
use super::sql::insert;
use crate::conn::Conn;

/// Writes every provider's inventories.
pub(super) async fn write(
    conn: &mut Conn,
    dump: &Dump,
    provider_ids: &ProviderIds,
    class_ids: &ClassIds<'_>,
) -> anyhow::Result<()> {
    let mut inventories = Vec::new();
    for p in &dump.providers {
        let id = provider_ids.id(&p.uuid)?;
        for inv in &p.inventories {
            let ratio: f64 = inv.allocation_ratio.parse().map_err(|_| {
                anyhow!(
                    "provider {}: allocation_ratio {:?}",
                    p.uuid,
                    inv.allocation_ratio
                )
            })?;
            inventories.push(vec![
                id.to_string(),
                class_ids.id(&inv.resource_class)?.to_string(),
                inv.total.to_string(),
                inv.reserved.to_string(),
                inv.min_unit.to_string(),
                inv.max_unit.to_string(),
                inv.step_size.to_string(),
                format!("{ratio:?}"),
                conn.datetime_of(p.updated_at),
            ]);
        }
    }
    insert(
        conn,
        "inventories",
        "resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, \
         step_size, allocation_ratio, created_at",
        &inventories,
    )
    .await
}
