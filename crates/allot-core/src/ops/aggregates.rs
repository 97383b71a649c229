//! A provider's aggregate memberships: replace them all at once.
//!
//! Aggregates have no life of their own: an aggregate is nothing but a uuid that some
//! providers share, so setting a provider's list is the only write there is.

use crate::compact::VecSet;

use uuid::Uuid;

use super::{bump, bumped_generation, check_generation, GivenGeneration, Plan};
use crate::change::Change;
use crate::model::Timestamp;
use crate::state::State;

/// The message of a generation conflict on aggregates (and provider traits).
pub const GENERATION_CHANGED: &str =
    "Resource provider's generation already changed. Please update the generation and try again.";

impl State {
    /// Makes the provider a member of exactly `aggregates`.
    ///
    /// `generation` is what the client believes the provider's generation is; it is
    /// given from microversion 1.19 on, and then it must match and the write bumps the
    /// generation, even when the memberships do not change. Without it (the 1.1–1.18
    /// form) nothing is checked and the generation stays as it is.
    ///
    /// Returns the provider's generation after the write.
    pub fn set_aggregates(
        &self,
        provider: &Uuid,
        aggregates: &[Uuid],
        generation: Option<GivenGeneration>,
        now: Timestamp,
    ) -> Plan<u64> {
        let rp = self.provider_required(provider)?;
        if let Some(expected) = generation {
            check_generation(rp, expected, GENERATION_CHANGED)?;
        }
        let wanted: VecSet<Uuid> = aggregates.iter().copied().collect();
        let mut changes = Vec::new();
        if wanted != rp.aggregates {
            changes.push(Change::SetAggregates(rp.id(), wanted.into_iter().collect()));
        }
        if generation.is_none() {
            return Ok((rp.row.generation, changes));
        }
        changes.push(bump(rp, now));
        Ok((bumped_generation(rp), changes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ConflictCode, Error};
    use crate::model::ProviderId;
    use crate::testing::new_provider;

    const RP: Uuid = Uuid::from_u128(0x1111);
    const A: Uuid = Uuid::from_u128(0xa);
    const B: Uuid = Uuid::from_u128(0xb);

    fn with_provider() -> State {
        let mut s = State::new();
        s.apply(&[new_provider(1, RP, None, 1)]);
        s
    }

    fn generation(s: &State) -> u64 {
        s.provider_by_uuid(&RP).unwrap().row.generation
    }

    fn aggregates(s: &State) -> Vec<Uuid> {
        s.provider_by_uuid(&RP)
            .unwrap()
            .aggregates
            .iter()
            .copied()
            .collect()
    }

    #[test]
    fn generation_handling_by_form() {
        // (initial aggregates, new aggregates, generation given, expected outcome:
        //  Ok(generation after) or Err(conflict))
        struct Case {
            name: &'static str,
            before: &'static [Uuid],
            after: &'static [Uuid],
            generation: Option<u64>,
            result: Result<u64, ()>,
            changes: usize,
        }
        let cases = [
            Case {
                name: "old form sets",
                before: &[],
                after: &[A, B],
                generation: None,
                result: Ok(0),
                changes: 1,
            },
            Case {
                name: "old form no-op",
                before: &[A],
                after: &[A],
                generation: None,
                result: Ok(0),
                changes: 0,
            },
            Case {
                name: "new form bumps",
                before: &[],
                after: &[A],
                generation: Some(0),
                result: Ok(1),
                changes: 2,
            },
            Case {
                name: "new form bumps on no-op",
                before: &[A],
                after: &[A],
                generation: Some(0),
                result: Ok(1),
                changes: 1,
            },
            Case {
                name: "new form clears",
                before: &[A, B],
                after: &[],
                generation: Some(0),
                result: Ok(1),
                changes: 2,
            },
            Case {
                name: "stale generation",
                before: &[],
                after: &[A],
                generation: Some(3),
                result: Err(()),
                changes: 0,
            },
        ];
        for case in cases {
            let mut s = with_provider();
            if !case.before.is_empty() {
                s.apply(&[Change::SetAggregates(ProviderId(1), case.before.to_vec())]);
            }
            match (
                s.set_aggregates(
                    &RP,
                    case.after,
                    case.generation.map(GivenGeneration::from),
                    5,
                ),
                case.result,
            ) {
                (Ok((g, changes)), Ok(want)) => {
                    assert_eq!(g, want, "{}", case.name);
                    assert_eq!(changes.len(), case.changes, "{}", case.name);
                    s.apply(&changes);
                    assert_eq!(generation(&s), want, "{}", case.name);
                    let mut expected = case.after.to_vec();
                    expected.sort();
                    assert_eq!(aggregates(&s), expected, "{}", case.name);
                }
                (Err(e), Err(())) => {
                    assert_eq!(
                        e,
                        Error::conflict(ConflictCode::ConcurrentUpdate, GENERATION_CHANGED),
                        "{}",
                        case.name
                    );
                }
                (got, want) => panic!("{}: got {got:?}, wanted {want:?}", case.name),
            }
        }
    }

    #[test]
    fn bump_moves_updated_at() {
        let mut s = with_provider();
        let (_, changes) = s.set_aggregates(&RP, &[A], Some(0.into()), 42).unwrap();
        s.apply(&changes);
        assert_eq!(s.provider_by_uuid(&RP).unwrap().row.updated_at, 42);
    }

    #[test]
    fn duplicates_collapse() {
        let mut s = with_provider();
        let (_, changes) = s.set_aggregates(&RP, &[A, A, B], None, 1).unwrap();
        s.apply(&changes);
        assert_eq!(aggregates(&s), vec![A, B]);
    }

    #[test]
    fn unknown_provider() {
        let s = State::new();
        let e = s.set_aggregates(&RP, &[A], None, 1).unwrap_err();
        assert_eq!(
            e,
            Error::not_found(format!("No resource provider with uuid {RP} found"))
        );
    }
}
