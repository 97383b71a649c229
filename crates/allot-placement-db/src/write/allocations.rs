//! `allocations`: each consumer's allocations, by the ids their provider and class
//! were written under, stamped with the consumer's last change.

use allot_store::dump::Dump;

use super::classes::ClassIds;
use super::providers::ProviderIds;
use super::sql::{insert, text};
use crate::conn::Conn;

/// Writes every consumer's allocations.
pub(super) async fn write(
    conn: &mut Conn,
    dump: &Dump,
    provider_ids: &ProviderIds,
    class_ids: &ClassIds<'_>,
) -> anyhow::Result<()> {
    let mut allocations = Vec::new();
    for c in &dump.consumers {
        for a in &c.allocations {
            allocations.push(vec![
                provider_ids.id(&a.provider)?.to_string(),
                text(&c.uuid.to_string())?,
                class_ids.id(&a.resource_class)?.to_string(),
                a.used.to_string(),
                conn.datetime_of(c.updated_at),
            ]);
        }
    }
    insert(
        conn,
        "allocations",
        "resource_provider_id, consumer_id, resource_class_id, used, created_at",
        &allocations,
    )
    .await
}
