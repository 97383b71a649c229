//! `traits` and `resource_provider_traits`: the custom traits go into the dump (the
//! standard ones are names both sides know), and each provider gets the names of
//! its traits.

use allot_store::dump::DumpTrait;

use super::cells::{named, Cells, Names};
use super::providers::Providers;
use super::Table;
use crate::conn::Rows;

/// Reads `traits`.
pub(super) async fn select(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    let sql = format!("SELECT id, name, {} FROM traits", table.epoch("created_at"));
    table.read("traits", &sql).await
}

/// Reads `resource_provider_traits`.
pub(super) async fn select_provider_traits(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    table
        .read(
            "resource_provider_traits",
            "SELECT resource_provider_id, trait_id FROM resource_provider_traits",
        )
        .await
}

/// The custom traits, by name, and every trait's name by its id.
pub(super) fn decode(rows: &Rows) -> anyhow::Result<(Vec<DumpTrait>, Names)> {
    let mut trait_names = Names::new();
    let mut traits = Vec::new();
    for row in rows {
        let mut r = Cells::new(row, "traits");
        let (id, name, created_at) = (r.int()?, r.text()?, r.opt_int()?.unwrap_or(0));
        if name.starts_with("CUSTOM_") {
            traits.push(DumpTrait {
                name: name.clone(),
                created_at,
            });
        }
        trait_names.insert(id, name);
    }
    traits.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((traits, trait_names))
}

/// Gives each provider its traits' names.
pub(super) fn decode_provider_traits(
    rows: &Rows,
    trait_names: &Names,
    providers: &mut Providers,
) -> anyhow::Result<()> {
    for row in rows {
        let mut r = Cells::new(row, "resource_provider_traits");
        let p = providers.index(r.int()?, "resource_provider_traits")?;
        let name = named(trait_names, r.int()?, "resource_provider_traits", "trait")?;
        providers.list[p].traits.push(name);
    }
    Ok(())
}
