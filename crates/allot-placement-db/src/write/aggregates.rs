//! `placement_aggregates` and `resource_provider_aggregates`: every aggregate a
//! provider is in, numbered by the database, then each provider's aggregates by
//! those ids.

use std::collections::BTreeSet;

use allot_store::dump::Dump;
use uuid::Uuid;

use super::providers::ProviderIds;
use super::sql::{id_in, ids, insert, text};
use crate::conn::Conn;

/// Writes the aggregates and each provider's membership.
pub(super) async fn write(
    conn: &mut Conn,
    dump: &Dump,
    provider_ids: &ProviderIds,
) -> anyhow::Result<()> {
    let aggregates: BTreeSet<Uuid> = dump
        .providers
        .iter()
        .flat_map(|p| p.aggregates.iter().copied())
        .collect();
    let rows = aggregates
        .iter()
        .map(|a| Ok(vec![text(&a.to_string())?]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    insert(conn, "placement_aggregates", "uuid", &rows).await?;
    let aggregate_ids = ids(conn, "SELECT uuid, id FROM placement_aggregates").await?;
    let mut rows = Vec::new();
    for p in &dump.providers {
        for a in &p.aggregates {
            rows.push(vec![
                provider_ids.id(&p.uuid)?.to_string(),
                id_in(&aggregate_ids, &a.to_string(), "aggregate")?.to_string(),
            ]);
        }
    }
    insert(
        conn,
        "resource_provider_aggregates",
        "resource_provider_id, aggregate_id",
        &rows,
    )
    .await
}
