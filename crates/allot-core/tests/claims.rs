//! Property tests of pending claims: for any interleaving of claims, confirms,
//! releases, expiries, sweeps, allocation writes and inventory changes, every total
//! equals the sum of the live records, nothing that adds (a claim, a confirm, an
//! allocation write) takes a provider over its capacity, releasing again changes
//! nothing, and a sweep changes no total.
//!
//! Each case is a random history (`support::claim_history`): one step per second of
//! the injected clock, claims expiring a few steps after they are made, so that
//! expiry happens in the middle of everything else.
//!
//! 64 cases by default; `PROPTEST_CASES=5000 cargo test -p allot-core --test claims
//! --release` for a long run.

mod support;

use std::collections::BTreeMap;

use allot_core::{ClaimState, ProviderId, ResourceClass, State, Timestamp, Uuid};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use support::{claim_uuid, consumer_uuid, plan, Op};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

/// What happened over a run, to check that the generator reaches the cases that
/// matter.
#[derive(Debug, Default)]
struct Stats {
    claims_accepted: usize,
    claims_refused: usize,
    confirms: usize,
    releases: usize,
    expired_while_live: usize,
    swept: usize,
}

/// Amounts per (provider, class).
type Totals = BTreeMap<(ProviderId, String), u64>;

/// What allocations and live claims take, summed from the records alone.
fn from_records(state: &State, now: Timestamp) -> Totals {
    let mut totals = Totals::new();
    for c in state.consumers() {
        for a in c.allocations.iter() {
            *totals
                .entry((a.provider, a.class.as_str().to_owned()))
                .or_default() += a.used;
        }
    }
    for c in state.claims().filter(|c| c.live(now)) {
        for a in c.allocations.iter() {
            let p = state
                .provider_by_uuid(&a.provider)
                .unwrap_or_else(|| panic!("live claim {} on a deleted provider", c.uuid));
            assert!(
                p.inventories.contains_key(a.class.as_str()),
                "live claim {} without inventory of {}",
                c.uuid,
                a.class
            );
            *totals
                .entry((p.id(), a.class.as_str().to_owned()))
                .or_default() += a.amount;
        }
    }
    totals
}

/// Every total the view answers equals the sum of the records.
fn check_totals(state: &State, now: Timestamp) {
    assert!(state.check_usage_index(), "an index is out of step");
    let expected = from_records(state, now);
    for p in state.providers() {
        let classes = p.inventories.keys().map(|c| c.as_str().to_owned()).chain(
            expected
                .range((p.id(), String::new())..)
                .take_while(|((q, _), _)| *q == p.id())
                .map(|((_, c), _)| c.clone()),
        );
        for class in classes {
            let want = expected.get(&(p.id(), class.clone())).copied().unwrap_or(0);
            let class = ResourceClass::new_unchecked(&class);
            assert_eq!(
                state.used(p.id(), &class, now),
                want,
                "{class} on {}",
                p.uuid()
            );
        }
        let (pending, by_consumer) = state.provider_pending(p.id(), now);
        let mut summed: BTreeMap<ResourceClass, u64> = BTreeMap::new();
        for amounts in by_consumer.values() {
            for (class, n) in amounts {
                *summed.entry(class.clone()).or_default() += n;
            }
        }
        assert_eq!(
            pending,
            summed,
            "per-consumer pending adds up on {}",
            p.uuid()
        );
    }
    for slot in 0..support::CONSUMERS {
        let consumer = consumer_uuid(slot);
        let mut want: BTreeMap<ResourceClass, u64> = BTreeMap::new();
        for c in state
            .claims()
            .filter(|c| c.consumer == consumer && c.live(now))
        {
            for a in c.allocations.iter() {
                *want.entry(a.class.clone()).or_default() += a.amount;
            }
        }
        assert_eq!(state.pending_totals(Some(&consumer), None, now), want);
    }
}

/// Nothing over capacity got more used than it was.
fn check_no_worse(before: &State, after: &State, now: Timestamp) {
    for p in after.providers() {
        for (class, inv) in &p.inventories {
            let used = after.used(p.id(), class, now);
            if inv.fits(used, 0) {
                continue;
            }
            let was = before.used(p.id(), class, now);
            assert!(
                used <= was,
                "{class} on {} is over capacity ({used} > {}) and went up from {was}",
                p.uuid(),
                inv.capacity()
            );
        }
    }
}

/// The (provider, class) amounts a consumer holds.
fn holdings(state: &State, consumer: &Uuid) -> Totals {
    let mut out = Totals::new();
    for a in state
        .consumer(consumer)
        .map(|c| &*c.allocations)
        .unwrap_or(&[])
    {
        *out.entry((a.provider, a.class.as_str().to_owned()))
            .or_default() += a.used;
    }
    out
}

fn run(ops: &[Op], stats: &mut Stats) {
    let mut state = State::new();
    for (step, op) in ops.iter().enumerate() {
        let now = step as i64 + 1;
        stats.expired_while_live += state
            .claims()
            .filter(|c| c.live(now - 1) && !c.live(now))
            .count();
        let planned = plan(&state, op, now);
        if matches!(op, Op::Claim { .. }) && planned.is_err() {
            stats.claims_refused += 1;
        }
        let Ok(changes) = planned else {
            check_totals(&state, now);
            continue;
        };
        let before = state.clone();
        state.apply(&changes);
        check_totals(&state, now);
        if !matches!(op, Op::RenameClass { .. }) {
            check_no_worse(&before, &state, now);
        }
        match op {
            Op::Claim { claim, .. } => {
                stats.claims_accepted += 1;
                assert!(state.claim(&claim_uuid(*claim)).unwrap().live(now));
            }
            Op::Confirm { claim, replace } => {
                let uuid = claim_uuid(*claim);
                let old = before.claim(&uuid).unwrap();
                let new = state.claim(&uuid).unwrap();
                assert_eq!(new.state, ClaimState::Confirmed);
                if old.state == ClaimState::Pending {
                    stats.confirms += 1;
                    // The consumer holds the claim, added or in place of what it had.
                    let mut want = if *replace {
                        Totals::new()
                    } else {
                        holdings(&before, &old.consumer)
                    };
                    for a in old.allocations.iter() {
                        let id = state.provider_by_uuid(&a.provider).unwrap().id();
                        *want.entry((id, a.class.as_str().to_owned())).or_default() += a.amount;
                    }
                    assert_eq!(holdings(&state, &old.consumer), want);
                }
                let (_, again) = state.plan_confirm_claim(&uuid, *replace, now).unwrap();
                assert!(again.is_empty(), "a second confirm changed {again:?}");
            }
            Op::ReleaseClaim(claim) => {
                stats.releases += usize::from(!changes.is_empty());
                let (_, again) = state.plan_release_claim(&claim_uuid(*claim), now).unwrap();
                assert!(again.is_empty(), "a second release changed {again:?}");
            }
            Op::ReleaseClaims(consumer) => {
                let (n, again) = state
                    .plan_release_consumer_claims(&consumer_uuid(*consumer), now)
                    .unwrap();
                assert_eq!((n, again.len()), (0, 0));
            }
            Op::Sweep(_) => {
                stats.swept += changes.len();
                assert_eq!(from_records(&before, now), from_records(&state, now));
                for p in state.providers() {
                    assert_eq!(
                        before.provider_pending(p.id(), now),
                        state.provider_pending(p.id(), now)
                    );
                }
            }
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(), ..Config::default() })]

    #[test]
    fn claims_keep_totals_and_capacity(ops in support::claim_history(80)) {
        run(&ops, &mut Stats::default());
    }
}

/// The property is only as good as the cases it sees: over a fixed-seed run, claims
/// must be accepted and refused, confirmed, released, expire while live, and be swept.
#[test]
fn the_generator_reaches_the_interesting_cases() {
    let mut runner = TestRunner::deterministic();
    let strategy = support::claim_history(80);
    let mut stats = Stats::default();
    for _ in 0..64 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        run(&ops, &mut stats);
    }
    assert!(stats.claims_accepted > 50, "{stats:?}");
    assert!(stats.claims_refused > 10, "{stats:?}");
    assert!(stats.confirms > 10, "{stats:?}");
    assert!(stats.releases > 10, "{stats:?}");
    assert!(stats.expired_while_live > 10, "{stats:?}");
    assert!(stats.swept > 10, "{stats:?}");
}
