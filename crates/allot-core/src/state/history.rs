//! What the last changes did, for what is kept beside the view and brought up to date
//! instead of rebuilt: the weighed walk's order (`crate::candidates::order`).
//!
//! Every [`State::apply`] adds an entry with an id no other version of any view
//! shares, and what its changes did to the candidate search's bounds: only *grew*
//! usage (new allocations and claims, a provider's generation), *lowered* something
//! on some providers (usage released, inventories, traits or aggregates changed), or
//! possibly *everything* (a sharing provider changed: it serves many trees; a tree was
//! re-parented; a class renamed). A version's history is its own and its ancestors'
//! last [`CAP`] entries: a kept order made on a version finds that version's id in a
//! descendant's history, and reads what happened since.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::change::Change;
use crate::model::ProviderId;
use crate::names::SHARING_TRAIT;

use super::State;

/// How many entries a version keeps: a kept order older than that is rebuilt.
const CAP: usize = 256;

/// Ids of entries, unique in the process (views loaded again, and the copies a plan
/// works on, never share one).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What one `apply` (or a load) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Usage grew, or nothing a bound reads changed.
    Grew,
    /// Something may have lowered on these providers (not sharing ones).
    Lowered(Arc<[ProviderId]>),
    /// Anything may have changed.
    Everything,
}

/// One entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Unique in the process.
    pub id: u64,
    /// What the changes did.
    pub effect: Effect,
}

/// A version's last entries, oldest first (shared between versions until one
/// applies something).
#[derive(Debug, Clone)]
pub struct History(Arc<VecDeque<Entry>>);

impl Default for History {
    /// A new view: one entry, which says that anything may be new.
    fn default() -> Self {
        let mut entries = VecDeque::with_capacity(CAP);
        entries.push_back(Entry {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            effect: Effect::Everything,
        });
        History(Arc::new(entries))
    }
}

impl History {
    /// The id of the version's last entry.
    pub fn current(&self) -> u64 {
        self.0.back().map_or(0, |e| e.id)
    }

    /// Adds an entry.
    pub fn record(&mut self, effect: Effect) {
        let entries = Arc::make_mut(&mut self.0);
        if entries.len() == CAP {
            entries.pop_front();
        }
        entries.push_back(Entry {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            effect,
        });
    }

    /// The entries after the one with id `id`, if this version has it (it is an
    /// ancestor, or this version, and not too old).
    pub fn since(&self, id: u64) -> Option<impl Iterator<Item = &Entry>> {
        let at = self.0.iter().position(|e| e.id == id)?;
        Some(self.0.iter().skip(at + 1))
    }
}

impl State {
    /// What `changes` will do, read before they are applied (see the module doc).
    pub(super) fn effect_of(&self, changes: &[Change]) -> Effect {
        let mut lowered: Vec<ProviderId> = Vec::new();
        for change in changes {
            match change {
                Change::PutClass { old_name, .. } if old_name.is_some() => {
                    return Effect::Everything
                }
                Change::PutProvider { row, .. } => match self.provider(row.id) {
                    // A new provider in a tree: the tree may offer more.
                    None => lowered.push(row.id),
                    Some(p) if p.row.parent != row.parent => return Effect::Everything,
                    // A generation or a name.
                    Some(_) => {}
                },
                Change::SetInventories(id, _)
                | Change::SetTraits(id, _)
                | Change::SetAggregates(id, _) => {
                    let becomes_sharing = matches!(change, Change::SetTraits(_, t)
                        if t.iter().any(|t| t.as_str() == SHARING_TRAIT));
                    if becomes_sharing || self.sharing.contains(id) {
                        return Effect::Everything;
                    }
                    lowered.push(*id);
                }
                Change::DeleteConsumer(uuid) => {
                    if let Some(c) = self.consumer(uuid) {
                        lowered.extend(c.allocations.iter().map(|a| a.provider));
                    }
                }
                Change::SetAllocations(uuid, new) => {
                    if let Some(c) = self.consumer(uuid) {
                        // What the consumer held and holds less of after.
                        lowered.extend(
                            c.allocations
                                .iter()
                                .filter(|old| {
                                    let after: u64 = new
                                        .iter()
                                        .filter(|a| {
                                            a.provider == old.provider && a.class == old.class
                                        })
                                        .map(|a| a.used)
                                        .sum();
                                    after < old.used
                                })
                                .map(|a| a.provider),
                        );
                    }
                }
                Change::PutClaim(claim) => {
                    // A claim that was already there: confirmed, released or swept.
                    if let Some(old) = self.claim(&claim.uuid) {
                        for amount in &old.allocations {
                            match self.provider_by_uuid(&amount.provider) {
                                Some(p) => lowered.push(p.id()),
                                None => return Effect::Everything,
                            }
                        }
                    }
                }
                // Deletes only take away; classes, traits and consumers' rows are not
                // read by a bound; a purged claim had already ended.
                Change::PutClass { .. }
                | Change::DeleteClass(_)
                | Change::SetClassMetadata(..)
                | Change::PutTrait(_)
                | Change::DeleteTrait(_)
                | Change::DeleteProvider(_)
                | Change::PutConsumer { .. }
                | Change::DeleteClaim(_)
                // Groups order nothing a kept order keeps (see `candidates::order`).
                | Change::PutServerGroup(_)
                | Change::DeleteServerGroup(_)
                | Change::JoinServerGroup { .. }
                // A drain keeps roots out through the pick's filter, not a bound.
                | Change::PutDrain(_)
                | Change::DeleteDrain(_)
                // Shapes are questions asked of the view, not part of it.
                | Change::PutShape(_)
                | Change::DeleteShape(_)
                // Sessions are the web UI's, not the placement's.
                | Change::RevokeSession { .. } => {}
            }
        }
        if lowered.is_empty() {
            return Effect::Grew;
        }
        if lowered.iter().any(|id| self.sharing.contains(id)) {
            return Effect::Everything;
        }
        lowered.sort_unstable();
        lowered.dedup();
        Effect::Lowered(lowered.into())
    }
}
