//! `allot export` / `allot import` at the store level: a varied deployment goes
//! through a dump into a second store and comes back the same (keyed by uuid: ids are
//! handed out afresh), and a dump that breaks integrity is refused with every problem
//! named and nothing written. Through `Store::open(url)`, so that any engine can run it.

use allot_core::{
    Allocation, Change, Claim, ClaimAmount, ClaimState, ClassMetadata, ClassRecord, ConsumerRow,
    Inventory, ProviderId, ProviderRow, ResourceClass, State, Text, TraitName, TraitRecord, Uuid,
};
use allot_store::dump::{self, Counts, ImportError};
use allot_store::Store;

const AGG: Uuid = Uuid::from_u128(0xa66);

mod pg;

fn uuid(id: u64) -> Uuid {
    Uuid::from_u128(0x1000 + id as u128)
}

fn put(id: u64, parent: Option<u64>, root: u64, name: &str, generation: u64) -> Change {
    Change::PutProvider {
        row: ProviderRow {
            id: ProviderId(id),
            uuid: uuid(id),
            name: name.into(),
            generation,
            parent: parent.map(ProviderId),
            root: ProviderId(root),
            created_at: 100 + id as i64,
            updated_at: 200 + id as i64,
        },
        previous_generation: None,
    }
}

/// `put` as an update of a provider at generation `previous` (a create twice is
/// refused as stale).
fn update(put: Change, previous: u64) -> Change {
    match put {
        Change::PutProvider { row, .. } => Change::PutProvider {
            row,
            previous_generation: Some(previous),
        },
        other => other,
    }
}

fn inv(total: u64, ratio: f64) -> Inventory {
    Inventory {
        allocation_ratio: ratio,
        ..Inventory::with_total(total)
    }
}

fn rc(name: &str) -> ResourceClass {
    ResourceClass::new_unchecked(name)
}

fn alloc(provider: u64, class: &str, used: u64) -> Allocation {
    Allocation {
        provider: ProviderId(provider),
        class: rc(class),
        used,
    }
}

fn consumer(n: u128, project: &str, consumer_type: Option<&str>, generation: u64) -> Change {
    Change::PutConsumer {
        row: ConsumerRow {
            uuid: Uuid::from_u128(n),
            project_id: project.into(),
            user_id: "user-1".into(),
            consumer_type: consumer_type.map(Text::from),
            generation,
            created_at: 300,
            updated_at: 301,
        },
        previous_generation: None,
    }
}

fn claim(n: u128, state: ClaimState, provider: Uuid, expires_at: Option<i64>) -> Change {
    Change::PutClaim(Box::new(Claim {
        uuid: Uuid::from_u128(0xc1a1_0000 + n),
        consumer: Uuid::from_u128(0xf00 + n),
        project_id: "project-c".into(),
        user_id: "user-c".into(),
        consumer_type: n.is_multiple_of(2).then(|| Text::from("INSTANCE")),
        tag: n.is_multiple_of(3).then(|| Text::from("boot ☃")),
        allocations: vec![ClaimAmount {
            provider,
            class: rc("VCPU"),
            amount: 1,
        }]
        .into_boxed_slice(),
        state,
        created_at: 400,
        expires_at,
        ended_at: (state != ClaimState::Pending).then_some(450),
    }))
}

/// A deployment with something of every kind: two nested trees (one re-parented under
/// a provider created after it), a gap in the ids, a sharing provider in an aggregate,
/// custom classes with and without metadata, custom traits, consumers with and without
/// types, allocations (one over capacity after an allocation ratio was lowered), and
/// claims in every state (an ended one on a provider deleted since).
fn world() -> Vec<Change> {
    let mut c = vec![
        Change::PutClass {
            record: ClassRecord {
                name: rc("CUSTOM_GPU"),
                created_at: 10,
                updated_at: 11,
            },
            old_name: None,
        },
        Change::SetClassMetadata(
            rc("CUSTOM_GPU"),
            Some(ClassMetadata {
                units: Some("count".into()),
                display_name: Some("GPU slices ☃".into()),
                description: None,
            }),
        ),
        Change::PutClass {
            record: ClassRecord {
                name: rc("CUSTOM_BARE"),
                created_at: 12,
                updated_at: 12,
            },
            old_name: None,
        },
        Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked("CUSTOM_FAST"),
            created_at: 13,
        }),
        Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked("CUSTOM_UNUSED"),
            created_at: 14,
        }),
        put(1, None, 1, "cn1", 3),
        put(2, None, 2, "cn2", 1),
        put(3, Some(1), 1, "numa1_0", 2),
        put(4, Some(1), 1, "numa1_1", 1),
        put(5, None, 5, "doomed", 0),
        put(6, Some(3), 1, "pf1_0", 1),
        put(7, None, 7, "rack", 0),
        put(8, Some(2), 2, "numa2_0", 1),
        put(9, None, 9, "ss", 2),
        // cn2 moves under the rack, created after it (1.37): its subtree follows.
        update(put(2, Some(7), 7, "cn2", 2), 1),
        update(put(8, Some(2), 7, "numa2_0", 1), 1),
        Change::DeleteProvider(ProviderId(5)),
        Change::SetInventories(
            ProviderId(1),
            vec![
                (rc("VCPU"), inv(24, 16.0)),
                (
                    rc("MEMORY_MB"),
                    Inventory {
                        min_unit: 256,
                        step_size: std::num::NonZeroU64::new(256).unwrap(),
                        max_unit: 65536,
                        ..inv(131072, 1.5)
                    },
                ),
            ],
        ),
        Change::SetInventories(ProviderId(3), vec![(rc("VCPU"), inv(4, 1.0))]),
        Change::SetInventories(
            ProviderId(4),
            vec![(rc("CUSTOM_GPU"), inv(30, 0.1)), (rc("VCPU"), inv(4, 1.0))],
        ),
        Change::SetInventories(ProviderId(6), vec![(rc("SRIOV_NET_VF"), inv(8, 1.0))]),
        Change::SetInventories(
            ProviderId(8),
            vec![(rc("VCPU"), inv(8, 0.30000000000000004))],
        ),
        Change::SetInventories(
            ProviderId(9),
            vec![(
                rc("DISK_GB"),
                Inventory {
                    reserved: 100,
                    ..inv(2000, 1.0)
                },
            )],
        ),
        Change::SetTraits(
            ProviderId(1),
            vec![
                TraitName::new_unchecked("HW_CPU_X86_SSE"),
                TraitName::new_unchecked("CUSTOM_FAST"),
            ],
        ),
        Change::SetTraits(
            ProviderId(9),
            vec![TraitName::new_unchecked("MISC_SHARES_VIA_AGGREGATE")],
        ),
        Change::SetAggregates(ProviderId(1), vec![AGG, Uuid::from_u128(0xb66)]),
        Change::SetAggregates(ProviderId(9), vec![AGG]),
        consumer(1, "project-a", Some("INSTANCE"), 1),
        Change::SetAllocations(
            Uuid::from_u128(1),
            vec![
                alloc(1, "VCPU", 2),
                alloc(1, "MEMORY_MB", 512),
                alloc(9, "DISK_GB", 10),
            ],
        ),
        consumer(2, "project-a", None, 3),
        Change::SetAllocations(
            Uuid::from_u128(2),
            vec![
                alloc(3, "VCPU", 3),
                alloc(6, "SRIOV_NET_VF", 2),
                alloc(4, "CUSTOM_GPU", 1),
            ],
        ),
        // numa1_0 holds 3 + 3 VCPU of 4: its total was lowered under the allocations.
        consumer(3, "project-b", Some("MIGRATION"), 1),
        Change::SetAllocations(Uuid::from_u128(3), vec![alloc(3, "VCPU", 3)]),
        consumer(4, "project-b", None, 0),
        consumer(5, "project-b", None, 1),
        Change::SetAllocations(Uuid::from_u128(5), vec![alloc(8, "VCPU", 1)]),
    ];
    c.push(claim(1, ClaimState::Pending, uuid(4), Some(1_000_000)));
    c.push(claim(2, ClaimState::Pending, uuid(8), None));
    c.push(claim(3, ClaimState::Confirmed, uuid(1), Some(500)));
    c.push(claim(4, ClaimState::Released, uuid(9), Some(500)));
    c.push(claim(5, ClaimState::Expired, uuid(5), Some(440)));
    c
}

/// A provider as an import must give it back, keyed by uuid (ids differ).
#[derive(Debug, PartialEq)]
struct ProviderView {
    uuid: Uuid,
    name: String,
    generation: u64,
    parent: Option<Uuid>,
    root: Uuid,
    created_at: i64,
    updated_at: i64,
    inventories: Vec<(String, Inventory)>,
    traits: Vec<String>,
    aggregates: Vec<Uuid>,
    children: Vec<Uuid>,
    usage: Vec<(String, u64)>,
    consumers: Vec<Uuid>,
    pending: Vec<(Uuid, String, u64)>,
    sharing: bool,
}

/// One allocation, keyed by the provider's uuid.
type Held = (Uuid, String, u64);

/// Everything a state holds, keyed by uuid, in listing order where there is one.
#[derive(Debug, PartialEq)]
struct Everything {
    providers: Vec<ProviderView>,
    classes: Vec<(ClassRecord, Option<ClassMetadata>)>,
    traits: Vec<TraitRecord>,
    consumers: Vec<(ConsumerRow, Vec<Held>)>,
    claims: Vec<Claim>,
}

fn everything(s: &State) -> Everything {
    let providers = s
        .providers()
        .map(|p| ProviderView {
            uuid: p.uuid(),
            name: p.row.name.clone(),
            generation: p.row.generation,
            parent: p.row.parent.map(|id| s.uuid_of(id)),
            root: s.uuid_of(p.row.root),
            created_at: p.row.created_at,
            updated_at: p.row.updated_at,
            inventories: p
                .inventories
                .iter()
                .map(|(c, i)| (c.to_string(), *i))
                .collect(),
            traits: p.traits.iter().map(|t| t.to_string()).collect(),
            aggregates: p.aggregates.iter().copied().collect(),
            children: p.children.iter().map(|&c| s.uuid_of(c)).collect(),
            usage: p
                .usage
                .by_class
                .iter()
                .map(|(c, u)| (c.to_string(), *u))
                .collect(),
            consumers: p.usage.consumers.iter().copied().collect(),
            pending: p
                .pending
                .iter()
                .map(|a| (a.claim, a.class.to_string(), a.amount))
                .collect(),
            sharing: s.sharing_providers().any(|q| q.uuid() == p.uuid()),
        })
        .collect();
    let mut consumers: Vec<_> = s
        .consumers()
        .map(|c| {
            let allocations = c
                .allocations
                .iter()
                .map(|a| (s.uuid_of(a.provider), a.class.to_string(), a.used))
                .collect();
            (c.row.clone(), allocations)
        })
        .collect();
    consumers.sort_by_key(|(row, _)| row.uuid);
    let mut claims: Vec<_> = s.claims().cloned().collect();
    claims.sort_by_key(|c| c.uuid);
    Everything {
        providers,
        classes: s
            .custom_classes()
            .map(|c| (c.clone(), s.class_metadata(&c.name)))
            .collect(),
        traits: s.custom_traits().cloned().collect(),
        consumers,
        claims,
    }
}

fn url(dir: &tempfile::TempDir, name: &str) -> String {
    format!("sqlite:{}", dir.path().join(name).display())
}

fn source(dir: &tempfile::TempDir) -> (String, State) {
    let url = url(dir, "source.db");
    let mut store = Store::open(&url).unwrap();
    store.persist(&world()).unwrap();
    drop(store);
    let state = Store::open(&url).unwrap().load().unwrap();
    (url, state)
}

fn dump_bytes(url: &str, at: i64) -> Vec<u8> {
    let mut store = Store::open(url).unwrap();
    let mut out = Vec::new();
    dump::write(&dump::export_store(&mut store, at).unwrap(), &mut out).unwrap();
    out
}

#[test]
fn a_deployment_goes_through_a_dump_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (source_url, before) = source(&dir);
    // The world really is varied: the checks below would pass on an empty one.
    assert_eq!(before.providers().count(), 8);
    assert_eq!(before.claims().count(), 5);
    assert!(before.sharing_providers().count() == 1);

    let bytes = dump_bytes(&source_url, 1_000);
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains("\"format\": \"allot-dump\""), "{text}");
    assert!(text.contains("\"allocation_ratio\": \"0.30000000000000004\""));

    let target_url = url(&dir, "target.db");
    let mut target = Store::open(&target_url).unwrap();
    let report = dump::import(&mut target, &dump::parse(&bytes).unwrap()).unwrap();
    assert_eq!(
        report.counts,
        Counts {
            classes: 2,
            traits: 2,
            providers: 8,
            inventories: 8,
            consumers: 5,
            allocations: 8,
            claims: 5,
        }
    );
    // numa1_0's VCPU: 6 allocated on a capacity of 4, kept with a warning.
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains(&format!("provider {}: 6 of VCPU in use", uuid(3))),
        "{:?}",
        report.warnings
    );
    drop(target);

    let after = Store::open(&target_url).unwrap().load().unwrap();
    assert_eq!(everything(&after), everything(&before));
    assert!(after.check_usage_index());
    // Ids were handed out afresh: dense, in the dump's (creation) order.
    let ids: Vec<u64> = after.providers().map(|p| p.id().0).collect();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());

    // A second export of either store is the same bytes.
    assert_eq!(dump_bytes(&target_url, 1_000), bytes);
    assert_eq!(dump_bytes(&source_url, 1_000), bytes);
}

/// The source world's dump as a JSON tree, to break in one place.
fn good_dump() -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = source(&dir);
    serde_json::from_slice(&dump_bytes(&url, 1_000)).unwrap()
}

/// Imports `dump` into a fresh store; the error, having checked that nothing was
/// written.
fn refused(dump: &serde_json::Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let url = url(&dir, "target.db");
    let mut store = Store::open(&url).unwrap();
    let bytes = serde_json::to_vec(dump).unwrap();
    let err = dump::parse(&bytes)
        .and_then(|d| dump::import(&mut store, &d))
        .expect_err("the import should be refused");
    drop(store);
    let state = Store::open(&url).unwrap().load().unwrap();
    assert_eq!(
        dump::counts(&state),
        Counts::default(),
        "something was written"
    );
    err.to_string()
}

fn provider_index(d: &serde_json::Value, name: &str) -> usize {
    d["providers"]
        .as_array()
        .unwrap()
        .iter()
        .position(|p| p["name"] == name)
        .unwrap()
}

#[test]
fn a_broken_dump_is_refused_with_every_problem_named() {
    let good = good_dump();
    let numa = provider_index(&good, "numa1_0");
    let cn1 = provider_index(&good, "cn1");
    let stranger = Uuid::from_u128(0xdead).to_string();
    type Break = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(Break, &str)> = vec![
        (
            Box::new(|d| d["format"] = "pg_dump".into()),
            "unknown dump format \"pg_dump\"",
        ),
        (
            Box::new(|d| d["version"] = 2.into()),
            "unsupported dump version 2 (this allot reads version 1)",
        ),
        (
            Box::new(|d| {
                d.as_object_mut().unwrap().remove("format");
            }),
            "no \"format\"",
        ),
        (
            Box::new(move |d| d["providers"][numa]["colour"] = "red".into()),
            "unknown field `colour`",
        ),
        (
            Box::new(move |d| d["providers"][numa]["uuid"] = d["providers"][cn1]["uuid"].clone()),
            "appears twice",
        ),
        (
            Box::new(move |d| d["providers"][numa]["name"] = "cn1".into()),
            "provider name \"cn1\" is used twice",
        ),
        (
            Box::new({
                let s = stranger.clone();
                move |d| d["providers"][numa]["parent"] = s.clone().into()
            }),
            "that is not in the dump",
        ),
        (
            Box::new(move |d| d["providers"][cn1]["parent"] = d["providers"][numa]["uuid"].clone()),
            "is in a cycle of parents",
        ),
        (
            Box::new(move |d| {
                d["providers"][numa]["inventories"][0]["resource_class"] = "CUSTOM_NOPE".into()
            }),
            "inventory of \"CUSTOM_NOPE\", a class neither standard nor in the dump",
        ),
        (
            Box::new(move |d| d["providers"][cn1]["traits"][0] = "CUSTOM_NOPE".into()),
            "trait \"CUSTOM_NOPE\" is neither standard nor in the dump",
        ),
        (
            Box::new(|d| {
                d["resource_classes"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|c| c["name"] != "CUSTOM_GPU");
            }),
            "a class neither standard nor in the dump",
        ),
        (
            Box::new({
                let s = stranger.clone();
                move |d| d["consumers"][0]["allocations"][0]["provider"] = s.clone().into()
            }),
            "no such provider in the dump",
        ),
        (
            Box::new(move |d| {
                d["consumers"][0]["allocations"][0]["resource_class"] = "PCPU".into()
            }),
            "the provider has no inventory of the class",
        ),
        (
            Box::new({
                let s = stranger.clone();
                move |d| {
                    let claim = d["claims"]
                        .as_array_mut()
                        .unwrap()
                        .iter_mut()
                        .find(|c| c["state"] == "pending")
                        .unwrap();
                    claim["allocations"][0]["provider"] = s.clone().into();
                }
            }),
            "a pending claim on a provider not in the dump",
        ),
        (
            Box::new(|d| d["claims"][0]["state"] = "lost".into()),
            "state \"lost\" is not pending",
        ),
        (
            Box::new(move |d| {
                d["providers"][numa]["inventories"][0]["allocation_ratio"] = "lots".into()
            }),
            "allocation_ratio \"lots\"",
        ),
        (
            Box::new(|d| d["traits"][0]["name"] = "FAST".into()),
            "trait \"FAST\" is not a custom trait name",
        ),
        (
            Box::new(|d| d["consumers"][1] = d["consumers"][0].clone()),
            "appears twice",
        ),
    ];
    for (i, (damage, expected)) in cases.iter().enumerate() {
        let mut d = good.clone();
        damage(&mut d);
        let err = refused(&d);
        assert!(
            err.contains(expected),
            "case {i}: {err:?} lacks {expected:?}"
        );
    }

    // Several problems at once are all named.
    let mut d = good.clone();
    d["providers"][numa]["name"] = "cn1".into();
    d["providers"][cn1]["traits"][0] = "CUSTOM_NOPE".into();
    d["claims"][0]["state"] = "lost".into();
    let err = refused(&d);
    assert!(err.contains("3 integrity problem(s)"), "{err}");

    // Past 50 problems the rest are counted, not listed.
    let mut d = good.clone();
    let orphans: Vec<serde_json::Value> = (0..60u128)
        .map(|i| {
            serde_json::json!({
                "uuid": Uuid::from_u128(0x0e00 + i), "name": format!("orphan{i}"),
                "parent": Uuid::from_u128(0xdead), "generation": 0, "created_at": 0,
                "updated_at": 0, "inventories": [], "traits": [], "aggregates": [],
            })
        })
        .collect();
    d["providers"].as_array_mut().unwrap().extend(orphans);
    let err = refused(&d);
    assert!(
        err.contains("51 integrity problem(s)") && err.ends_with("and 10 more"),
        "{err}"
    );

    // The untouched dump goes in (so the cases above failed for their damage alone).
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&url(&dir, "ok.db")).unwrap();
    let dump = dump::parse(&serde_json::to_vec(&good).unwrap()).unwrap();
    dump::import(&mut store, &dump).unwrap();
    // ... and only into an empty store: a second import is refused, naming what is
    // there.
    let err = dump::import(&mut store, &dump).unwrap_err();
    assert!(matches!(err, ImportError::NotEmpty(_)), "{err}");
    assert!(
        err.to_string().contains("8 providers") && err.to_string().contains("empty store"),
        "{err}"
    );
}

#[test]
fn not_json_is_named_as_such() {
    let err = dump::parse(b"PGDMP\x01").unwrap_err().to_string();
    assert!(err.starts_with("not an allot dump"), "{err}");
}

/// SQLite to PostgreSQL and back (`ALLOT_TEST_POSTGRES_URL`): the same view on
/// PostgreSQL, and the same dump out of each store.
#[test]
fn a_deployment_moves_from_sqlite_to_postgres_and_back() {
    let Some(db) = pg::PgDatabase::new() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (source_url, before) = source(&dir);
    let bytes = dump_bytes(&source_url, 1_000);
    let mut target = Store::open(&db.url).unwrap();
    dump::import(&mut target, &dump::parse(&bytes).unwrap()).unwrap();
    drop(target);
    let on_postgres = Store::open(&db.url).unwrap().load().unwrap();
    assert_eq!(everything(&on_postgres), everything(&before));
    assert!(on_postgres.check_usage_index());
    assert_eq!(dump_bytes(&db.url, 1_000), bytes);
    // Back into a fresh SQLite database.
    let back_url = url(&dir, "back.db");
    let mut back = Store::open(&back_url).unwrap();
    dump::import(&mut back, &dump::parse(&bytes).unwrap()).unwrap();
    drop(back);
    assert_eq!(dump_bytes(&back_url, 1_000), bytes);
}
