//! Property tests of the rules: whatever sequence of requests clients make, claims never
//! over-commit an inventory, refused writes change nothing, and the usage index always
//! equals the sum of the allocation records.
//!
//! Each case is a random sequence of operations (see `support`): classes, providers and
//! inventories created, changed and deleted, and allocation writes (single and
//! multi-consumer, with and without consumer generations) and releases. Every
//! operation is planned against the state; an accepted plan's changes are applied, a
//! refused one is dropped, and after every step the invariants are checked. Allocation
//! writes are also compared with an independent model of the rules (`model_write`):
//! the rules must accept exactly what the model accepts, and produce what it predicts.
//!
//! 64 cases by default; `PROPTEST_CASES=10000 cargo test -p allot-core --test
//! properties --release` for a long run.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use allot_core::ops::allocations::{ConsumerGeneration, ConsumerWrite, Endpoint};
use allot_core::{ProviderId, ResourceClass, State, Uuid};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use support::{consumer_uuid, consumer_writes, plan, release, Op};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

fn config() -> Config {
    Config {
        cases: cases(),
        // A failure's seed is written to `properties.proptest-regressions` beside this
        // file (proptest's default), and every later run replays the seeds there
        // first, so that a failure found once by a long random run stays found.
        ..Config::default()
    }
}

/// What a consumer holds: amount per (provider, class).
type Holdings = BTreeMap<(ProviderId, String), u64>;

/// What happened over a run, to check that the generator reaches the cases that
/// matter (see `the_generator_reaches_the_interesting_cases`).
#[derive(Debug, Default)]
struct Stats {
    writes_accepted: usize,
    writes_refused_for_capacity: usize,
    multi_consumer_writes_accepted: usize,
    over_committed_states: usize,
    accepted_on_over_committed: usize,
    no_worse_writes_on_over_committed: usize,
    releases_of_held: usize,
    refusals: BTreeMap<String, usize>,
}

/// Why the model refuses a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    DuplicateConsumer,
    Generation,
    UnknownProvider,
    NoInventory,
    Constraints,
    Capacity,
}

/// An independent model of `plan_allocations`: what each written consumer holds
/// afterwards, or why the write is refused. Written from the rules as documented, not
/// from the code: generations; providers, inventories and min/max/step per amount;
/// then capacity over the final usage of everyone, where a (provider, class) may end
/// above its capacity only if its usage does not go up.
fn model_write(
    state: &State,
    writes: &[ConsumerWrite],
) -> Result<BTreeMap<Uuid, Holdings>, Refusal> {
    let mut out = BTreeMap::new();
    let distinct: BTreeSet<Uuid> = writes.iter().map(|w| w.consumer).collect();
    if distinct.len() != writes.len() {
        return Err(Refusal::DuplicateConsumer);
    }
    for w in writes {
        let existing = state.consumer(&w.consumer).map(|c| c.row.generation);
        let generation_ok = match w.generation {
            ConsumerGeneration::Unchecked => true,
            ConsumerGeneration::New => existing.is_none(),
            ConsumerGeneration::Is(g) => existing.map(i128::from) == Some(g),
        };
        if !generation_ok {
            return Err(Refusal::Generation);
        }
        // Every provider named must exist, even for a zero amount.
        if w.allocations.iter().any(|r| {
            r.provider
                .uuid()
                .and_then(|u| state.provider_by_uuid(&u))
                .is_none()
        }) {
            return Err(Refusal::UnknownProvider);
        }
        // Amounts of the same provider and class are merged, then checked.
        let mut holdings = Holdings::new();
        for r in w.allocations.iter().filter(|r| r.used > 0) {
            let p = state.provider_by_uuid(&r.provider.uuid().unwrap()).unwrap();
            *holdings
                .entry((p.id(), r.class.as_str().to_owned()))
                .or_default() += r.used;
        }
        for ((p, class), used) in &holdings {
            let inv = state
                .provider(*p)
                .unwrap()
                .inventories
                .get(class.as_str())
                .ok_or(Refusal::NoInventory)?;
            if *used < inv.min_unit || *used > inv.max_unit || *used % inv.step_size != 0 {
                return Err(Refusal::Constraints);
            }
        }
        out.insert(w.consumer, holdings);
    }
    let mut after = Holdings::new();
    for c in state.consumers().filter(|c| !out.contains_key(&c.row.uuid)) {
        for a in &c.allocations {
            *after
                .entry((a.provider, a.class.as_str().to_owned()))
                .or_default() += a.used;
        }
    }
    for holdings in out.values() {
        for (key, used) in holdings {
            *after.entry(key.clone()).or_default() += used;
        }
    }
    for ((p, class), used) in &after {
        let inv = state.provider(*p).unwrap().inventories[class.as_str()];
        if !inv.fits(*used, 0)
            && *used > state.usage(*p, &ResourceClass::new_unchecked(class.as_str()))
        {
            return Err(Refusal::Capacity);
        }
    }
    Ok(out)
}

fn holdings_of(state: &State, consumer: &Uuid) -> Option<Holdings> {
    state.consumer(consumer).map(|c| {
        c.allocations
            .iter()
            .map(|a| ((a.provider, a.class.as_str().to_owned()), a.used))
            .collect()
    })
}

/// (d) and (e), and the referential rules that keep them meaningful.
fn check_invariants(state: &State) {
    assert!(state.check_usage_index(), "usage index out of step");
    let mut sums = Holdings::new();
    let mut holders: BTreeMap<ProviderId, BTreeSet<Uuid>> = BTreeMap::new();
    for c in state.consumers() {
        for a in &c.allocations {
            assert!(a.used > 0, "zero allocation kept: {a:?}");
            let p = state
                .provider(a.provider)
                .unwrap_or_else(|| panic!("allocation on a deleted provider: {a:?}"));
            assert!(
                p.inventories.contains_key(a.class.as_str()),
                "allocation without inventory: {a:?}"
            );
            assert!(
                state.class_exists(&a.class),
                "allocation of a class that does not exist: {a:?}"
            );
            *sums
                .entry((a.provider, a.class.as_str().to_owned()))
                .or_default() += a.used;
            holders.entry(a.provider).or_default().insert(c.row.uuid);
        }
    }
    for p in state.providers() {
        for class in p.inventories.keys() {
            assert!(
                state.class_exists(class),
                "inventory of a class that does not exist: {class} on {}",
                p.uuid()
            );
        }
        let index = state.provider_usage_index(p.id());
        let mut seen = BTreeSet::new();
        for ((q, class), used) in sums.range((p.id(), String::new())..) {
            if *q != p.id() {
                break;
            }
            seen.insert(class.clone());
            assert_eq!(
                state.usage(p.id(), &ResourceClass::new_unchecked(class.as_str())),
                *used,
                "usage of {class}"
            );
        }
        if let Some(index) = index {
            let classes: BTreeSet<String> = index
                .by_class
                .keys()
                .map(|c| c.as_str().to_owned())
                .collect();
            assert_eq!(classes, seen, "classes in the usage index");
            assert_eq!(
                Some(index.consumers.iter().copied().collect::<BTreeSet<_>>()).as_ref(),
                holders.get(&p.id()),
                "consumers in the usage index"
            );
        } else {
            assert!(
                seen.is_empty(),
                "no usage index for a provider with allocations"
            );
        }
    }
}

/// The name `class` had before the accepted step `op`. A rename carries a class's
/// inventories and usage over to the new name (Placement refers to classes by id), so
/// what the renamed class was before is found under its old name; compared by name,
/// it would look like an inventory that appeared with its usage out of nothing.
fn name_before<'a>(op: &Op, class: &'a str) -> &'a str {
    match op {
        Op::RenameClass { from, to } if support::class(*to) == class => support::class(*from),
        _ => class,
    }
}

/// (a): after a step, an inventory is above its capacity only if its usage did not go
/// up, and (unless the step changed that inventory) it was above before. "Before" is
/// the same provider's inventory of the same class, followed across a rename.
fn check_no_worse(op: &Op, before: &State, after: &State) {
    for p in after.providers() {
        for (class, inv) in &p.inventories {
            let used = after.usage(p.id(), class);
            if inv.fits(used, 0) {
                continue;
            }
            let old = name_before(op, class.as_str());
            let used_before = before.usage(p.id(), &ResourceClass::new_unchecked(old));
            assert!(
                used <= used_before,
                "{class} on {} is over capacity ({used} > {}) and went up from {used_before}",
                p.uuid(),
                inv.capacity()
            );
            let inv_before = before.provider(p.id()).and_then(|q| q.inventories.get(old));
            if inv_before == Some(inv) {
                assert!(
                    !inv.fits(used_before, 0),
                    "{class} on {} became over capacity ({used} > {})",
                    p.uuid(),
                    inv.capacity()
                );
            }
        }
    }
}

fn over_committed(state: &State) -> bool {
    state.providers().any(|p| {
        p.inventories
            .iter()
            .any(|(c, inv)| !inv.fits(state.usage(p.id(), c), 0))
    })
}

/// Checks what an accepted write did against the model's prediction and the
/// documented consumer and generation rules: a consumer is *touched* when it gets
/// allocations or is emptied of some; a touched consumer's generation goes up by one
/// (a new one starts at 0 before that), and an emptied one is deleted; an untouched
/// one is only created or has its row updated. Providers that receive allocations,
/// and those an emptied consumer leaves, have their generation bumped; no other
/// provider changes.
fn check_write(
    before: &State,
    after: &State,
    expected: &BTreeMap<Uuid, Holdings>,
    writes: &[ConsumerWrite],
) {
    let mut bumped = BTreeSet::new();
    for w in writes {
        let holdings = &expected[&w.consumer];
        bumped.extend(holdings.keys().map(|(p, _)| *p));
        let old = before.consumer(&w.consumer);
        let held = old.is_some_and(|c| !c.allocations.is_empty());
        let touched = held || !holdings.is_empty();
        if holdings.is_empty() && held {
            bumped.extend(old.unwrap().allocations.iter().map(|a| a.provider));
            assert!(
                after.consumer(&w.consumer).is_none(),
                "emptied consumer {} kept",
                w.consumer
            );
            continue;
        }
        let c = after
            .consumer(&w.consumer)
            .unwrap_or_else(|| panic!("consumer {} missing", w.consumer));
        assert_eq!(holdings_of(after, &w.consumer).as_ref(), Some(holdings));
        assert_eq!(
            c.row.generation,
            old.map_or(0, |o| o.row.generation) + u64::from(touched),
            "generation of consumer {}",
            w.consumer
        );
        assert_eq!(
            c.row.consumer_type.as_deref(),
            w.consumer_type
                .as_deref()
                .or_else(|| old.and_then(|o| o.row.consumer_type.as_deref()))
        );
        assert_eq!(*c.row.project_id, *w.project_id);
        assert_eq!(*c.row.user_id, *w.user_id);
    }
    for c in before.consumers() {
        if !expected.contains_key(&c.row.uuid) {
            assert_eq!(after.consumer(&c.row.uuid), Some(c), "bystander changed");
        }
    }
    assert_eq!(
        after.consumers().count(),
        before
            .consumers()
            .filter(|c| !expected.contains_key(&c.row.uuid))
            .count()
            + expected
                .keys()
                .filter(|u| after.consumer(u).is_some())
                .count()
    );
    for p in before.providers() {
        let bump = u64::from(bumped.contains(&p.id()));
        assert_eq!(
            after.provider(p.id()).unwrap().row.generation,
            p.row.generation + bump,
            "generation of provider {}",
            p.uuid()
        );
    }
}

/// Only a consumer's row may change: nothing anyone holds, no usage, no provider.
fn check_harmless(before: &State, after: &State) {
    let holdings = |s: &State| -> BTreeMap<Uuid, Holdings> {
        s.consumers()
            .filter(|c| !c.allocations.is_empty())
            .map(|c| (c.row.uuid, holdings_of(s, &c.row.uuid).unwrap()))
            .collect()
    };
    assert_eq!(holdings(before), holdings(after));
    for p in before.providers() {
        assert_eq!(after.provider(p.id()), Some(p));
        assert_eq!(
            after.provider_usage_index(p.id()),
            before.provider_usage_index(p.id())
        );
    }
    assert_eq!(after.providers().count(), before.providers().count());
}

/// Runs one sequence, checking everything after every step.
fn run(ops: &[Op], stats: &mut Stats) {
    let mut state = State::new();
    for (step, op) in ops.iter().enumerate() {
        let now = step as i64 + 1;
        let writes = match op {
            Op::Write {
                writes,
                keep_duplicates,
            } => Some(consumer_writes(&state, writes, *keep_duplicates)),
            Op::Release(c) => Some(vec![release(*c)]),
            _ => support::derived_writes(&state, op),
        };
        let model = writes.as_ref().map(|w| model_write(&state, w));
        let planned = plan(&state, op, now);
        if let Op::Delete(c) = op {
            let holds = state
                .consumer(&consumer_uuid(*c))
                .is_some_and(|c| !c.allocations.is_empty());
            assert_eq!(planned.is_ok(), holds, "step {step}: delete {planned:?}");
        }
        if let Some(model) = &model {
            assert_eq!(
                planned.is_ok(),
                model.is_ok(),
                "step {step}: rules say {planned:?}, model says {model:?}"
            );
        }
        let changes = match planned {
            // (b): a refused plan is dropped; planning takes `&State`, so the state
            // cannot have changed.
            Err(_) => {
                if model == Some(Err(Refusal::Capacity)) {
                    stats.writes_refused_for_capacity += 1;
                }
                if let Some(Err(why)) = model {
                    *stats.refusals.entry(format!("{why:?}")).or_default() += 1;
                }
                check_invariants(&state);
                continue;
            }
            Ok(changes) => changes,
        };
        let was_over = over_committed(&state);
        let before = state.clone();
        state.apply(&changes);
        check_invariants(&state);
        check_no_worse(op, &before, &state);
        if let (Some(writes), Some(Ok(expected))) = (&writes, &model) {
            check_write(&before, &state, expected, writes);
            let keeps_over = expected.values().flat_map(|h| h.keys()).any(|(p, class)| {
                let inv = state.provider(*p).unwrap().inventories[class.as_str()];
                !inv.fits(
                    state.usage(*p, &ResourceClass::new_unchecked(class.as_str())),
                    0,
                )
            });
            if keeps_over {
                stats.no_worse_writes_on_over_committed += 1;
            }
            stats.writes_accepted += 1;
            if writes.len() > 1 {
                stats.multi_consumer_writes_accepted += 1;
            }
            if was_over {
                stats.accepted_on_over_committed += 1;
            }
        }
        if let Op::Release(c) = op {
            // (c): releasing again changes nothing anyone holds (a consumer that held
            // nothing may be recorded, with nothing, as Placement does).
            let uuid = consumer_uuid(*c);
            if before
                .consumer(&uuid)
                .is_some_and(|c| !c.allocations.is_empty())
            {
                stats.releases_of_held += 1;
            }
            assert!(
                holdings_of(&state, &uuid).unwrap_or_default().is_empty(),
                "released consumer still holds allocations"
            );
            let (_, again) = state
                .plan_allocations(&[release(*c)], Endpoint::Put, now)
                .expect("a second release is accepted");
            let mut twice = state.clone();
            twice.apply(&again);
            check_harmless(&state, &twice);
            check_invariants(&twice);
        }
        if let Op::Delete(c) = op {
            // `DELETE /allocations/{c}`: the consumer is gone, no generation moves,
            // and deleting again is refused (404) without changes.
            let uuid = consumer_uuid(*c);
            assert!(state.consumer(&uuid).is_none());
            for p in before.providers() {
                assert_eq!(
                    state.provider(p.id()).unwrap().row.generation,
                    p.row.generation
                );
            }
            assert!(state.delete_allocations(&uuid).is_err());
        }
        if over_committed(&state) {
            stats.over_committed_states += 1;
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// Claims never over-commit, whatever the sequence (classes are not renamed: see
    /// `renaming_a_class_in_use_keeps_its_inventory`).
    #[test]
    fn claims_never_over_commit(ops in support::ops(80, false)) {
        run(&ops, &mut Stats::default());
    }
}

/// The property is only as good as the cases it sees: over a fixed-seed run, writes
/// must be accepted and refused for capacity, multi-consumer writes accepted,
/// inventories over-committed (by shrinking them under their allocations) and written
/// to while they are.
#[test]
fn the_generator_reaches_the_interesting_cases() {
    let mut runner = TestRunner::deterministic();
    let strategy = support::ops(80, false);
    let mut stats = Stats::default();
    for _ in 0..64 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        run(&ops, &mut stats);
    }
    eprintln!("{stats:#?}");
    assert!(stats.writes_accepted > 250, "{stats:?}");
    assert!(stats.writes_refused_for_capacity > 20, "{stats:?}");
    assert!(stats.multi_consumer_writes_accepted > 40, "{stats:?}");
    assert!(stats.over_committed_states > 20, "{stats:?}");
    assert!(stats.accepted_on_over_committed > 10, "{stats:?}");
    assert!(stats.no_worse_writes_on_over_committed > 5, "{stats:?}");
    assert!(stats.releases_of_held > 3, "{stats:?}");
}

proptest! {
    #![proptest_config(config())]

    /// The same with class renames (the 1.2–1.6 `PUT /resource_classes/{name}`).
    #[test]
    fn claims_never_over_commit_with_renames(ops in support::ops(80, true)) {
        run(&ops, &mut Stats::default());
    }
}

/// What a version of the view shows, in a comparable form.
fn fingerprint(state: &State) -> (Vec<allot_core::Provider>, Vec<allot_core::Consumer>) {
    let mut consumers: Vec<_> = state.consumers().cloned().collect();
    consumers.sort_by_key(|c| c.row.uuid);
    (state.providers().cloned().collect(), consumers)
}

proptest! {
    #![proptest_config(config())]

    /// The host publishes versions of the view and makes the next one by applying
    /// changes to a clone: whatever is applied later, a version kept from before shows
    /// exactly what it showed, and its usage index still matches its records.
    #[test]
    fn older_versions_never_change(ops in support::ops(60, true)) {
        let mut state = State::new();
        let mut kept = Vec::new();
        for (step, op) in ops.iter().enumerate() {
            if let Ok(changes) = plan(&state, op, step as i64 + 1) {
                kept.push((state.clone(), fingerprint(&state)));
                state.apply(&changes);
            }
        }
        for (version, seen) in &kept {
            prop_assert_eq!(&fingerprint(version), seen);
            prop_assert!(version.check_usage_index());
        }
    }
}

/// A custom class (2) on one provider with 4 units, `used` of them held by one consumer:
/// the start of the rename regressions below.
fn class_in_use(used: u64) -> Vec<Op> {
    use support::{InvSpec, WriteSpec};
    let inventory = InvSpec {
        total: 4,
        reserved: 0,
        min_unit: 1,
        max_unit: 4,
        step_size: 1,
        allocation_ratio: 1.0,
    };
    vec![
        Op::CreateClass(2),
        Op::CreateProvider {
            slot: 0,
            parent: None,
        },
        Op::AddInventory {
            slot: 0,
            class: 2,
            inventory,
        },
        Op::Write {
            writes: vec![WriteSpec {
                consumer: 0,
                generation: support::Gen::New,
                consumer_type: None,
                allocations: vec![(0, 2, used)],
            }],
            keep_duplicates: false,
        },
    ]
}

/// Regression: Placement refers to classes by id, so a rename carries the
/// inventories and allocations of the class along. They once stayed under a name that
/// no longer existed (and `delete_class` of the new name, or `create_class` of the old
/// one, then succeeded under them).
#[test]
fn renaming_a_class_in_use_keeps_its_inventory() {
    let mut ops = class_in_use(2);
    ops.push(Op::RenameClass { from: 2, to: 3 });
    run(&ops, &mut Stats::default());
}

/// Regression (found by a long random run, seed in `properties.proptest-regressions`):
/// renaming a class whose inventory is over its capacity. The rename carries the
/// inventory and its usage to the new name; it raises no usage, so it must pass the
/// "no worse" check, which has to follow the class across the rename.
#[test]
fn renaming_an_over_committed_class_is_no_worse() {
    let mut ops = class_in_use(3);
    // Total 1 under a usage of 3.
    ops.push(Op::ShrinkUnder {
        slot: 0,
        class: 2,
        below: 1,
    });
    ops.push(Op::RenameClass { from: 2, to: 3 });
    let mut stats = Stats::default();
    run(&ops, &mut stats);
    assert!(stats.over_committed_states >= 2, "{stats:?}");
}
