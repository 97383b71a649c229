//! Provider summaries: what a candidate's providers have and use, for the client to
//! weigh candidates.

use uuid::Uuid;

use crate::model::{ProviderId, Timestamp};
use crate::state::State;

/// One inventory of a summarised provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryResource<'s> {
    /// The resource class.
    pub class: &'s str,
    /// [`Inventory::reported_capacity`]: truncated towards zero as Placement shows it.
    ///
    /// [`Inventory::reported_capacity`]: crate::model::Inventory::reported_capacity
    pub capacity: i64,
    /// What allocations use.
    pub used: u64,
}

/// What a candidate's client learns about one provider. The default is an empty
/// summary for [`State::fill_provider_summary`] to fill.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderSummary<'s> {
    /// The provider.
    pub uuid: Uuid,
    /// Its parent, if nested.
    pub parent_uuid: Option<Uuid>,
    /// The root of its tree.
    pub root_uuid: Uuid,
    /// Every inventory, by class name.
    pub resources: Vec<SummaryResource<'s>>,
    /// Its traits, sorted.
    pub traits: Vec<&'s str>,
}

impl State {
    /// The summary of a provider (None if it does not exist).
    pub fn provider_summary(&self, id: ProviderId, now: Timestamp) -> Option<ProviderSummary<'_>> {
        let mut summary = ProviderSummary::default();
        self.fill_provider_summary(id, now, &mut summary)
            .then_some(summary)
    }

    /// Overwrites `summary` with the summary of a provider, reusing its lists; false
    /// (and `summary` unspecified) if the provider does not exist. A large answer
    /// summarises thousands of providers: with one summary refilled for each, they
    /// cost no allocation apiece.
    pub fn fill_provider_summary<'s>(
        &'s self,
        id: ProviderId,
        now: Timestamp,
        summary: &mut ProviderSummary<'s>,
    ) -> bool {
        let Some(p) = self.provider(id) else {
            return false;
        };
        summary.resources.clear();
        summary
            .resources
            .extend(p.inventories.iter().map(|(class, inv)| SummaryResource {
                class: class.as_str(),
                capacity: inv.reported_capacity(),
                // Allocations and the pending claims live at `now`: a summary
                // answers how much is left, and a claim's promise is not.
                used: p.used(class.as_str(), now),
            }));
        // Placement lists a provider's traits in the order of their ids: the standard
        // traits (created at start-up) before the custom ones, which come in the order
        // they were created. Clients (and Placement's tests) see that order.
        // Sorted in place by that key (computed again at each comparison: a provider
        // has few traits), so that the traits cost one list, not two.
        let traits = &mut summary.traits;
        traits.clear();
        traits.extend(p.traits.iter().map(|t| t.as_str()));
        if traits.len() > 1 {
            traits.sort_unstable_by_key(|&t| {
                let created = self.traits.get(t).map(|r| r.created_at);
                (created.is_some(), created.unwrap_or(0), t)
            });
        }
        summary.uuid = p.uuid();
        summary.parent_uuid = p.row.parent.map(|parent| self.uuid_of(parent));
        summary.root_uuid = self.uuid_of(p.row.root);
        true
    }
}
