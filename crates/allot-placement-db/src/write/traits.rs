//! `traits` and `resource_provider_traits`: the dump's custom traits and the
//! standard ones providers have (Placement syncs the rest on its next start),
//! numbered by the database, then each provider's traits by those ids.

use std::collections::{BTreeSet, HashMap};

use allot_store::dump::Dump;
use anyhow::anyhow;

use super::providers::ProviderIds;
use super::sql::{ids, insert, text};
use crate::conn::Conn;

/// Writes the traits not there yet; `now` is the time a standard one is stamped
/// with. Returns every trait's id, by name.
pub(super) async fn write(
    conn: &mut Conn,
    dump: &Dump,
    now: &str,
) -> anyhow::Result<HashMap<String, i64>> {
    let present = ids(conn, "SELECT name, id FROM traits").await?;
    let mut wanted: BTreeSet<&str> = dump.traits.iter().map(|t| t.name.as_str()).collect();
    wanted.extend(
        dump.providers
            .iter()
            .flat_map(|p| p.traits.iter().map(String::as_str)),
    );
    let created: HashMap<&str, i64> = dump
        .traits
        .iter()
        .map(|t| (t.name.as_str(), t.created_at))
        .collect();
    let rows = wanted
        .iter()
        .filter(|n| !present.contains_key(**n))
        .map(|n| {
            let at = created
                .get(n)
                .map_or(now.to_owned(), |t| conn.datetime_of(*t));
            Ok(vec![text(n)?, at])
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    insert(conn, "traits", "name, created_at", &rows).await?;
    ids(conn, "SELECT name, id FROM traits").await
}

/// Writes each provider's traits.
pub(super) async fn write_provider_traits(
    conn: &mut Conn,
    dump: &Dump,
    provider_ids: &ProviderIds,
    trait_ids: &HashMap<String, i64>,
) -> anyhow::Result<()> {
    let mut provider_traits = Vec::new();
    for p in &dump.providers {
        let id = provider_ids.id(&p.uuid)?;
        for t in &p.traits {
            let trait_id = trait_ids
                .get(t)
                .ok_or_else(|| anyhow!("trait {t} was not written"))?;
            provider_traits.push(vec![trait_id.to_string(), id.to_string()]);
        }
    }
    insert(
        conn,
        "resource_provider_traits",
        "trait_id, resource_provider_id",
        &provider_traits,
    )
    .await
}
