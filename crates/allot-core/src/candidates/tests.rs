//! Tests of the candidate search: worked examples, and a comparison with a brute-force
//! enumeration on many small random clouds.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use uuid::Uuid;

use super::filter::Prepared;
use super::*;
use crate::change::Change;
use crate::model::{Allocation, ConsumerRow, Inventory};
use crate::names::ProviderRef;
use crate::names::{ResourceClass, TraitName, SHARING_TRAIT};

/// A cloud built for tests, providers named by short strings.
struct World {
    state: State,
    next: u128,
}

impl World {
    fn new() -> Self {
        let mut state = State::new();
        for t in ["CUSTOM_A", "CUSTOM_B"] {
            state.apply(&[Change::PutTrait(crate::model::TraitRecord {
                name: TraitName::new_unchecked(t),
                created_at: 0,
            })]);
        }
        World { state, next: 1 }
    }

    fn uuid(name: &str) -> Uuid {
        Uuid::new_v5(&Uuid::NAMESPACE_OID, name.as_bytes())
    }

    fn id(&self, name: &str) -> ProviderId {
        self.state.provider_by_name(name).unwrap().id()
    }

    fn provider(&mut self, name: &str, parent: Option<&str>) -> &mut Self {
        let parent = parent.map(|p| ProviderRef::from(Self::uuid(p)));
        let (_, c) = self
            .state
            .create_provider(Self::uuid(name), name, parent, 0)
            .unwrap();
        self.state.apply(&c);
        self
    }

    fn inventory(&mut self, name: &str, class: &str, inv: Inventory) -> &mut Self {
        let id = self.id(name);
        let mut all: Vec<(ResourceClass, Inventory)> = self
            .state
            .provider(id)
            .unwrap()
            .inventories
            .iter()
            .map(|(c, i)| (c.clone(), *i))
            .collect();
        all.push((ResourceClass::new_unchecked(class), inv));
        self.state.apply(&[Change::SetInventories(id, all)]);
        self
    }

    fn total(&mut self, name: &str, class: &str, total: u64) -> &mut Self {
        self.inventory(name, class, Inventory::with_total(total))
    }

    fn traits(&mut self, name: &str, traits: &[&str]) -> &mut Self {
        let id = self.id(name);
        let traits = traits
            .iter()
            .map(|t| TraitName::new_unchecked(*t))
            .collect();
        self.state.apply(&[Change::SetTraits(id, traits)]);
        self
    }

    fn aggregates(&mut self, name: &str, aggs: &[Uuid]) -> &mut Self {
        let id = self.id(name);
        self.state
            .apply(&[Change::SetAggregates(id, aggs.to_vec())]);
        self
    }

    fn allocate(&mut self, name: &str, class: &str, used: u64) -> &mut Self {
        let consumer = Uuid::from_u128(0xc0_0000 + self.next);
        self.next += 1;
        let row = ConsumerRow {
            uuid: consumer,
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation: 0,
            created_at: 0,
            updated_at: 0,
        };
        let allocation = Allocation {
            provider: self.id(name),
            class: ResourceClass::new_unchecked(class),
            used,
        };
        self.state.apply(&[
            Change::PutConsumer {
                row,
                previous_generation: None,
            },
            Change::SetAllocations(consumer, vec![allocation]),
        ]);
        self
    }

    fn name(&self, id: ProviderId) -> String {
        self.state.provider(id).unwrap().row.name.clone()
    }
}

fn group(suffix: &str, resources: &[(&str, u64)]) -> RequestGroup {
    RequestGroup {
        suffix: suffix.into(),
        resources: resources
            .iter()
            .map(|(c, a)| (ResourceClass::requested(c), *a))
            .collect(),
        ..Default::default()
    }
}

fn query(groups: Vec<RequestGroup>) -> CandidateQuery {
    CandidateQuery {
        groups,
        nested_aware: true,
        ..Default::default()
    }
}

fn run(w: &World, q: &CandidateQuery) -> Candidates {
    w.state
        .allocation_candidates(q, &SearchOptions::default())
        .unwrap()
}

/// A candidate as sorted text: "provider:CLASS=amount ..." then "| suffix=providers".
fn show(w: &World, c: &Candidates, q: &CandidateQuery, r: &AllocationRequest) -> String {
    let allocs: Vec<String> = r
        .allocations
        .iter()
        .map(|(id, k, a)| format!("{}:{}={}", w.name(*id), c.class_name(*k), a))
        .collect();
    let maps: Vec<String> = r
        .mappings
        .iter()
        .enumerate()
        .map(|(g, ids)| {
            let names: Vec<String> = ids.iter().map(|id| w.name(*id)).collect();
            format!("{}={}", q.groups[g].suffix, names.join(","))
        })
        .collect();
    format!("{} | {}", allocs.join(" "), maps.join(" "))
}

fn shown(w: &World, q: &CandidateQuery) -> Vec<String> {
    let c = run(w, q);
    let mut v: Vec<String> = c.requests.iter().map(|r| show(w, &c, q, r)).collect();
    v.sort();
    v
}

/// A root with `n` children of one VGPU each.
fn gpu_tree(w: &mut World, root: &str, n: usize) {
    w.provider(root, None).total(root, "VCPU", 64);
    for g in 0..n {
        let child = format!("{root}-gpu{g}");
        w.provider(&child, Some(root)).total(&child, "VGPU", 1);
    }
}

#[test]
fn four_single_vgpu_children_two_groups_give_twelve() {
    let mut w = World::new();
    gpu_tree(&mut w, "cn", 4);
    for isolate in [false, true] {
        let mut q = query(vec![group("1", &[("VGPU", 1)]), group("2", &[("VGPU", 1)])]);
        q.isolate = isolate;
        let got = shown(&w, &q);
        assert_eq!(got.len(), 12, "{got:#?}");
        let sets: BTreeSet<String> = got
            .iter()
            .map(|s| s.split(" | ").next().unwrap().to_owned())
            .collect();
        assert_eq!(sets.len(), 6);
    }
}

#[test]
fn one_class_is_never_split_across_providers() {
    let mut w = World::new();
    gpu_tree(&mut w, "cn", 4);
    assert!(shown(&w, &query(vec![group("", &[("VGPU", 2)])])).is_empty());
    assert_eq!(shown(&w, &query(vec![group("", &[("VGPU", 1)])])).len(), 4);
    // Both classes from the tree, from different providers.
    assert_eq!(
        shown(&w, &query(vec![group("", &[("VCPU", 2), ("VGPU", 1)])])).len(),
        4
    );
}

#[test]
fn wide_tree_limit_and_impossible_requests_are_fast() {
    let mut w = World::new();
    for r in 0..3 {
        gpu_tree(&mut w, &format!("cn{r}"), 16);
    }
    let groups: Vec<RequestGroup> = (1..=8)
        .map(|i| group(&i.to_string(), &[("VGPU", 1)]))
        .collect();
    let mut q = query(groups);
    q.isolate = true;
    q.limit = Some(100);
    let c = run(&w, &q);
    assert_eq!(c.requests.len(), 100);
    let distinct: HashSet<&AllocationRequest> = c.requests.iter().collect();
    assert_eq!(distinct.len(), 100);
    for r in &c.requests {
        assert_eq!(r.allocations.len(), 8);
    }
    // Only the first tree is summarised: 17 providers.
    assert_eq!(c.summaries.len(), 17);

    // Seventeen groups on sixteen devices: nothing, and quickly.
    let groups: Vec<RequestGroup> = (1..=17)
        .map(|i| group(&i.to_string(), &[("VGPU", 1)]))
        .collect();
    for isolate in [true, false] {
        let mut q = query(groups.clone());
        q.isolate = isolate;
        let options = SearchOptions {
            step_budget: 100_000,
            ..Default::default()
        };
        let c = w.state.allocation_candidates(&q, &options).unwrap();
        assert!(c.requests.is_empty());
        assert!(!c.truncated, "decided without exhausting the budget");
    }
}

#[test]
fn distinct_devices_that_cannot_fit_are_refused_without_search() {
    // Sixteen children all different (different usage), seventeen groups.
    let mut w = World::new();
    w.provider("cn", None);
    for g in 0..16 {
        let child = format!("gpu{g}");
        w.provider(&child, Some("cn")).total(&child, "VGPU", 2 + g);
        if g > 0 {
            w.allocate(&child, "VGPU", g);
        }
    }
    let groups: Vec<RequestGroup> = (1..=17)
        .map(|i| group(&i.to_string(), &[("VGPU", 2)]))
        .collect();
    let mut q = query(groups);
    q.isolate = true;
    let options = SearchOptions {
        step_budget: 100_000,
        ..Default::default()
    };
    let c = w.state.allocation_candidates(&q, &options).unwrap();
    assert!(c.requests.is_empty());
    assert!(!c.truncated);
}

#[test]
fn several_classes_of_identical_devices_that_cannot_fit_are_refused_quickly() {
    // Three kinds of device (3, 4 or 5 free), six of each; twenty groups that each
    // need most of a device.
    let mut w = World::new();
    w.provider("cn", None);
    for g in 0..18 {
        let child = format!("gpu{g}");
        w.provider(&child, Some("cn"))
            .total(&child, "VGPU", 3 + (g % 3) as u64);
    }
    let groups: Vec<RequestGroup> = (1..=20)
        .map(|i| group(&i.to_string(), &[("VGPU", 3)]))
        .collect();
    let q = query(groups);
    let options = SearchOptions {
        step_budget: 10_000,
        ..Default::default()
    };
    let c = w.state.allocation_candidates(&q, &options).unwrap();
    assert!(c.requests.is_empty());
    assert!(!c.truncated);
}

#[test]
fn the_bound_applies_without_a_limit_and_within_one() {
    let mut w = World::new();
    gpu_tree(&mut w, "cn", 8);
    let mut q = query(vec![group("1", &[("VGPU", 1)]), group("2", &[("VGPU", 1)])]);
    q.isolate = true;
    let bounded = SearchOptions {
        max_candidates: 10,
        ..Default::default()
    };
    let c = w.state.allocation_candidates(&q, &bounded).unwrap();
    assert_eq!((c.requests.len(), c.truncated), (10, true));
    q.limit = Some(5);
    let c = w.state.allocation_candidates(&q, &bounded).unwrap();
    assert_eq!((c.requests.len(), c.truncated), (5, false));
    q.limit = Some(500);
    let c = w.state.allocation_candidates(&q, &bounded).unwrap();
    assert_eq!((c.requests.len(), c.truncated), (10, true));
    q.limit = None;
    assert_eq!(run(&w, &q).requests.len(), 56);
    assert!(!run(&w, &q).truncated);
}

/// A search cut short by the bound says how many roots it visited, of how many;
/// one that ran to the end or to the request's limit says nothing.
#[test]
fn a_search_cut_short_says_how_far_it_got() {
    let mut w = World::new();
    for i in 0..10 {
        let name = format!("cn{i}");
        w.provider(&name, None).total(&name, "VCPU", 4);
    }
    let mut q = query(vec![group("", &[("VCPU", 1)])]);
    let bounded = SearchOptions {
        max_candidates: 3,
        ..Default::default()
    };
    let c = w.state.allocation_candidates(&q, &bounded).unwrap();
    assert_eq!(c.requests.len(), 3);
    let explored = Explored {
        roots_explored: 3,
        roots: 10,
    };
    assert_eq!(c.explored, Some(explored));
    // Weighed with a limit, the walk visits the roots best bound first; each root
    // here has one candidate, so the bound stops it at the fourth.
    q.weigh.sort = Some(Sort::Spread);
    q.limit = Some(4);
    let c = w.state.allocation_candidates(&q, &bounded).unwrap();
    assert_eq!(
        (c.truncated, c.explored),
        (
            true,
            Some(Explored {
                roots_explored: 3,
                roots: 10
            })
        )
    );
    q.weigh.sort = None;
    q.limit = Some(2);
    assert_eq!(
        w.state
            .allocation_candidates(&q, &bounded)
            .unwrap()
            .explored,
        None
    );
    q.limit = None;
    assert_eq!(run(&w, &q).explored, None);
}

fn shared_world() -> World {
    // cn1 (VCPU), cn2 (VCPU, DISK), ss (DISK, sharing) with cn1 and cn2 in agg A.
    let a = Uuid::from_u128(0xa);
    let mut w = World::new();
    w.provider("cn1", None)
        .total("cn1", "VCPU", 8)
        .aggregates("cn1", &[a]);
    w.provider("cn2", None)
        .total("cn2", "VCPU", 8)
        .total("cn2", "DISK_GB", 100)
        .aggregates("cn2", &[a]);
    w.provider("ss", None)
        .total("ss", "DISK_GB", 1000)
        .traits("ss", &[SHARING_TRAIT])
        .aggregates("ss", &[a]);
    w
}

#[test]
fn sharing_providers() {
    let w = shared_world();
    let q = query(vec![group("", &[("VCPU", 1), ("DISK_GB", 10)])]);
    assert_eq!(
        shown(&w, &q),
        vec![
            "cn1:VCPU=1 ss:DISK_GB=10 | =cn1,ss",
            "cn2:VCPU=1 cn2:DISK_GB=10 | =cn2",
            "cn2:VCPU=1 ss:DISK_GB=10 | =cn2,ss",
        ]
    );
    // A sharing provider that satisfies a whole group is one answer, not one per
    // anchor it is tied to.
    let q = query(vec![group("1", &[("DISK_GB", 500)])]);
    assert_eq!(shown(&w, &q), vec!["ss:DISK_GB=500 | 1=ss"]);
    let q = query(vec![group("", &[("DISK_GB", 500)])]);
    assert_eq!(shown(&w, &q), vec!["ss:DISK_GB=500 | =ss"]);
    // Summaries: every tree allocated from.
    let c = run(&w, &query(vec![group("", &[("VCPU", 1), ("DISK_GB", 10)])]));
    assert_eq!(c.summaries.len(), 3);
}

// Issue 11: sharing providers that are part of trees. Each world below was run on
// the real Placement 16.0, plain and with the two bugs of docs/api.md mended
// (tests/differential/placement_patched.py); these tests hold the mended answers.

/// Seed 51, world 29 of the differential test, minimized: a tree tied to two pools
/// only through its NUMA child's aggregate.
fn pools_tied_through_a_child() -> World {
    let a = Uuid::from_u128(0xa);
    let mut w = World::new();
    w.provider("cn", None).provider("numa", Some("cn"));
    w.total("numa", "MEMORY_MB", 4096).aggregates("numa", &[a]);
    for ss in ["ss0", "ss1"] {
        w.provider(ss, None)
            .total(ss, "IPV4_ADDRESS", 8)
            .traits(ss, &[SHARING_TRAIT])
            .aggregates(ss, &[a]);
    }
    w
}

#[test]
fn a_child_aggregate_ties_the_whole_tree_to_a_pool() {
    let w = pools_tied_through_a_child();
    // Placement keeps the pools' unsuffixed-group answers on one root only, picked by
    // its set order (here a pool's own root), and so answers nothing; see docs/api.md.
    let mut q = query(vec![
        group("3", &[("MEMORY_MB", 512)]),
        group("", &[("IPV4_ADDRESS", 1)]),
    ]);
    q.isolate = true;
    assert_eq!(
        shown(&w, &q),
        vec![
            "numa:MEMORY_MB=512 ss0:IPV4_ADDRESS=1 | 3=numa =ss0",
            "numa:MEMORY_MB=512 ss1:IPV4_ADDRESS=1 | 3=numa =ss1",
        ]
    );
    // The pools alone: one answer each, though three roots (cn, ss0, ss1) anchor them.
    let q = query(vec![group("", &[("IPV4_ADDRESS", 1)])]);
    assert_eq!(
        shown(&w, &q),
        vec!["ss0:IPV4_ADDRESS=1 | =ss0", "ss1:IPV4_ADDRESS=1 | =ss1"]
    );
}

#[test]
fn a_pool_that_is_not_a_root_serves_the_trees_tied_to_it() {
    // cn (VCPU, agg A); x (no inventory) > ss (DISK_GB, sharing, agg A).
    let a = Uuid::from_u128(0xa);
    let mut w = World::new();
    w.provider("cn", None)
        .total("cn", "VCPU", 8)
        .aggregates("cn", &[a]);
    w.provider("x", None).provider("ss", Some("x"));
    w.total("ss", "DISK_GB", 100)
        .traits("ss", &[SHARING_TRAIT])
        .aggregates("ss", &[a]);
    // Placement answers 500 here (KeyError: it looks for the summary of ss among the
    // trees of the roots it found, and x is not one); see docs/api.md.
    let q = query(vec![group("", &[("VCPU", 1), ("DISK_GB", 10)])]);
    assert_eq!(shown(&w, &q), vec!["cn:VCPU=1 ss:DISK_GB=10 | =cn,ss"]);
    let c = run(&w, &q);
    let names: BTreeSet<String> = c.summaries.iter().map(|id| w.name(*id)).collect();
    assert_eq!(names, ["cn", "ss", "x"].map(String::from).into());
    // Alone it is one answer; in a suffixed group it lands on cn's candidates.
    let q = query(vec![group("", &[("DISK_GB", 10)])]);
    assert_eq!(shown(&w, &q), vec!["ss:DISK_GB=10 | =ss"]);
    let q = query(vec![
        group("", &[("VCPU", 1)]),
        group("1", &[("DISK_GB", 10)]),
    ]);
    assert_eq!(shown(&w, &q), vec!["cn:VCPU=1 ss:DISK_GB=10 | =cn 1=ss"]);
}

#[test]
fn a_pool_with_children_shares_only_itself() {
    // cn (VCPU, agg A); ss (DISK_GB, sharing, agg A) > ssc (MEMORY_MB).
    let a = Uuid::from_u128(0xa);
    let mut w = World::new();
    w.provider("cn", None)
        .total("cn", "VCPU", 8)
        .aggregates("cn", &[a]);
    w.provider("ss", None).provider("ssc", Some("ss"));
    w.total("ss", "DISK_GB", 100)
        .traits("ss", &[SHARING_TRAIT])
        .aggregates("ss", &[a]);
    w.total("ssc", "MEMORY_MB", 1024);
    let q = query(vec![group("", &[("VCPU", 1), ("DISK_GB", 10)])]);
    assert_eq!(shown(&w, &q), vec!["cn:VCPU=1 ss:DISK_GB=10 | =cn,ss"]);
    // The pool's own tree is a tree like any other.
    let q = query(vec![group("", &[("MEMORY_MB", 1), ("DISK_GB", 10)])]);
    assert_eq!(
        shown(&w, &q),
        vec!["ss:DISK_GB=10 ssc:MEMORY_MB=1 | =ss,ssc"]
    );
    // Its child does not share: it never serves cn's tree.
    let q = query(vec![
        group("", &[("VCPU", 1)]),
        group("1", &[("MEMORY_MB", 1)]),
    ]);
    assert!(shown(&w, &q).is_empty());
    // The pool anchored on its own tree, with its child in a suffixed group. Placement
    // answers nothing when its set order keeps the pool's answer on cn (it does here).
    let q = query(vec![
        group("", &[("DISK_GB", 10)]),
        group("1", &[("MEMORY_MB", 1)]),
    ]);
    assert_eq!(
        shown(&w, &q),
        vec!["ss:DISK_GB=10 ssc:MEMORY_MB=1 | =ss 1=ssc"]
    );
    let q = query(vec![
        group("", &[("DISK_GB", 10)]),
        group("1", &[("VCPU", 1)]),
    ]);
    assert_eq!(shown(&w, &q), vec!["cn:VCPU=1 ss:DISK_GB=10 | =ss 1=cn"]);
}

#[test]
fn one_class_in_two_groups_is_asked_for_exactly_once_each() {
    // cn (VCPU, agg A); ss and ss2 (DISK_GB, sharing, agg A). Placement 16.0 answers
    // ss:DISK_GB=14 with ss2:DISK_GB=4 (18 in all for a request of 14): it adds the
    // unsuffixed group's amount into an object its other candidates share; see
    // docs/api.md, "Differences".
    let a = Uuid::from_u128(0xa);
    let mut w = World::new();
    w.provider("cn", None)
        .total("cn", "VCPU", 8)
        .aggregates("cn", &[a]);
    for ss in ["ss", "ss2"] {
        w.provider(ss, None)
            .total(ss, "DISK_GB", 100)
            .traits(ss, &[SHARING_TRAIT])
            .aggregates(ss, &[a]);
    }
    let q = query(vec![
        group("", &[("DISK_GB", 10), ("VCPU", 1)]),
        group("1", &[("DISK_GB", 4)]),
    ]);
    assert_eq!(
        shown(&w, &q),
        vec![
            "cn:VCPU=1 ss2:DISK_GB=14 | =cn,ss2 1=ss2",
            "cn:VCPU=1 ss:DISK_GB=10 ss2:DISK_GB=4 | =cn,ss 1=ss2",
            "cn:VCPU=1 ss:DISK_GB=14 | =cn,ss 1=ss",
            "cn:VCPU=1 ss:DISK_GB=4 ss2:DISK_GB=10 | =cn,ss2 1=ss",
        ]
    );
}

#[test]
fn amounts_of_several_groups_add_up() {
    let mut w = World::new();
    w.provider("cn", None).total("cn", "VCPU", 4);
    let q = query(vec![group("", &[("VCPU", 2)]), group("1", &[("VCPU", 2)])]);
    assert_eq!(shown(&w, &q), vec!["cn:VCPU=4 | =cn 1=cn"]);
    let q = query(vec![group("", &[("VCPU", 3)]), group("1", &[("VCPU", 2)])]);
    assert!(shown(&w, &q).is_empty());
    // max_unit applies to the sum.
    let mut w = World::new();
    w.provider("cn", None).inventory(
        "cn",
        "VCPU",
        Inventory {
            max_unit: 3,
            ..Inventory::with_total(8)
        },
    );
    let q = query(vec![group("", &[("VCPU", 2)]), group("1", &[("VCPU", 2)])]);
    assert!(shown(&w, &q).is_empty());
}

#[test]
fn names_are_checked_in_placement_order() {
    let w = shared_world();
    let err = |q: &CandidateQuery| {
        w.state
            .allocation_candidates(q, &SearchOptions::default())
            .unwrap_err()
            .to_string()
    };
    let q = query(vec![group("", &[("VCPU", 1), ("NOPE", 1)])]);
    assert_eq!(
        err(&q),
        "Invalid resource class in resources parameter: No such resource class NOPE."
    );
    let mut g = group("", &[("VCPU", 1)]);
    g.required = vec![vec![TraitName::requested("CUSTOM_NOPE")]];
    assert_eq!(err(&query(vec![g])), "No such trait(s): CUSTOM_NOPE.");
    // An earlier group with no candidate makes the answer empty instead.
    let q = query(vec![
        group("1", &[("VCPU", 100)]),
        group("2", &[("NOPE", 1)]),
    ]);
    assert!(run(&w, &q).requests.is_empty());
    // A member_of nobody is in, before the traits of the same group.
    let mut g = group("", &[("VCPU", 1)]);
    g.member_of = vec![vec![Uuid::from_u128(0xdead)]];
    g.forbidden = vec![TraitName::requested("CUSTOM_NOPE")];
    assert!(run(&w, &query(vec![g])).requests.is_empty());
    // But not before the classes.
    let mut g = group("", &[("NOPE", 1)]);
    g.member_of = vec![vec![Uuid::from_u128(0xdead)]];
    assert!(err(&query(vec![g])).contains("NOPE"));
    // root_required: names first, then "no root has them".
    let mut q = query(vec![group("", &[("NOPE", 1)])]);
    q.root_required = vec![TraitName::requested("HW_NUMA_ROOT")];
    assert!(run(&w, &q).requests.is_empty());
    q.root_required = vec![TraitName::requested("CUSTOM_NOPE")];
    assert_eq!(err(&q), "No such trait(s): CUSTOM_NOPE.");
    // Text that is no name is refused as an unknown name, at the same step.
    let long = "A".repeat(crate::names::MAX_NAME_LEN + 1);
    let q = query(vec![group("", &[("VCPU", 1), ("vcpu", 1), (&long, 1)])]);
    assert_eq!(
        err(&q),
        "Invalid resource class in resources parameter: No such resource class vcpu."
    );
    let mut g = group("", &[("VCPU", 1)]);
    g.forbidden = vec![TraitName::requested("not a trait")];
    assert_eq!(err(&query(vec![g])), "No such trait(s): not a trait.");
    let q = query(vec![
        group("1", &[("VCPU", 100)]),
        group("2", &[(long.as_str(), 1)]),
    ]);
    assert!(run(&w, &q).requests.is_empty());
}

#[test]
fn nested_unaware_uses_one_provider_per_tree() {
    let mut w = World::new();
    w.provider("cn", None).total("cn", "VCPU", 8);
    w.provider("pf", Some("cn")).total("pf", "SRIOV_NET_VF", 8);
    let mut q = query(vec![group("", &[("VCPU", 1), ("SRIOV_NET_VF", 1)])]);
    assert_eq!(run(&w, &q).requests.len(), 1);
    q.nested_aware = false;
    assert!(run(&w, &q).requests.is_empty());
    let mut q = query(vec![group("", &[("SRIOV_NET_VF", 1)])]);
    q.nested_aware = false;
    let c = run(&w, &q);
    assert_eq!(c.requests.len(), 1);
    assert_eq!(c.summaries, vec![w.id("pf")]);
}

#[test]
fn random_sampling_returns_valid_distinct_candidates() {
    let mut w = World::new();
    for r in 0..4 {
        gpu_tree(&mut w, &format!("cn{r}"), 6);
    }
    let groups: Vec<RequestGroup> = (1..=3)
        .map(|i| group(&i.to_string(), &[("VGPU", 1)]))
        .collect();
    let mut q = query(groups);
    q.isolate = true;
    let all: HashSet<AllocationRequest> = run(&w, &q).requests.into_iter().collect();
    assert_eq!(all.len(), 4 * 6 * 5 * 4);
    q.limit = Some(10);
    let mut roots_seen = BTreeSet::new();
    for seed in 0..20 {
        let options = SearchOptions {
            random_seed: Some(seed),
            ..Default::default()
        };
        let c = w.state.allocation_candidates(&q, &options).unwrap();
        assert_eq!(c.requests.len(), 10);
        let distinct: HashSet<&AllocationRequest> = c.requests.iter().collect();
        assert_eq!(distinct.len(), 10);
        for r in &c.requests {
            assert!(all.contains(r));
            roots_seen.insert(w.state.provider(r.allocations[0].0).unwrap().row.root);
        }
    }
    assert_eq!(roots_seen.len(), 4, "samples come from every tree");
}

// ---------------------------------------------------------------------------
// The brute-force reference.

/// Every candidate by trying every provider for every slot, with the rules written
/// out plainly, as sorted text.
fn brute_force(state: &State, q: &CandidateQuery) -> BTreeSet<String> {
    let prep = Prepared::new(state, q);
    let mut out = BTreeSet::new();
    if prep.hopeless() {
        return out;
    }
    for anchor in prep.anchors() {
        let Some(at) = prep.slots_at(anchor) else {
            continue;
        };
        let slots = &at.slots;
        let mut pick = vec![0usize; slots.len()];
        loop {
            let chosen: Vec<ProviderId> = slots
                .iter()
                .zip(&pick)
                .map(|(s, &i)| at.providers[s.options[i]].id())
                .collect();
            if let Some(text) = judge(state, q, &prep, slots, &chosen) {
                out.insert(text);
            }
            // Odometer; done when the first slot wraps.
            let mut i = slots.len();
            let mut done = slots.is_empty();
            while i > 0 {
                i -= 1;
                pick[i] += 1;
                if pick[i] < slots[i].options.len() {
                    break;
                }
                pick[i] = 0;
                if i == 0 {
                    done = true;
                }
            }
            if done {
                break;
            }
        }
    }
    out
}

fn judge(
    state: &State,
    q: &CandidateQuery,
    prep: &Prepared<'_, '_>,
    slots: &[filter::Slot],
    chosen: &[ProviderId],
) -> Option<String> {
    // Isolation.
    if q.isolate {
        let granular: Vec<ProviderId> = slots
            .iter()
            .zip(chosen)
            .filter(|(s, _)| s.granular)
            .map(|(_, p)| *p)
            .collect();
        let distinct: BTreeSet<_> = granular.iter().collect();
        if distinct.len() != granular.len() {
            return None;
        }
    }
    // Capacity of the sums.
    let mut sums: BTreeMap<(ProviderId, usize), u64> = BTreeMap::new();
    for (s, p) in slots.iter().zip(chosen) {
        for &(k, a) in &s.demands {
            *sums.entry((*p, k)).or_default() += a;
        }
    }
    for (&(p, k), &sum) in &sums {
        let provider = state.provider(p).unwrap();
        let inv = provider.inventories.get(prep.classes[k])?;
        if !inv.fits(state.usage(p, prep.classes[k]), sum) || sum > inv.max_unit {
            return None;
        }
    }
    // Required traits of the unsuffixed group, together.
    if let Some(gi) = q.groups.iter().position(|g| g.suffix.is_empty()) {
        let traits: BTreeSet<&str> = slots
            .iter()
            .zip(chosen)
            .filter(|(s, _)| s.group == gi)
            .flat_map(|(_, p)| {
                state
                    .provider(*p)
                    .unwrap()
                    .traits
                    .iter()
                    .map(|t| t.as_str())
            })
            .collect();
        if !q.groups[gi]
            .required
            .iter()
            .all(|any| any.iter().any(|t| traits.contains(t.as_str())))
        {
            return None;
        }
    }
    // same_subtree.
    for set in &q.same_subtrees {
        let ids: BTreeSet<ProviderId> = slots
            .iter()
            .zip(chosen)
            .filter(|(s, _)| set.contains(&q.groups[s.group].suffix))
            .map(|(_, p)| *p)
            .collect();
        let ancestors = |mut p: ProviderId| {
            let mut v = vec![p];
            while let Some(parent) = state.provider(p).unwrap().row.parent {
                v.push(parent);
                p = parent;
            }
            v
        };
        if ids.len() > 1
            && !ids
                .iter()
                .any(|top| ids.iter().all(|p| ancestors(*p).contains(top)))
        {
            return None;
        }
    }
    // One provider per tree.
    if prep.one_provider_per_tree {
        let used: BTreeSet<ProviderId> = sums.keys().map(|(p, _)| *p).collect();
        let roots: BTreeSet<ProviderId> = used
            .iter()
            .map(|p| state.provider(*p).unwrap().row.root)
            .collect();
        if roots.len() != used.len() {
            return None;
        }
    }
    let mut maps: Vec<BTreeSet<ProviderId>> = vec![BTreeSet::new(); q.groups.len()];
    for (s, p) in slots.iter().zip(chosen) {
        maps[s.group].insert(*p);
    }
    let allocs: Vec<String> = sums
        .iter()
        .map(|((p, k), a)| format!("{}:{}={}", p.0, prep.classes[*k], a))
        .collect();
    let maps: Vec<String> = maps
        .iter()
        .map(|m| {
            m.iter()
                .map(|p| p.0.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    Some(format!("{} | {}", allocs.join(" "), maps.join(" ")))
}

fn searched(state: &State, q: &CandidateQuery) -> BTreeSet<String> {
    let c = state
        .allocation_candidates(q, &SearchOptions::default())
        .unwrap();
    let texts: Vec<String> = c
        .requests
        .iter()
        .map(|r| {
            let allocs: Vec<String> = r
                .allocations
                .iter()
                .map(|(p, k, a)| format!("{}:{}={}", p.0, c.classes[*k], a))
                .collect();
            let maps: Vec<String> = r
                .mappings
                .iter()
                .map(|m| {
                    m.iter()
                        .map(|p| p.0.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            format!("{} | {}", allocs.join(" "), maps.join(" "))
        })
        .collect();
    let set: BTreeSet<String> = texts.iter().cloned().collect();
    assert_eq!(set.len(), texts.len(), "no candidate twice");
    set
}

/// A random small cloud: a few trees of depth up to 3, many identical leaves, some
/// sharing providers, some usage.
fn random_world(rng: &mut Rng) -> World {
    let aggs = [Uuid::from_u128(0xa1), Uuid::from_u128(0xa2)];
    let classes = ["VCPU", "VGPU", "DISK_GB"];
    let traits = ["CUSTOM_A", "CUSTOM_B", "HW_NUMA_ROOT"];
    let mut w = World::new();
    let mut n = 0;
    let mut name = || {
        n += 1;
        format!("p{n}")
    };
    for _ in 0..1 + rng.below(3) {
        let root = name();
        w.provider(&root, None);
        let mut level = vec![root];
        for _depth in 0..rng.below(3) {
            let mut next = Vec::new();
            for parent in &level {
                // Often several identical children.
                let kids = rng.below(4);
                let shape = rng.below(3);
                for _ in 0..kids {
                    let child = name();
                    w.provider(&child, Some(parent));
                    if shape > 0 {
                        w.total(&child, classes[shape], 1 + (rng.below(3) as u64));
                    }
                    next.push(child);
                }
            }
            level = next;
        }
    }
    for _ in 0..rng.below(3) {
        let s = name();
        w.provider(&s, None)
            .total(&s, "DISK_GB", 1 + rng.below(4) as u64)
            .traits(&s, &[SHARING_TRAIT]);
        let a = aggs[rng.below(2)];
        w.aggregates(&s, &[a]);
    }
    // Sprinkle inventories, traits, aggregates and usage.
    let names: Vec<String> = w.state.providers().map(|p| p.row.name.clone()).collect();
    for name in &names {
        if rng.below(2) == 0 {
            let class = classes[rng.below(3)];
            if !w
                .state
                .provider_by_name(name)
                .unwrap()
                .inventories
                .contains_key(class)
            {
                w.total(name, class, 1 + rng.below(4) as u64);
            }
        }
        if rng.below(3) == 0
            && !w
                .state
                .provider_by_name(name)
                .unwrap()
                .traits
                .contains(SHARING_TRAIT)
        {
            w.traits(name, &[traits[rng.below(3)]]);
        }
        if rng.below(4) == 0 {
            let a = aggs[rng.below(2)];
            let mut existing: Vec<Uuid> = w
                .state
                .provider_by_name(name)
                .unwrap()
                .aggregates
                .iter()
                .copied()
                .collect();
            existing.push(a);
            existing.sort();
            existing.dedup();
            w.aggregates(name, &existing);
        }
        let invs: Vec<String> = w
            .state
            .provider_by_name(name)
            .unwrap()
            .inventories
            .keys()
            .map(|c| c.as_str().to_owned())
            .collect();
        for class in invs {
            if rng.below(5) == 0 {
                w.allocate(name, &class, 1);
            }
        }
    }
    w
}

fn random_query(rng: &mut Rng, w: &World) -> CandidateQuery {
    let classes = ["VCPU", "VGPU", "DISK_GB"];
    let traits = ["CUSTOM_A", "CUSTOM_B", "HW_NUMA_ROOT"];
    let aggs = [Uuid::from_u128(0xa1), Uuid::from_u128(0xa2)];
    let mut groups = Vec::new();
    if rng.below(2) == 0 {
        let mut g = group("", &[]);
        for c in classes {
            if rng.below(2) == 0 {
                g.resources
                    .push((ResourceClass::requested(c), 1 + rng.below(2) as u64));
            }
        }
        if g.resources.is_empty() {
            g.resources.push((ResourceClass::requested("VGPU"), 1));
        }
        if rng.below(5) == 0 {
            g.required
                .push(vec![TraitName::requested(traits[rng.below(3)])]);
        }
        if rng.below(6) == 0 {
            g.forbidden.push(TraitName::requested(traits[rng.below(3)]));
        }
        if rng.below(6) == 0 {
            g.member_of.push(vec![aggs[rng.below(2)]]);
        }
        groups.push(g);
    }
    let n = rng.below(4) + usize::from(groups.is_empty());
    for i in 0..n {
        let mut g = group(&format!("_{i}"), &[]);
        if rng.below(6) > 0 {
            g.resources.push((
                ResourceClass::requested(classes[rng.below(3)]),
                1 + rng.below(2) as u64,
            ));
        } else {
            g.required
                .push(vec![TraitName::requested(traits[rng.below(3)])]);
        }
        if rng.below(5) == 0 {
            g.required.push(vec![
                TraitName::requested(traits[rng.below(3)]),
                TraitName::requested(traits[rng.below(3)]),
            ]);
        }
        if rng.below(6) == 0 {
            g.forbidden.push(TraitName::requested(traits[rng.below(3)]));
        }
        if rng.below(6) == 0 {
            g.member_of.push(vec![aggs[rng.below(2)]]);
        }
        if rng.below(8) == 0 {
            let names: Vec<String> = w.state.providers().map(|p| p.row.name.clone()).collect();
            let pick = &names[rng.below(names.len())];
            g.in_tree = Some(World::uuid(pick).into());
        }
        groups.push(g);
    }
    let suffixes: Vec<String> = groups
        .iter()
        .filter(|g| !g.suffix.is_empty())
        .map(|g| g.suffix.clone())
        .collect();
    let mut same_subtrees = Vec::new();
    let resourceless: Vec<String> = groups
        .iter()
        .filter(|g| g.resources.is_empty())
        .map(|g| g.suffix.clone())
        .collect();
    if !resourceless.is_empty() || rng.below(3) == 0 {
        let mut set: Vec<String> = resourceless;
        for s in &suffixes {
            if rng.below(2) == 0 && !set.contains(s) {
                set.push(s.clone());
            }
        }
        same_subtrees.push(set);
    }
    CandidateQuery {
        groups,
        isolate: rng.below(2) == 0,
        limit: None,
        root_required: Vec::new(),
        root_forbidden: Vec::new(),
        same_subtrees,
        nested_aware: rng.below(5) > 0,
        now: 0,
        weigh: Weigh::default(),
    }
}

#[test]
fn search_agrees_with_brute_force() {
    // CANDIDATES_SEED=n runs other cases.
    let seed = std::env::var("CANDIDATES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let mut rng = Rng::new(seed);
    let mut nonempty = 0;
    let mut big = 0;
    for case in 0..3000 {
        let w = random_world(&mut rng);
        let q = random_query(&mut rng, &w);
        let want = brute_force(&w.state, &q);
        let got = searched(&w.state, &q);
        if !want.is_empty() {
            nonempty += 1;
        }
        big = big.max(want.len());
        assert_eq!(got, want, "case {case}: {q:#?}");
    }
    eprintln!("{nonempty} cases with candidates, at most {big}");
    assert!(nonempty > 400, "the cases exercise the search ({nonempty})");
    assert!(big > 50);
}

#[test]
fn resourceless_group_does_not_skip_unknown_class_error() {
    // Placement 16.0 reaches the groups in query-string order and stops at the first
    // that matches no provider; a resourceless group matches every provider with its
    // traits, so the unknown class of the next group is still a 400.
    let mut w = World::new();
    w.provider("root", None)
        .total("root", "VCPU", 4)
        .traits("root", &["COMPUTE_VOLUME_MULTI_ATTACH"]);
    let mut traits_only = group("1", &[]);
    traits_only.required = vec![vec![TraitName::requested("COMPUTE_VOLUME_MULTI_ATTACH")]];
    let mut q = query(vec![traits_only, group("_ACCEL", &[("CUSTOM_NOPE", 3)])]);
    q.same_subtrees = vec![vec!["_ACCEL".into(), "1".into()]];
    let err = w
        .state
        .allocation_candidates(&q, &SearchOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE."
    );
    // Without a provider with the trait, the resourceless group matches nothing and
    // the answer is empty before the unknown class is reached.
    w.traits("root", &[]);
    assert!(run(&w, &q).requests.is_empty());
}

/// Weighing (issue 24) only reorders: for random worlds and queries, every `sort` and
/// `prefer` gives the set of candidates the search gives unweighed, in the order the
/// keys say, and `limit` takes the first of that order.
#[test]
fn weighing_only_reorders() {
    let mut rng = Rng::new(11);
    let traits = ["CUSTOM_A", "CUSTOM_B", "HW_NUMA_ROOT"];
    let mut reordered = 0;
    for case in 0..1500 {
        let w = random_world(&mut rng);
        let q = random_query(&mut rng, &w);
        let plain = searched(&w.state, &q);
        for sort in [
            None,
            Some(Sort::Pack),
            Some(Sort::Spread),
            Some(Sort::Random(case)),
        ] {
            let mut weighed = q.clone();
            weighed.weigh = Weigh {
                sort,
                prefer: (0..rng.below(3))
                    .map(|_| TraitName::requested(traits[rng.below(3)]))
                    .collect(),
            };
            if !weighed.weigh.is_set() {
                continue;
            }
            assert_eq!(
                searched(&w.state, &weighed),
                plain,
                "case {case}: {weighed:#?}"
            );
            let all = run(&w, &weighed);
            let firsts: Vec<String> = all
                .requests
                .iter()
                .map(|r| show(&w, &all, &weighed, r))
                .collect();
            let unweighed = run(&w, &q);
            if all.requests != unweighed.requests {
                reordered += 1;
            }
            // The keys are in order.
            let keys: Vec<(usize, Load)> = all
                .requests
                .iter()
                .map(|r| {
                    let preferred = weighed
                        .weigh
                        .prefer
                        .iter()
                        .filter_map(|t| t.name())
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .filter(|t| {
                            r.allocations
                                .iter()
                                .map(|a| a.0)
                                .chain(r.mappings.iter().flatten().copied())
                                .any(|id| w.state.provider(id).unwrap().traits.contains(t.as_str()))
                        })
                        .count();
                    (preferred, load(&w.state, &all.classes, r, 0))
                })
                .collect();
            for pair in keys.windows(2) {
                let ((p0, l0), (p1, l1)) = (pair[0], pair[1]);
                assert!(p0 >= p1, "case {case}: prefer out of order {keys:?}");
                if p0 == p1 {
                    match sort {
                        Some(Sort::Pack) => assert!(l0 >= l1, "case {case}: pack {keys:?}"),
                        Some(Sort::Spread) => assert!(l0 <= l1, "case {case}: spread {keys:?}"),
                        _ => {}
                    }
                }
            }
            // A limit takes the first of the weighed order.
            if firsts.len() > 1 {
                let mut limited = weighed.clone();
                limited.limit = Some(firsts.len() / 2);
                let some = run(&w, &limited);
                let shown: Vec<String> = some
                    .requests
                    .iter()
                    .map(|r| show(&w, &some, &limited, r))
                    .collect();
                if !matches!(sort, Some(Sort::Random(_))) {
                    assert_eq!(shown, firsts[..firsts.len() / 2], "case {case}");
                } else {
                    assert_eq!(shown.len(), firsts.len() / 2);
                }
            }
        }
    }
    assert!(
        reordered > 200,
        "the cases exercise the order ({reordered})"
    );
}

/// `pack` fills the most used provider first, `spread` the least; `prefer` ranks the
/// providers with the trait first, whatever the load; an unknown preferred trait is
/// refused as Placement refuses an unknown required one.
#[test]
fn pack_spread_and_prefer_on_three_hosts() {
    let mut w = World::new();
    for (name, used) in [("a", 2), ("b", 6), ("c", 0)] {
        w.provider(name, None).total(name, "VCPU", 8);
        if used > 0 {
            w.allocate(name, "VCPU", used);
        }
    }
    w.traits("c", &["CUSTOM_A"]);
    let order = |weigh: Weigh| -> Vec<String> {
        let mut q = query(vec![group("", &[("VCPU", 1)])]);
        q.weigh = weigh;
        let c = run(&w, &q);
        c.requests
            .iter()
            .map(|r| {
                w.state
                    .provider(r.allocations[0].0)
                    .unwrap()
                    .row
                    .name
                    .clone()
            })
            .collect()
    };
    let sorted = |sort| Weigh {
        sort: Some(sort),
        prefer: Vec::new(),
    };
    assert_eq!(order(Weigh::default()), ["a", "b", "c"]);
    assert_eq!(order(sorted(Sort::Pack)), ["b", "a", "c"]);
    assert_eq!(order(sorted(Sort::Spread)), ["c", "a", "b"]);
    let fast = vec![TraitName::requested("CUSTOM_A")];
    let prefer_fast = Weigh {
        sort: Some(Sort::Pack),
        prefer: fast,
    };
    assert_eq!(order(prefer_fast), ["c", "b", "a"]);
    let mut q = query(vec![group("", &[("VCPU", 1)])]);
    q.weigh.prefer = vec![TraitName::requested("CUSTOM_NOPE")];
    let e = w
        .state
        .allocation_candidates(&q, &SearchOptions::default())
        .unwrap_err();
    assert_eq!(e.to_string(), "No such trait(s): CUSTOM_NOPE.");
}

/// Headroom (issue 24) is exact by definition: for random worlds (nested trees,
/// sharing providers, usage) and random shapes, it equals the number of successive
/// pick-and-claims of the shape that succeed, and each anchor's share is where those
/// picks landed.
#[test]
fn headroom_equals_the_picks_that_succeed() {
    use crate::ops::pick::{Affinity, Pick};
    let mut rng = Rng::new(23);
    let mut nonzero = 0;
    let mut several = 0;
    for case in 0..1500 {
        let w = random_world(&mut rng);
        let q = random_query(&mut rng, &w);
        let options = SearchOptions::default();
        let Ok(headroom) = w.state.headroom(&q, &options) else {
            assert!(w.state.allocation_candidates(&q, &options).is_err());
            continue;
        };
        let mut state = w.state.clone();
        let mut picked = 0u64;
        let mut by_root: std::collections::BTreeMap<ProviderId, u64> = Default::default();
        loop {
            let pick = Pick {
                query: q.clone(),
                options,
                claims: vec![crate::testing::pick_claim(u128::from(picked))],
                affinity: Affinity::None,
                partial: false,
                shapes: Vec::new(),
                together: false,
            };
            let Ok((placed, changes)) = state.plan_pick(pick, 0) else {
                break;
            };
            let roots: BTreeSet<ProviderId> = placed.claims[0]
                .allocations
                .iter()
                .filter_map(|a| state.provider_by_uuid(&a.provider))
                .filter(|p| !p.traits.contains(SHARING_TRAIT))
                .map(|p| p.row.root)
                .collect();
            state.apply(&changes);
            picked += 1;
            if let Some(root) = roots.first() {
                *by_root.entry(*root).or_default() += 1;
            }
            assert!(picked <= 10_000, "case {case}: runaway");
        }
        assert_eq!(headroom.total, picked, "case {case}: {q:#?}");
        if picked > 0 {
            nonzero += 1;
        }
        if headroom.by_anchor.len() > 1 {
            several += 1;
        }
        // Where the picks used a tree's own providers, the anchor counts agree.
        for (root, n) in by_root {
            let counted = headroom
                .by_anchor
                .iter()
                .find(|(a, _)| *a == root)
                .map_or(0, |(_, c)| *c);
            assert!(counted >= n, "case {case}: root {root:?} {counted} < {n}");
        }
    }
    eprintln!("{nonzero} cases with headroom, {several} over several anchors");
    assert!(nonzero > 200, "the cases exercise headroom ({nonzero})");
    assert!(several > 30, "several anchors ({several})");
}

/// A pick-and-claim never lands where `GET /allocation_candidates` with the same
/// parameters would not offer: for random worlds (nested trees, sharing providers,
/// usage), random shapes and every order, each pick's amounts are those of one of the
/// candidates the unlimited query offers on the view the pick was made on, and a pick
/// is refused only when nothing is offered.
#[test]
fn a_pick_lands_only_where_the_candidates_offer() {
    use crate::ops::pick::{Affinity, Pick};
    let mut rng = Rng::new(29);
    let mut placed = 0;
    for case in 0..1200u64 {
        let w = random_world(&mut rng);
        let mut q = random_query(&mut rng, &w);
        q.weigh.sort = [
            None,
            Some(Sort::Pack),
            Some(Sort::Spread),
            Some(Sort::Random(case)),
        ][rng.below(4)];
        let options = SearchOptions::default();
        let mut unlimited = q.clone();
        unlimited.limit = None;
        let mut state = w.state.clone();
        for n in 0..4u128 {
            let Ok(found) = state.allocation_candidates(&unlimited, &options) else {
                break;
            };
            let offered: Vec<Vec<(Uuid, ResourceClass, u64)>> = found
                .requests
                .iter()
                .map(|r| {
                    let mut amounts: Vec<_> = r
                        .allocations
                        .iter()
                        .map(|&(id, k, a)| {
                            (
                                state.provider(id).unwrap().uuid(),
                                found.classes[k].clone(),
                                a,
                            )
                        })
                        .collect();
                    amounts.sort();
                    amounts
                })
                .collect();
            let pick = Pick {
                query: q.clone(),
                options,
                claims: vec![crate::testing::pick_claim(n)],
                affinity: Affinity::None,
                partial: false,
                shapes: Vec::new(),
                together: false,
            };
            match state.plan_pick(pick, 0) {
                Ok((made, changes)) => {
                    let mut got: Vec<_> = made.claims[0]
                        .allocations
                        .iter()
                        .map(|a| (a.provider, a.class.clone(), a.amount))
                        .collect();
                    got.sort();
                    assert!(offered.contains(&got), "case {case}: {got:?} not offered");
                    state.apply(&changes);
                    placed += 1;
                }
                Err(_) => {
                    assert!(offered.is_empty(), "case {case}: refused while offered");
                    break;
                }
            }
        }
    }
    assert!(placed > 250, "the cases exercise picks ({placed})");
}

/// Explain (issue 24) names the stage that emptied a request, counts the survivors of
/// each stage, and reports the providers that missed by the least.
#[test]
fn explain_names_the_stage_that_emptied_the_answer() {
    let mut w = World::new();
    for (name, total, used) in [("a", 8, 7), ("b", 8, 5), ("c", 4, 0)] {
        w.provider(name, None).total(name, "VCPU", total);
        if used > 0 {
            w.allocate(name, "VCPU", used);
        }
    }
    w.traits("c", &["CUSTOM_A"]);
    let options = SearchOptions::default();
    let explain = |q: &CandidateQuery| w.state.explain(q, &options).unwrap();

    // 4 VCPU: only c has room, and c lacks nothing else.
    let q = query(vec![group("", &[("VCPU", 4)])]);
    let e = explain(&q);
    assert_eq!(e.candidates, 1);
    assert_eq!(e.emptied_by, None);
    let counts: Vec<usize> = e.groups[0].stages.iter().map(|s| s.1).collect();
    assert_eq!(counts, [3, 1, 1, 1, 1, 1, 1]);
    // The misses, nearest first: b lacks 1, a lacks 3.
    let nearest: Vec<(String, u64)> = e.groups[0]
        .nearest
        .iter()
        .map(|(id, _, lack)| (w.state.provider(*id).unwrap().row.name.clone(), *lack))
        .collect();
    assert_eq!(nearest, [("b".to_owned(), 1), ("a".to_owned(), 3)]);

    // 5 VCPU: nobody has room.
    let e = explain(&query(vec![group("", &[("VCPU", 5)])]));
    assert_eq!(e.candidates, 0);
    assert_eq!(e.emptied_by.as_deref(), Some("group '': capacity"));

    // c is the only one with room for 4, and a forbidden trait keeps it out.
    let mut q = query(vec![group("", &[("VCPU", 4)])]);
    q.groups[0].forbidden = vec![TraitName::requested("CUSTOM_A")];
    let e = explain(&q);
    assert_eq!(e.emptied_by.as_deref(), Some("group '': forbidden"));

    // Each group passes on its own, but isolation leaves nothing: the rules between
    // groups.
    let mut q = query(vec![
        group("_1", &[("VCPU", 3)]),
        group("_2", &[("VCPU", 3)]),
    ]);
    q.groups[0].in_tree = Some(World::uuid("c").into());
    q.groups[1].in_tree = Some(World::uuid("c").into());
    q.isolate = true;
    let e = explain(&q);
    assert_eq!(e.candidates, 0);
    assert_eq!(e.emptied_by.as_deref(), Some("rules between groups"));

    // An unknown class is refused as the search refuses it.
    let q = query(vec![group("", &[("CUSTOM_NOPE", 1)])]);
    assert!(w.state.explain(&q, &options).is_err());
}

/// A random cloud for the weighed walk: [`random_world`]'s trees and sharing
/// providers, and beside them flat roots with several classes, uneven usage (often
/// equal loads, which the walk must break by creation order) and pending claims, some
/// of which have expired by the time the questions are asked.
fn weighed_world(rng: &mut Rng) -> World {
    let mut w = random_world(rng);
    let classes = ["VCPU", "DISK_GB", "VGPU"];
    for i in 0..rng.below(12) {
        let name = format!("flat{i}");
        w.provider(&name, None);
        for class in classes {
            if rng.below(4) > 0 {
                w.total(&name, class, 2 + rng.below(6) as u64);
            }
        }
        if rng.below(3) == 0 {
            w.traits(&name, &["CUSTOM_A"]);
        }
        if rng.below(3) == 0 {
            w.aggregates(&name, &[Uuid::from_u128(0xa1 + rng.below(2) as u128)]);
        }
    }
    // Usage in steps of one, so that equal loads are common.
    let names: Vec<String> = w.state.providers().map(|p| p.row.name.clone()).collect();
    let mut claim = 0u128;
    for name in &names {
        let invs: Vec<String> = w
            .state
            .provider_by_name(name)
            .unwrap()
            .inventories
            .keys()
            .map(|c| c.as_str().to_owned())
            .collect();
        for class in invs {
            if rng.below(3) == 0 {
                w.allocate(name, &class, 1);
            }
            if rng.below(4) == 0 {
                claim += 1;
                let expires_at = [None, Some(5), Some(50)][rng.below(3)];
                let ask = crate::ops::claims::NewClaim {
                    allocations: vec![crate::ops::allocations::Requested {
                        provider: World::uuid(name).into(),
                        class: ResourceClass::requested(&class),
                        used: 1,
                    }],
                    expires_at,
                    ..crate::testing::pick_claim(claim)
                };
                if let Ok((_, changes)) = w.state.plan_create_claim(ask, 0) {
                    w.state.apply(&changes);
                }
            }
        }
    }
    w
}

/// The weighed walk (`super::walk`) answers exactly as the full order does: for
/// random clouds (nested trees, sharing providers, allocations, pending claims live
/// and expired at the moment asked) and random queries, every `limit` of a `pack` or
/// `spread` answer is the first `limit` candidates of the unlimited answer, which
/// orders every candidate; and a pick takes the first of them.
#[test]
fn the_weighed_walk_gives_the_first_of_the_full_order() {
    use crate::ops::pick::{Affinity, Pick};
    let mut rng = Rng::new(31);
    let (mut walked, mut walked_several, mut picked) = (0, 0, 0);
    for case in 0..2500 {
        let w = weighed_world(&mut rng);
        let mut q = random_query(&mut rng, &w);
        if rng.below(2) == 0 {
            // Often the shape of a flavour: one group, each class once.
            q.groups.truncate(1);
            q.groups[0].suffix = String::new();
            q.groups[0].in_tree = None;
            q.same_subtrees.clear();
        }
        q.now = [0, 10, 100][rng.below(3)];
        for sort in [Sort::Pack, Sort::Spread] {
            q.weigh = Weigh {
                sort: Some(sort),
                prefer: Vec::new(),
            };
            let all = run(&w, &q);
            let firsts: Vec<String> = all.requests.iter().map(|r| show(&w, &all, &q, r)).collect();
            let walks =
                super::walk::applies(&Prepared::new(&w.state, &q), &q.weigh, Some(1)).is_some();
            for limit in [1, 2, 3, firsts.len().max(1)] {
                let mut limited = q.clone();
                limited.limit = Some(limit);
                let some = run(&w, &limited);
                let shown: Vec<String> = some
                    .requests
                    .iter()
                    .map(|r| show(&w, &some, &limited, r))
                    .collect();
                let want = &firsts[..limit.min(firsts.len())];
                assert_eq!(shown, want, "case {case}, {sort:?}, limit {limit}: {q:#?}");
                if walks && !want.is_empty() {
                    walked += 1;
                    if limit > 1 && want.len() > 1 {
                        walked_several += 1;
                    }
                }
            }
            // A pick takes the first of the order, at the moment it is made.
            let pick = Pick {
                query: q.clone(),
                options: SearchOptions::default(),
                claims: vec![crate::testing::pick_claim(1_000_000)],
                affinity: Affinity::None,
                partial: false,
                shapes: Vec::new(),
                together: false,
            };
            match w.state.plan_pick(pick, q.now) {
                Ok((placed, _)) => {
                    let (got, want) = pick_and_first(&w, &placed, &all);
                    assert_eq!(got, want, "case {case}, {sort:?}: the pick {q:#?}");
                    picked += 1;
                }
                Err(_) => assert!(all.requests.is_empty(), "case {case}: refused"),
            }
        }
    }
    eprintln!("{walked} walked answers, {walked_several} of several, {picked} picks");
    assert!(walked > 1500, "the cases exercise the walk ({walked})");
    assert!(
        walked_several > 500,
        "several candidates ({walked_several})"
    );
}

/// Picks follow an order kept from one pick to the next (`super::order`): through
/// picks committed and picks thrown away, allocations made and deleted, claims
/// released and expiring, inventories and traits changed, and time passing, every
/// `spread` pick takes the first candidate of the full order at that moment.
#[test]
fn picks_on_a_kept_order_take_the_first_of_the_full_order() {
    let mut rng = Rng::new(43);
    let (mut picks, mut kept_used) = (0, 0);
    for case in 0..400 {
        let mut w = weighed_world(&mut rng);
        let mut q = random_query(&mut rng, &w);
        q.groups.truncate(1);
        q.groups[0].suffix = String::new();
        q.groups[0].in_tree = None;
        q.same_subtrees.clear();
        let (p, k) = kept_picks_follow_the_full_order(&mut w, q, &mut rng, case);
        picks += p;
        kept_used += k;
    }
    eprintln!("{picks} picks, {kept_used} on kept orders");
    assert!(
        kept_used > 2000,
        "the cases exercise kept orders ({kept_used})"
    );
}

/// The same where pools serve most roots: flat roots of VCPU (some with a disk of
/// their own) in one aggregate, the other or both, pools of disk in each, claims on
/// the pools that expire between picks; the roots' keys leave the pools' terms out.
#[test]
fn picks_beside_pools_on_a_kept_order_take_the_first_of_the_full_order() {
    let mut rng = Rng::new(47);
    let aggs = [Uuid::from_u128(0xa1), Uuid::from_u128(0xa2)];
    let (mut picks, mut kept_used) = (0, 0);
    for case in 0..300 {
        let mut w = World::new();
        for i in 0..1 + rng.below(3) {
            let pool = format!("pool{i}");
            w.provider(&pool, None)
                .total(&pool, "DISK_GB", 4 + rng.below(30) as u64)
                .traits(&pool, &[SHARING_TRAIT])
                .aggregates(&pool, &[aggs[i % 2]]);
        }
        for i in 0..2 + rng.below(12) {
            let root = format!("cn{i}");
            w.provider(&root, None)
                .total(&root, "VCPU", 2 + rng.below(6) as u64);
            if rng.below(3) == 0 {
                w.total(&root, "DISK_GB", 1 + rng.below(4) as u64);
            }
            match rng.below(4) {
                0 => {}
                1 => {
                    w.aggregates(&root, &aggs);
                }
                n => {
                    w.aggregates(&root, &[aggs[n % 2]]);
                }
            }
        }
        let names: Vec<String> = w.state.providers().map(|p| p.row.name.clone()).collect();
        for (n, name) in names.iter().enumerate() {
            let class = if name.starts_with("pool") {
                "DISK_GB"
            } else {
                "VCPU"
            };
            if rng.below(2) == 0 {
                let ask = crate::ops::claims::NewClaim {
                    allocations: vec![crate::ops::allocations::Requested {
                        provider: World::uuid(name).into(),
                        class: ResourceClass::requested(class),
                        used: 1,
                    }],
                    expires_at: [None, Some(3), Some(30)][rng.below(3)],
                    ..crate::testing::pick_claim(900_000 + n as u128)
                };
                if let Ok((_, changes)) = w.state.plan_create_claim(ask, 0) {
                    w.state.apply(&changes);
                }
            }
        }
        let q = CandidateQuery {
            groups: vec![RequestGroup {
                resources: vec![
                    (ResourceClass::requested("VCPU"), 1),
                    (ResourceClass::requested("DISK_GB"), 1),
                ],
                ..Default::default()
            }],
            limit: Some(1),
            nested_aware: true,
            ..Default::default()
        };
        let (p, k) = kept_picks_follow_the_full_order(&mut w, q, &mut rng, case);
        picks += p;
        kept_used += k;
    }
    eprintln!("{picks} picks, {kept_used} on kept orders");
    assert!(
        kept_used > 2000,
        "the cases exercise kept orders ({kept_used})"
    );
}

/// A root left without a bound because its pools have no room comes back into the
/// kept order when the pools' pending claim expires: with two requested classes
/// offered only by the pool, the pool's terms are in the root's bound, and nothing
/// is recorded when a claim expires.
#[test]
fn a_kept_order_takes_back_a_root_whose_pools_claim_expired() {
    use crate::ops::pick::{Affinity, Pick};
    let agg = Uuid::from_u128(0xa1);
    let mut w = World::new();
    w.provider("pool", None)
        .total("pool", "VCPU", 2)
        .total("pool", "DISK_GB", 4)
        .traits("pool", &[SHARING_TRAIT])
        .aggregates("pool", &[agg]);
    w.provider("cn", None)
        .total("cn", "VGPU", 2)
        .aggregates("cn", &[agg]);
    // The pool's VCPU taken until 5.
    let ask = crate::ops::claims::NewClaim {
        allocations: vec![crate::ops::allocations::Requested {
            provider: World::uuid("pool").into(),
            class: ResourceClass::requested("VCPU"),
            used: 2,
        }],
        expires_at: Some(5),
        ..crate::testing::pick_claim(1)
    };
    let (_, changes) = w.state.plan_create_claim(ask, 0).unwrap();
    w.state.apply(&changes);
    let query = CandidateQuery {
        groups: vec![RequestGroup {
            resources: vec![
                (ResourceClass::requested("VCPU"), 1),
                (ResourceClass::requested("DISK_GB"), 1),
                (ResourceClass::requested("VGPU"), 1),
            ],
            ..Default::default()
        }],
        limit: Some(1),
        weigh: Weigh {
            sort: Some(Sort::Spread),
            prefer: Vec::new(),
        },
        ..Default::default()
    };
    let pick = |now, n| Pick {
        query: CandidateQuery {
            now,
            ..query.clone()
        },
        options: SearchOptions::default(),
        claims: vec![crate::testing::pick_claim(n)],
        affinity: Affinity::None,
        partial: false,
        shapes: Vec::new(),
        together: false,
    };
    assert!(
        w.state.plan_pick(pick(0, 2), 0).is_err(),
        "the pool is full"
    );
    let (placed, _) = w.state.plan_pick(pick(5, 3), 5).expect("the claim expired");
    assert_eq!(placed.claims[0].allocations.len(), 3);
}

/// Twenty-five `spread` picks of `q`'s shape on `w`, with random changes and time
/// passing between them, each compared with the first candidate of the full order;
/// how many were placed, and how many of those the walk (on a kept order) answered.
fn kept_picks_follow_the_full_order(
    w: &mut World,
    mut q: CandidateQuery,
    rng: &mut Rng,
    case: usize,
) -> (usize, usize) {
    use crate::ops::pick::{Affinity, Pick};
    let (mut picks, mut kept_used) = (0, 0);
    q.weigh = Weigh {
        sort: Some(Sort::Spread),
        prefer: Vec::new(),
    };
    let mut now = 0;
    for step in 0..25 {
        q.now = now;
        let mut unlimited = q.clone();
        unlimited.limit = None;
        let all = run(w, &unlimited);
        let pick = Pick {
            query: q.clone(),
            options: SearchOptions::default(),
            claims: vec![crate::testing::pick_claim(10_000 + step)],
            affinity: Affinity::None,
            partial: false,
            shapes: Vec::new(),
            together: false,
        };
        let walks = super::walk::applies(&Prepared::new(&w.state, &q), &q.weigh, Some(1)).is_some();
        match w.state.plan_pick(pick, now) {
            Ok((placed, changes)) => {
                let (got, want) = pick_and_first(w, &placed, &all);
                assert_eq!(got, want, "case {case} step {step}: {q:#?}");
                picks += 1;
                kept_used += usize::from(walks);
                // Most picks are committed; some are thrown away (refused later
                // in their batch, or their commit failed).
                if rng.below(4) > 0 {
                    w.state.apply(&changes);
                }
            }
            Err(_) => assert!(all.requests.is_empty(), "case {case} step {step}"),
        }
        change_something(w, rng, now);
        now += [0, 1, 3, 20][rng.below(4)];
    }
    (picks, kept_used)
}

/// Allocations as sorted `(provider, class, amount)`.
type Amounts = Vec<(Uuid, String, u64)>;

/// What a pick's one claim allocates, and what the first candidate of the full
/// order `all` allocates.
fn pick_and_first(
    w: &World,
    placed: &crate::ops::pick::Placed,
    all: &Candidates,
) -> (Amounts, Amounts) {
    let mut got: Amounts = placed.claims[0]
        .allocations
        .iter()
        .map(|a| (a.provider, a.class.as_str().to_owned(), a.amount))
        .collect();
    let mut want: Amounts = all.requests[0]
        .allocations
        .iter()
        .map(|&(id, k, amount)| {
            let uuid = w.state.provider(id).unwrap().uuid();
            (uuid, all.class_name(k).to_owned(), amount)
        })
        .collect();
    got.sort();
    want.sort();
    (got, want)
}

/// One random change of the kinds a kept order must follow.
fn change_something(w: &mut World, rng: &mut Rng, now: Timestamp) {
    let names: Vec<String> = w.state.providers().map(|p| p.row.name.clone()).collect();
    let name = names[rng.below(names.len())].clone();
    let classes = ["VCPU", "DISK_GB", "VGPU"];
    match rng.below(8) {
        0 | 1 => {
            let class = classes[rng.below(3)];
            if w.state
                .provider_by_name(&name)
                .unwrap()
                .inventories
                .contains_key(class)
            {
                w.allocate(&name, class, 1);
            }
        }
        2 => {
            let consumers: Vec<Uuid> = w.state.consumers().map(|c| c.row.uuid).collect();
            if !consumers.is_empty() {
                let uuid = consumers[rng.below(consumers.len())];
                w.state.apply(&[Change::DeleteConsumer(uuid)]);
            }
        }
        3 => {
            let live: Vec<Uuid> = w
                .state
                .claims()
                .filter(|c| c.live(now))
                .map(|c| c.uuid)
                .collect();
            if !live.is_empty() {
                let uuid = live[rng.below(live.len())];
                if let Ok((_, changes)) = w.state.plan_release_claim(&uuid, now) {
                    w.state.apply(&changes);
                }
            }
        }
        4 => {
            let id = w.id(&name);
            let inventories: Vec<(ResourceClass, Inventory)> = w
                .state
                .provider(id)
                .unwrap()
                .inventories
                .iter()
                .map(|(c, i)| {
                    (
                        c.clone(),
                        Inventory::with_total(i.total + 2 - rng.below(3) as u64),
                    )
                })
                .collect();
            w.state.apply(&[Change::SetInventories(id, inventories)]);
        }
        5 => {
            let sharing = w
                .state
                .provider_by_name(&name)
                .unwrap()
                .traits
                .contains(SHARING_TRAIT);
            let mut traits = if rng.below(2) == 0 {
                vec!["CUSTOM_A"]
            } else {
                vec![]
            };
            if sharing {
                traits.push(SHARING_TRAIT);
            }
            w.traits(&name, &traits);
        }
        _ => {}
    }
}

/// A mass start in one pick places each instance where it would go on its own, on
/// the view the earlier instances left: for random clouds and shapes, unweighed and
/// by `spread`, a pick of several instances takes, instance by instance, what single
/// picks made one after another take (the one-request pick skips the anchors that
/// earlier instances proved empty, and follows a kept order).
#[test]
fn a_mass_start_places_as_single_picks_one_after_another() {
    use crate::ops::pick::{Affinity, Pick};
    let mut rng = Rng::new(59);
    let mut placed_several = 0;
    let mut mixed_and_skipped = 0;
    for case in 0..1000 {
        let w = weighed_world(&mut rng);
        let mut q = random_query(&mut rng, &w);
        if rng.below(2) == 0 {
            q.weigh.sort = Some(Sort::Spread);
        }
        // Half the cases mix two shapes: an instance of either may fit where one
        // of the other did not.
        let other = (rng.below(2) == 0).then(|| random_query(&mut rng, &w));
        let n = 1 + rng.below(6) as u128;
        let claims: Vec<_> = (0..n)
            .map(|i| crate::testing::pick_claim(500_000 + i))
            .collect();
        let shapes: Vec<crate::ops::pick::Shape> = match &other {
            Some(other) => (0..n)
                .map(|_| crate::ops::pick::Shape {
                    query: (rng.below(2) == 0).then(|| other.clone()),
                    reach: Vec::new(),
                })
                .collect(),
            None => Vec::new(),
        };
        let together = w.state.plan_pick(
            Pick {
                query: q.clone(),
                options: SearchOptions::default(),
                claims: claims.clone(),
                affinity: Affinity::None,
                partial: true,
                shapes: shapes.clone(),
                together: false,
            },
            0,
        );
        let mut state = w.state.clone();
        let mut one_by_one = Vec::new();
        let mut unplaced = Vec::new();
        for (i, claim) in claims.into_iter().enumerate() {
            let consumer = claim.consumer;
            let single = Pick {
                query: shapes
                    .get(i)
                    .and_then(|s| s.query.clone())
                    .unwrap_or_else(|| q.clone()),
                options: SearchOptions::default(),
                claims: vec![claim],
                affinity: Affinity::None,
                partial: true,
                shapes: Vec::new(),
                together: false,
            };
            match state.plan_pick(single, 0) {
                Ok((placed, changes)) => {
                    state.apply(&changes);
                    one_by_one.push(placed.claims[0].allocations.clone());
                }
                Err(_) => unplaced.push(consumer),
            }
        }
        match together {
            Ok((placed, _)) => {
                let got: Vec<_> = placed
                    .claims
                    .iter()
                    .map(|c| c.allocations.clone())
                    .collect();
                assert_eq!(got, one_by_one, "case {case}: {q:#?}");
                assert_eq!(placed.unplaced, unplaced, "case {case}");
                placed_several += usize::from(got.len() > 1);
                mixed_and_skipped += usize::from(other.is_some() && !unplaced.is_empty());
            }
            Err(e) => assert!(
                one_by_one.is_empty(),
                "case {case}: {e} {one_by_one:?} {q:#?}"
            ),
        }
    }
    assert!(
        placed_several > 150,
        "several instances placed ({placed_several})"
    );
    assert!(
        mixed_and_skipped > 10,
        "mixed shapes, some unplaced ({mixed_and_skipped})"
    );
}

/// Headroom takes, at each root, what a pick would: the tree's own provider before a
/// shared pool, so that the pool's room is left to the roots that have nothing else.
#[test]
fn headroom_leaves_a_pool_to_the_roots_that_need_it() {
    let agg = Uuid::from_u128(0xa1);
    let mut w = World::new();
    w.provider("a", None)
        .total("a", "VCPU", 1)
        .total("a", "DISK_GB", 1)
        .aggregates("a", &[agg]);
    w.provider("b", None)
        .total("b", "VCPU", 10)
        .aggregates("b", &[agg]);
    w.provider("s", None)
        .total("s", "DISK_GB", 2)
        .traits("s", &[SHARING_TRAIT])
        .aggregates("s", &[agg]);
    let q = query(vec![group("", &[("VCPU", 1), ("DISK_GB", 1)])]);
    let headroom = w.state.headroom(&q, &SearchOptions::default()).unwrap();
    assert_eq!(headroom.total, 3);
    assert_eq!(headroom.by_anchor, vec![(w.id("a"), 1), (w.id("b"), 2)]);
}

/// Issue 47: where a shape fits alone, now. A pool that the first root's picks use
/// up leaves the second root no headroom, yet one instance fits there on the view
/// as it is: it is among the fits, and so none of its units is stranded. The same
/// through the search (a granular group) as through the counted common shape.
#[test]
fn fits_alone_count_a_root_whose_pool_the_roots_before_used_up() {
    let w = shared_world();
    let (cn1, cn2) = (w.id("cn1"), w.id("cn2"));
    let options = SearchOptions::default();
    let simple = query(vec![group("", &[("VCPU", 1), ("DISK_GB", 600)])]);
    let searched = query(vec![
        group("1", &[("VCPU", 1)]),
        group("2", &[("DISK_GB", 600)]),
    ]);
    for (how, q) in [("simple", simple), ("searched", searched)] {
        let mut fits = Vec::new();
        let counted = w.state.headroom_and_fits(&q, &options, &mut fits).unwrap();
        assert_eq!(counted.by_anchor, vec![(cn1, 1)], "{how}");
        assert_eq!(fits, vec![cn1, cn2], "{how}");
        assert_eq!(w.state.headroom(&q, &options).unwrap(), counted);
        let name = crate::shapes::ShapeName::parse("big disk").unwrap();
        let counts = w.state.count_shapes(&[(name.clone(), q.clone())], &options);
        assert_eq!(counts.headroom, vec![(name, 1)]);
        assert!(counts.stranded.is_empty(), "{:?}", counts.stranded);
    }
    // A shape that fits nowhere strands every root's free units, never the pool's
    // (pools are no root's alone).
    let q = query(vec![group("", &[("VCPU", 1), ("DISK_GB", 2000)])]);
    let name = crate::shapes::ShapeName::parse("none").unwrap();
    let counts = w.state.count_shapes(&[(name, q)], &options);
    assert_eq!(counts.headroom[0].1, 0);
    let stranded: Vec<(String, u64)> = counts
        .stranded
        .iter()
        .map(|(c, n)| (c.to_string(), *n))
        .collect();
    assert_eq!(
        stranded,
        vec![("DISK_GB".to_owned(), 100), ("VCPU".to_owned(), 16)]
    );
}
