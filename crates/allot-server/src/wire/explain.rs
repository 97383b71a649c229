//! `GET /allocation_candidates/explain` (allot's extension, issue 24): the core's
//! explanation of a candidate search (`allot_core::candidates::explain`) in its wire
//! form. The types are the client's ([`allot_client::Explanation`]), so that the
//! client reads exactly what is written here.

use allot_core::candidates as search;
use allot_core::State as View;

use super::{Explanation, GroupExplanation, Miss, Stage};

/// The answer: each group's stages and nearest misses, with providers named by uuid,
/// and the request-wide counts.
pub fn body(view: &View, explained: search::Explanation) -> Explanation {
    Explanation {
        groups: explained
            .groups
            .into_iter()
            .map(|g| group(view, g))
            .collect(),
        roots: explained.roots,
        roots_allowed: explained.roots_allowed,
        allocation_candidates: explained.candidates,
        emptied_by: explained.emptied_by,
    }
}

/// One group: how many providers survive each stage, and the providers the capacity
/// stage dropped by the least.
fn group(view: &View, g: search::GroupExplanation) -> GroupExplanation {
    GroupExplanation {
        suffix: g.suffix,
        stages: g
            .stages
            .into_iter()
            .map(|(stage, providers)| Stage {
                stage: stage.to_owned(),
                providers,
            })
            .collect(),
        nearest: g
            .nearest
            .into_iter()
            .map(|(id, class, short_by)| Miss {
                resource_provider: view.provider(id).map(|p| p.uuid()).unwrap_or_default(),
                resource_class: class.as_str().to_owned(),
                short_by,
            })
            .collect(),
    }
}
