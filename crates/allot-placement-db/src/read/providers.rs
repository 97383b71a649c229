//! `resource_providers`: the providers in id order (the order Placement lists them
//! in), with their generation as it is (a NULL one is Placement's default, 0); each
//! parent becomes the parent's uuid, which is where the dump keeps the tree, and the
//! root Placement stored is checked against the parents.

use std::collections::HashMap;

use allot_store::dump::DumpProvider;
use anyhow::{anyhow, bail};

use super::cells::{non_negative, Cells};
use super::Table;
use crate::conn::Rows;

/// Reads the table.
pub(super) async fn select(table: &mut Table<'_>) -> anyhow::Result<Rows> {
    let sql = format!(
        "SELECT id, uuid, name, generation, parent_provider_id, root_provider_id, {}, {} \
         FROM resource_providers ORDER BY id",
        table.epoch("created_at"),
        table.epoch("updated_at")
    );
    table.read("resource_providers", &sql).await
}

/// The providers read, and where each of Placement's provider ids is among them.
pub(super) struct Providers {
    /// The providers, in id order.
    pub(super) list: Vec<DumpProvider>,
    /// The index in `list` of each provider id.
    at: HashMap<i64, usize>,
}

impl Providers {
    /// Where the provider a row of `table` names by its id is in the list.
    pub(super) fn index(&self, id: i64, table: &str) -> anyhow::Result<usize> {
        self.at
            .get(&id)
            .copied()
            .ok_or_else(|| anyhow!("{table}: a row names provider id {id}, which does not exist"))
    }

    /// Puts each provider's inventories, traits and aggregates in the dump's order.
    pub(super) fn sort_members(&mut self) {
        for p in &mut self.list {
            p.inventories
                .sort_by(|a, b| a.resource_class.cmp(&b.resource_class));
            p.traits.sort();
            p.aggregates.sort();
        }
    }
}

/// The providers, with their parents, and their roots checked.
pub(super) fn decode(rows: &Rows) -> anyhow::Result<Providers> {
    let mut providers = Providers {
        list: Vec::with_capacity(rows.len()),
        at: HashMap::with_capacity(rows.len()),
    };
    let mut ids: Vec<(Option<i64>, Option<i64>)> = Vec::with_capacity(rows.len());
    for row in rows {
        let mut r = Cells::new(row, "resource_providers");
        let id = r.int()?;
        let uuid = r.uuid()?;
        let name = r.opt_text()?.unwrap_or_default();
        let generation = r.opt_int()?.unwrap_or(0);
        let (parent, root) = (r.opt_int()?, r.opt_int()?);
        let (created_at, updated_at) = (r.opt_int()?.unwrap_or(0), r.opt_int()?);
        providers.at.insert(id, providers.list.len());
        ids.push((parent, root));
        providers.list.push(DumpProvider {
            uuid,
            name,
            parent: None,
            generation: non_negative(generation, "resource_providers.generation")?,
            created_at,
            updated_at: updated_at.unwrap_or(created_at),
            inventories: Vec::new(),
            traits: Vec::new(),
            aggregates: Vec::new(),
        });
    }
    link_parents(&mut providers, &ids)?;
    Ok(providers)
}

/// Sets each provider's parent from `ids` (each provider's parent and root ids, in
/// the list's order), and checks the root Placement stored.
fn link_parents(
    providers: &mut Providers,
    ids: &[(Option<i64>, Option<i64>)],
) -> anyhow::Result<()> {
    for (i, (parent, root)) in ids.iter().enumerate() {
        if let Some(parent) = parent {
            let p = providers.index(*parent, "resource_providers.parent_provider_id")?;
            providers.list[i].parent = Some(providers.list[p].uuid);
        }
        // The root Placement stored must be the top of the parents' chain (a NULL
        // one, from before revision 611cd6dffd7b, is the provider itself).
        if let Some(root) = root {
            let mut top = i;
            for _ in 0..=ids.len() {
                match ids[top].0 {
                    Some(parent) => top = providers.index(parent, "resource_providers")?,
                    None => break,
                }
            }
            if providers.index(*root, "resource_providers.root_provider_id")? != top {
                bail!(
                    "resource_providers: provider {} has root_provider_id {root}, which is \
                     not the top of its parents",
                    providers.list[i].uuid
                );
            }
        }
    }
    Ok(())
}
