//! Explain (allot's extension, issue 24): why a candidate query found what it found,
//! above all why it found nothing ("no valid host").
//!
//! For each request group, every provider goes through the group's stages in order,
//! and each stage says how many survive it:
//!
//! 1. `resource_class`: has an inventory of the group's classes (a suffixed group's
//!    every class; one class at least for the unsuffixed group, whose classes may come
//!    from several providers);
//! 2. `capacity`: has room for the amount (what allocations and live pending claims
//!    use, plus the amount, within `(total - reserved) * allocation_ratio`) for those
//!    classes;
//! 3. `units`: the amount is allowed by `min_unit`, `max_unit` and `step_size`;
//! 4. `required`, 5. `forbidden`: the group's required and forbidden traits, on the
//!    provider itself;
//! 6. `member_of`: the group's aggregates, and none of its forbidden ones;
//! 7. `in_tree`: in the tree the group names.
//!
//! Then the roots (`root_required`), and the number of candidates the whole request
//! has, which the rules between groups (`group_policy`, `same_subtree`, sharing, one
//! tree per candidate) decide. `emptied_by` names the first stage that left a group
//! with nothing, else the roots, else those rules. The nearest misses are the
//! providers the capacity stage dropped by the smallest shortfall, for the operator
//! who asks how far the cloud is from fitting the request.
//!
//! The stages use the rules the search uses (`filter::has_traits`, `filter::in_all`,
//! `Units::admits`, `Inventory::capacity`, `Provider::used`); the search itself decides
//! the candidates.

use crate::error::Result;
use crate::model::{Provider, ProviderId};
use crate::names::ResourceClass;
use crate::state::State;

use super::filter::{has_trait, has_traits, in_all, in_any, Prepared};
use super::{validate, CandidateQuery, RequestGroup, SearchOptions};

/// The stages of a group, in order.
pub const STAGES: [&str; 7] = [
    "resource_class",
    "capacity",
    "units",
    "required",
    "forbidden",
    "member_of",
    "in_tree",
];

/// How many nearest misses a group reports.
const NEAREST: usize = 5;

/// Why a query found what it found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Explanation {
    /// Per group, in the query's order.
    pub groups: Vec<GroupExplanation>,
    /// Roots in all.
    pub roots: usize,
    /// Roots that pass `root_required`.
    pub roots_allowed: usize,
    /// The candidates the whole request has (up to the search's bound).
    pub candidates: usize,
    /// The first stage that left nothing (`"group '': capacity"`, `"root_required"`,
    /// `"rules between groups"`), or None when there are candidates.
    pub emptied_by: Option<String>,
}

/// One group's stages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupExplanation {
    /// The group's suffix (`""` for the unsuffixed group).
    pub suffix: String,
    /// Each stage of [`STAGES`] and how many providers survive it.
    pub stages: Vec<(&'static str, usize)>,
    /// The providers the capacity stage dropped by the least: `(provider, class,
    /// how much more room the amount needs)`, the smallest first.
    pub nearest: Vec<(ProviderId, ResourceClass, u64)>,
}

impl State {
    /// Explains `query` (see the module doc); refuses what
    /// [`State::allocation_candidates`] refuses (an unknown class or trait).
    pub fn explain(&self, query: &CandidateQuery, options: &SearchOptions) -> Result<Explanation> {
        if let Some(validate::Refusal::Error(e)) = validate::first_refusal(self, query) {
            return Err(e);
        }
        let groups: Vec<GroupExplanation> = query
            .groups
            .iter()
            .map(|g| self.explain_group(g, query))
            .collect();
        let prep = Prepared::new(self, query);
        let roots: Vec<&Provider> = self
            .providers()
            .filter(|p| p.row.parent.is_none())
            .collect();
        let roots_allowed = roots.iter().filter(|r| prep.root_allowed(r)).count();
        let mut unlimited = query.clone();
        unlimited.limit = None;
        unlimited.weigh = Default::default();
        let candidates = self
            .allocation_candidates(&unlimited, options)?
            .requests
            .len();
        let emptied_by = (candidates == 0).then(|| {
            groups
                .iter()
                .find_map(|g| {
                    g.stages
                        .iter()
                        .find(|(_, n)| *n == 0)
                        .map(|(stage, _)| format!("group '{}': {stage}", g.suffix))
                })
                .unwrap_or_else(|| {
                    if roots_allowed == 0 {
                        "root_required".to_owned()
                    } else {
                        "rules between groups".to_owned()
                    }
                })
        });
        Ok(Explanation {
            groups,
            roots: roots.len(),
            roots_allowed,
            candidates,
            emptied_by,
        })
    }

    fn explain_group(&self, g: &RequestGroup, query: &CandidateQuery) -> GroupExplanation {
        let granular = !g.suffix.is_empty();
        let demands: Vec<(&ResourceClass, u64)> = g
            .resources
            .iter()
            .filter_map(|(class, amount)| Some((class.name()?, *amount)))
            .collect();
        // A suffixed group needs every class of one provider; the unsuffixed group
        // needs one class at least here (the others may come from elsewhere).
        let enough = |passing: usize| {
            if demands.is_empty() {
                true
            } else if granular {
                passing == demands.len()
            } else {
                passing > 0
            }
        };
        let has = |test: &dyn Fn(&ResourceClass, u64) -> bool| {
            enough(demands.iter().filter(|(c, a)| test(c, *a)).count())
        };
        let free = |p: &Provider, class: &ResourceClass| -> Option<i128> {
            let inv = p.inventories.get(class.as_str())?;
            Some(inv.capacity() - i128::from(p.used(class.as_str(), query.now)))
        };
        let in_tree = g
            .in_tree
            .as_ref()
            .map(|t| self.provider_by_ref(t).map(|p| p.row.root));
        let mut survivors: Vec<&Provider> = self.providers().collect();
        let mut stages = Vec::with_capacity(STAGES.len());
        let mut nearest: Vec<(ProviderId, ResourceClass, u64)> = Vec::new();
        for stage in STAGES {
            survivors.retain(|p| match stage {
                "resource_class" => has(&|c, _| p.inventories.get(c.as_str()).is_some()),
                "capacity" => {
                    let fits = has(&|c, a| free(p, c).is_some_and(|f| f >= i128::from(a)));
                    if !fits {
                        let short = demands
                            .iter()
                            .filter_map(|(c, a)| {
                                let lack = i128::from(*a) - free(p, c)?;
                                (lack > 0).then(|| {
                                    ((*c).clone(), u64::try_from(lack).unwrap_or(u64::MAX))
                                })
                            })
                            .min_by_key(|(_, lack)| *lack);
                        if let Some((class, lack)) = short {
                            nearest.push((p.id(), class, lack));
                        }
                    }
                    fits
                }
                "units" => has(&|c, a| {
                    p.inventories
                        .get(c.as_str())
                        .is_some_and(|inv| inv.admits(a).is_ok())
                }),
                "required" => has_traits(p, &g.required),
                "forbidden" => !g.forbidden.iter().any(|t| has_trait(p, t)),
                "member_of" => in_all(p, &g.member_of) && !in_any(p, &g.forbidden_aggregates),
                _ => match in_tree {
                    None => true,
                    Some(root) => root == Some(p.row.root),
                },
            });
            stages.push((stage, survivors.len()));
        }
        nearest.sort_by(|a, b| a.2.cmp(&b.2).then(a.0.cmp(&b.0)));
        nearest.truncate(NEAREST);
        GroupExplanation {
            suffix: g.suffix.clone(),
            stages,
            nearest,
        }
    }
}
