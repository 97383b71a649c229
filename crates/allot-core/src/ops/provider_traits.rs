//! A provider's traits: replace them all (with a generation check) or clear them.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::aggregates::GENERATION_CHANGED;
use super::{bump, bumped_generation, check_generation, GivenGeneration, Plan};
use crate::change::Change;
use crate::error::Error;
use crate::model::{Provider, Timestamp};
use crate::names::{RequestedName, TraitName};
use crate::state::State;

/// A provider's traits and generation after a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderTraits {
    /// The traits, by name.
    pub traits: Vec<TraitName>,
    /// The provider's generation.
    pub generation: u64,
}

impl State {
    /// Gives the provider exactly the traits named, all of which must exist, if its
    /// generation is still `generation`. The generation goes up only if the set of
    /// traits actually changes.
    ///
    /// The request's schema lets any text through: text that is not a trait name is
    /// reported with the unknown names, in one message, after the provider and
    /// generation checks.
    pub fn set_provider_traits(
        &self,
        provider: &Uuid,
        names: &[RequestedName<TraitName>],
        generation: impl Into<GivenGeneration>,
        now: Timestamp,
    ) -> Plan<ProviderTraits> {
        let rp = self.provider_required(provider)?;
        check_generation(rp, generation.into(), GENERATION_CHANGED)?;
        let mut wanted: BTreeSet<TraitName> = BTreeSet::new();
        let mut missing: Vec<&str> = Vec::new();
        for requested in names {
            match requested.name().filter(|n| self.trait_exists(n)) {
                Some(name) => {
                    wanted.insert(name.clone());
                }
                None if !missing.contains(&requested.as_str()) => missing.push(requested.as_str()),
                None => {}
            }
        }
        if !missing.is_empty() {
            return Err(Error::invalid(format!(
                "No such trait {}",
                missing.join(", ")
            )));
        }
        Ok(replace_traits(rp, wanted, now))
    }

    /// Removes all of the provider's traits (no generation check, as in Placement).
    pub fn clear_provider_traits(&self, provider: &Uuid, now: Timestamp) -> Plan<ProviderTraits> {
        let rp = self.provider_required(provider)?;
        Ok(replace_traits(rp, BTreeSet::new(), now))
    }
}

/// The changes that give `rp` the traits `wanted`: none when it has them already,
/// else the new set and a generation bump.
fn replace_traits(
    rp: &Provider,
    wanted: BTreeSet<TraitName>,
    now: Timestamp,
) -> (ProviderTraits, Vec<Change>) {
    if wanted.iter().eq(rp.traits.iter()) {
        let unchanged = ProviderTraits {
            traits: wanted.into_iter().collect(),
            generation: rp.row.generation,
        };
        return (unchanged, vec![]);
    }
    let traits: Vec<TraitName> = wanted.into_iter().collect();
    let changes = vec![Change::SetTraits(rp.id(), traits.clone()), bump(rp, now)];
    (
        ProviderTraits {
            traits,
            generation: bumped_generation(rp),
        },
        changes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ConflictCode;
    use crate::model::{ProviderId, TraitRecord};
    use crate::testing::{new_provider, tn};

    const RP: Uuid = Uuid::from_u128(0x2222);

    fn state() -> State {
        let mut s = State::new();
        s.apply(&[
            new_provider(7, RP, None, 1),
            Change::PutTrait(TraitRecord {
                name: TraitName::new_unchecked("CUSTOM_A"),
                created_at: 1,
            }),
            Change::PutTrait(TraitRecord {
                name: TraitName::new_unchecked("CUSTOM_B"),
                created_at: 1,
            }),
        ]);
        s
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn requested(list: &[&str]) -> Vec<RequestedName<TraitName>> {
        list.iter().map(|s| TraitName::requested(s)).collect()
    }

    fn traits_of(s: &State) -> Vec<String> {
        s.provider_by_uuid(&RP)
            .unwrap()
            .traits
            .iter()
            .map(|t| t.to_string())
            .collect()
    }

    #[test]
    fn set_rules() {
        // (traits before, request, generation given, Ok((traits after, generation after)) or the error)
        type Outcome = Result<(&'static [&'static str], u64), Error>;
        let cases: Vec<(&[&str], &[&str], u64, Outcome)> = vec![
            (
                &[],
                &["CUSTOM_B", "CUSTOM_A"],
                0,
                Ok((&["CUSTOM_A", "CUSTOM_B"], 1)),
            ),
            (
                &[],
                &["HW_CPU_X86_AVX2", "CUSTOM_A", "CUSTOM_A"],
                0,
                Ok((&["CUSTOM_A", "HW_CPU_X86_AVX2"], 1)),
            ),
            (&["CUSTOM_A"], &["CUSTOM_A"], 0, Ok((&["CUSTOM_A"], 0))),
            (&["CUSTOM_A"], &[], 0, Ok((&[], 1))),
            (&[], &[], 0, Ok((&[], 0))),
            (
                &[],
                &["CUSTOM_A"],
                4,
                Err(Error::conflict(
                    ConflictCode::ConcurrentUpdate,
                    GENERATION_CHANGED,
                )),
            ),
            (
                &[],
                &["NOPE_1", "CUSTOM_A", "NOPE_2", "NOPE_1"],
                0,
                Err(Error::invalid("No such trait NOPE_1, NOPE_2")),
            ),
            // Text that is no trait name is listed with the unknown names, in order.
            (
                &[],
                &["NOPE_1", "not a trait", "CUSTOM_A", ""],
                0,
                Err(Error::invalid("No such trait NOPE_1, not a trait, ")),
            ),
            // A stale generation is reported before unknown traits.
            (
                &[],
                &["NOPE_1"],
                9,
                Err(Error::conflict(
                    ConflictCode::ConcurrentUpdate,
                    GENERATION_CHANGED,
                )),
            ),
        ];
        for (before, request, generation, outcome) in cases {
            let mut s = state();
            if !before.is_empty() {
                let list = before
                    .iter()
                    .map(|t| TraitName::new_unchecked(*t))
                    .collect();
                s.apply(&[Change::SetTraits(ProviderId(7), list)]);
            }
            let result = s.set_provider_traits(&RP, &requested(request), generation, 3);
            match (result, outcome) {
                (Ok((answer, changes)), Ok((after, gen))) => {
                    s.apply(&changes);
                    assert_eq!(traits_of(&s), names(after), "{request:?}");
                    let listed: Vec<String> = answer.traits.iter().map(|t| t.to_string()).collect();
                    assert_eq!(listed, names(after), "{request:?}");
                    assert_eq!(answer.generation, gen, "{request:?}");
                    assert_eq!(s.provider_by_uuid(&RP).unwrap().row.generation, gen);
                }
                (Err(got), Err(want)) => assert_eq!(got, want, "{request:?}"),
                (got, want) => panic!("{request:?}: got {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn clear_bumps_only_when_something_goes() {
        let mut s = state();
        let (answer, changes) = s.clear_provider_traits(&RP, 2).unwrap();
        assert!(changes.is_empty());
        assert_eq!(answer.generation, 0);
        let (_, changes) = s
            .set_provider_traits(&RP, &requested(&["CUSTOM_A"]), 0, 2)
            .unwrap();
        s.apply(&changes);
        let (answer, changes) = s.clear_provider_traits(&RP, 3).unwrap();
        s.apply(&changes);
        assert_eq!(answer.generation, 2);
        assert!(traits_of(&s).is_empty());
        assert_eq!(s.provider_by_uuid(&RP).unwrap().row.updated_at, 3);
    }

    #[test]
    fn unknown_provider() {
        let s = State::new();
        assert!(matches!(
            s.clear_provider_traits(&RP, 1),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            s.set_provider_traits(&RP, &[], 0, 1),
            Err(Error::NotFound(_))
        ));
    }

    #[test]
    fn traits_in_use_cannot_be_deleted() {
        let mut s = state();
        let (_, changes) = s
            .set_provider_traits(&RP, &requested(&["CUSTOM_A"]), 0, 2)
            .unwrap();
        s.apply(&changes);
        assert!(matches!(
            s.delete_trait(&tn("CUSTOM_A")),
            Err(Error::Conflict { .. })
        ));
        assert!(s.delete_trait(&tn("CUSTOM_B")).is_ok());
    }
}
