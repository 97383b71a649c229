//! Whether allot may serve its database beside Placement's (`--placement-conf`
//! naming Placement's MariaDB, no `--database`: `config::validate::database` found
//! it there), asked once at start, before any socket listens.
//!
//! The rule: allot serves that database when it holds at least one commit, or when
//! Placement's database holds no resource provider; otherwise it stops, giving the
//! import command. Why: allot's database found by name alone may be empty (made by
//! the operator, or by `allot db sync`, but never imported into), and an allot that
//! served it in Placement's place would show the cloud's compute nodes and schedulers
//! a Placement with no providers and no allocations: they would create their
//! providers again and place instances on hosts that are in fact full. A commit is
//! what `allot import --from-placement` leaves (and any write of a running allot
//! since), so after the import, and on every start after, Placement's database is
//! not even asked. An empty allot beside an empty Placement is a new cloud (the
//! deployment ran `allot db sync` where it ran `placement-manage db sync`), where
//! there is nothing to over-commit. What the rule cannot see: Placement changed
//! after the import (the writers must be stopped meanwhile: docs/migrate.md).

use anyhow::Context;

use crate::config::BesidePlacement;

/// Stops the start, saying what to do, unless allot may serve `url` (the database
/// `beside` describes, opened as `store`): see the module's doc.
pub(super) fn check(
    store: &mut allot_store::Store,
    url: &str,
    beside: &BesidePlacement,
) -> anyhow::Result<()> {
    let ours = allot_store::redacted(url);
    let head = store
        .head()
        .with_context(|| format!("reading the change log of {ours}"))?;
    if head.0 > 0 {
        return Ok(());
    }
    let theirs = beside.placement.shown();
    let import = format!(
        "Stop nova-scheduler and nova-conductor, then import Placement's database into \
         allot's (give the passwords shown as ***):\n    allot import --from-placement \
         '{theirs}' --database '{ours}'\nthen start allot again (docs/migrate.md, \"The \
         switch, step by step\"). --database names allot's database explicitly instead."
    );
    let providers = allot_placement_db::PlacementUrl::parse(beside.placement.url())
        .and_then(|db| allot_placement_db::providers(&db))
        .with_context(|| {
            format!(
                "allot's database {ours} (beside Placement's, placement.conf {}) holds \
                 nothing yet, and whether Placement's database holds resource providers \
                 could not be read. allot serves an empty database beside Placement's only \
                 while Placement's holds none. {import}",
                beside.conf.display()
            )
        })?;
    if providers == 0 {
        tracing::info!(
            database = %ours,
            placement = %theirs,
            "allot's database beside Placement's holds nothing yet, and Placement's holds \
             no resource provider: serving it (a new cloud)"
        );
        return Ok(());
    }
    anyhow::bail!(
        "allot's database {ours} (beside Placement's, placement.conf {}) holds nothing yet, \
         while Placement's database {theirs} holds {providers} resource provider(s): serving \
         the empty one would show Nova a Placement with no providers and no allocations, \
         which compute nodes and schedulers would fill again from scratch and over-commit. \
         {import}",
        beside.conf.display()
    )
}
