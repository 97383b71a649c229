//! `resource_providers`: the providers, numbered by the database in the dump's
//! (creation) order, which is the order Placement lists them in; parents and roots
//! set once all have ids.

use std::collections::HashMap;

use allot_store::dump::Dump;
use anyhow::anyhow;
use uuid::Uuid;

use super::sql::{ids, insert, text};
use crate::conn::Conn;

/// Parent updates sent together, up to about this many bytes of SQL.
const UPDATES_BYTES: usize = 64 * 1024;

/// The id the database gave each provider, by uuid.
pub(super) struct ProviderIds(HashMap<String, i64>);

impl ProviderIds {
    /// The id of the provider `uuid`.
    pub(super) fn id(&self, uuid: &Uuid) -> anyhow::Result<i64> {
        self.0
            .get(&uuid.to_string())
            .copied()
            .ok_or_else(|| anyhow!("provider {uuid} is not in the export"))
    }
}

/// Writes the providers and their tree; returns their ids.
pub(super) async fn write(conn: &mut Conn, dump: &Dump) -> anyhow::Result<ProviderIds> {
    let rows = dump
        .providers
        .iter()
        .map(|p| {
            Ok(vec![
                text(&p.uuid.to_string())?,
                text(&p.name)?,
                p.generation.to_string(),
                conn.datetime_of(p.created_at),
                conn.datetime_of(p.updated_at),
            ])
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    insert(
        conn,
        "resource_providers",
        "uuid, name, generation, created_at, updated_at",
        &rows,
    )
    .await?;
    let provider_ids = ProviderIds(ids(conn, "SELECT uuid, id FROM resource_providers").await?);
    link_tree(conn, dump, &provider_ids).await?;
    Ok(provider_ids)
}

/// Makes every provider its own root, then gives each child its parent and the top
/// of its parents' chain as root.
async fn link_tree(conn: &mut Conn, dump: &Dump, provider_ids: &ProviderIds) -> anyhow::Result<()> {
    let parent_of: HashMap<Uuid, Uuid> = dump
        .providers
        .iter()
        .filter_map(|p| p.parent.map(|parent| (p.uuid, parent)))
        .collect();
    conn.execute("UPDATE resource_providers SET root_provider_id = id WHERE 1 = 1")
        .await?;
    let mut updates = String::new();
    for (child, parent) in &parent_of {
        let mut root = *parent;
        while let Some(up) = parent_of.get(&root) {
            root = *up;
        }
        updates.push_str(&format!(
            "UPDATE resource_providers SET parent_provider_id = {}, root_provider_id = {} \
             WHERE id = {};",
            provider_ids.id(parent)?,
            provider_ids.id(&root)?,
            provider_ids.id(child)?
        ));
        if updates.len() > UPDATES_BYTES {
            conn.execute_many(&std::mem::take(&mut updates)).await?;
        }
    }
    if !updates.is_empty() {
        conn.execute_many(&updates).await?;
    }
    Ok(())
}
