//! `/metrics`' counts of the named shapes (issue 47) on the `flat` shape of
//! BENCHMARKS.md at 10,000 roots with 20 named shapes: each `allot_headroom{shape}`
//! equals `GET /headroom?shape=NAME`, and both equal a brute-force count made here
//! from what the API says of every provider (its inventories, usages, traits and
//! aggregates), pick after pick; `allot_stranded{resourcetype}` equals the free units,
//! counted here, on the roots where not one instance of any shape fits now.
//!
//! The brute force knows the flat shape's form only (roots without children, shared
//! disk pools tied to racks by aggregates); every figure it counts with is read over
//! HTTP. Its picks follow the search's order, as headroom is defined (docs/api.md,
//! "Headroom"): roots in creation order; in each, every class from the root's own
//! inventory first, then from the pools its aggregates reach.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{bench, call, Client, Server};

/// The 20 shapes (name, a tab, the request; `#` comments), shared with
/// scripts/bench-shapes.
const SHAPES: &str = include_str!("../../../tests/shapes/flat-20.tsv");

fn shapes() -> Vec<(&'static str, &'static str)> {
    SHAPES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split_once('\t').expect("name, a tab, the request"))
        .collect()
}

const TRAITS: [&str; 5] = [
    "HW_CPU_X86_AVX2",
    "HW_CPU_X86_AVX512F",
    "CUSTOM_GOLD",
    "COMPUTE_STATUS_DISABLED",
    "MISC_SHARES_VIA_AGGREGATE",
];

/// One inventory as the count needs it.
#[derive(Debug, Clone)]
struct Inv {
    capacity: i128,
    used: i128,
    min_unit: u64,
    max_unit: u64,
    step: u64,
}

impl Inv {
    fn admits(&self, amount: u64) -> bool {
        amount >= self.min_unit && amount <= self.max_unit && amount.is_multiple_of(self.step)
    }
}

/// A provider as the API describes it.
#[derive(Debug, Clone)]
struct Provider {
    inventories: BTreeMap<String, Inv>,
    traits: BTreeSet<String>,
    aggregates: BTreeSet<String>,
}

/// Every provider, in listing (creation) order, read over HTTP.
fn read_world(client: &Client) -> Vec<Provider> {
    let mut listed: Vec<(String, BTreeMap<String, u64>)> = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let page = match &marker {
            Some(m) => format!("/resource_providers?with_usages=true&limit=2000&marker={m}"),
            None => "/resource_providers?with_usages=true&limit=2000".to_owned(),
        };
        let body = call(client, "GET", &page, None, 200);
        let rps = body["resource_providers"].as_array().unwrap().clone();
        if rps.is_empty() {
            break;
        }
        for rp in &rps {
            let usages = rp["usages"].as_object().unwrap();
            let pending = rp["pending"].as_object().unwrap();
            assert!(pending.values().all(|v| v == 0), "no claims: {rp}");
            let used = usages
                .iter()
                .map(|(c, v)| (c.clone(), v.as_u64().unwrap()))
                .collect();
            listed.push((rp["uuid"].as_str().unwrap().to_owned(), used));
        }
        marker = Some(listed.last().unwrap().0.clone());
    }
    let mut with_trait: HashMap<&str, BTreeSet<String>> = HashMap::new();
    for t in TRAITS {
        let body = call(
            client,
            "GET",
            &format!("/resource_providers?required={t}"),
            None,
            200,
        );
        let uuids = body["resource_providers"].as_array().unwrap();
        with_trait.insert(
            t,
            uuids
                .iter()
                .map(|p| p["uuid"].as_str().unwrap().to_owned())
                .collect(),
        );
    }
    listed
        .into_iter()
        .map(|(uuid, used)| {
            let inv = call(
                client,
                "GET",
                &format!("/resource_providers/{uuid}/inventories"),
                None,
                200,
            );
            let inventories = inv["inventories"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(class, i)| {
                    let n = |k: &str| i[k].as_u64().unwrap();
                    let capacity = ((n("total") - n("reserved")) as f64
                        * i["allocation_ratio"].as_f64().unwrap())
                    .floor() as i128;
                    let inv = Inv {
                        capacity,
                        used: used.get(class).copied().unwrap_or(0) as i128,
                        min_unit: n("min_unit"),
                        max_unit: n("max_unit"),
                        step: n("step_size"),
                    };
                    (class.clone(), inv)
                })
                .collect();
            let aggs = call(
                client,
                "GET",
                &format!("/resource_providers/{uuid}/aggregates"),
                None,
                200,
            );
            let aggregates = aggs["aggregates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            let traits = TRAITS
                .iter()
                .filter(|t| with_trait[*t].contains(&uuid))
                .map(|t| t.to_string())
                .collect();
            Provider {
                inventories,
                traits,
                aggregates,
            }
        })
        .collect()
}

/// A shape's request as the count reads it: amounts by class, required and
/// forbidden traits.
struct Wants {
    amounts: Vec<(String, u64)>,
    required: Vec<String>,
    forbidden: Vec<String>,
}

fn wants(request: &str) -> Wants {
    let mut w = Wants {
        amounts: vec![],
        required: vec![],
        forbidden: vec![],
    };
    for pair in request.split('&') {
        let (key, value) = pair.split_once('=').unwrap();
        for item in value.split(',') {
            match key {
                "resources" => {
                    let (c, n) = item.split_once(':').unwrap();
                    w.amounts.push((c.to_owned(), n.parse().unwrap()));
                }
                "required" => match item.strip_prefix('!') {
                    Some(t) => w.forbidden.push(t.to_owned()),
                    None => w.required.push(item.to_owned()),
                },
                other => panic!("the brute force reads no {other}"),
            }
        }
    }
    w
}

/// The brute force over a world: each shape's headroom (pick after pick, roots in
/// order, the pools' use carried from root to root) and whether one instance fits
/// on each root alone, now.
struct Brute<'w> {
    world: &'w [Provider],
    /// The sharing pools each root reaches, in listing order.
    pools: Vec<Vec<usize>>,
    sharing: Vec<bool>,
}

impl<'w> Brute<'w> {
    fn new(world: &'w [Provider]) -> Self {
        let sharing: Vec<bool> = world
            .iter()
            .map(|p| p.traits.contains("MISC_SHARES_VIA_AGGREGATE"))
            .collect();
        let pools = world
            .iter()
            .map(|p| {
                (0..world.len())
                    .filter(|&s| sharing[s] && !world[s].aggregates.is_disjoint(&p.aggregates))
                    .collect()
            })
            .collect();
        Brute {
            world,
            pools,
            sharing,
        }
    }

    /// One pick of `w` at root `r` on top of `taken` (extra use by provider and
    /// class): what it takes, or None.
    fn pick(
        &self,
        w: &Wants,
        r: usize,
        taken: &HashMap<(usize, String), i128>,
    ) -> Option<Vec<(usize, String, u64)>> {
        let root = &self.world[r];
        if !w.required.iter().all(|t| root.traits.contains(t))
            || w.forbidden.iter().any(|t| root.traits.contains(t))
        {
            return None;
        }
        let mut out = Vec::new();
        for (class, amount) in &w.amounts {
            let options = std::iter::once(r).chain(self.pools[r].iter().copied());
            let found = options.into_iter().find(|&p| {
                self.world[p].inventories.get(class).is_some_and(|inv| {
                    let extra = taken.get(&(p, class.clone())).copied().unwrap_or(0);
                    inv.admits(*amount) && inv.capacity - inv.used - extra >= i128::from(*amount)
                })
            })?;
            out.push((found, class.clone(), *amount));
        }
        Some(out)
    }

    fn headroom(&self, w: &Wants) -> u64 {
        let mut taken: HashMap<(usize, String), i128> = HashMap::new();
        let mut total = 0;
        for r in (0..self.world.len()).filter(|&r| !self.sharing[r]) {
            while let Some(took) = self.pick(w, r, &taken) {
                for (p, class, amount) in took {
                    *taken.entry((p, class)).or_default() += i128::from(amount);
                }
                total += 1;
            }
        }
        total
    }

    /// Free units by class on the roots where no shape fits alone now.
    fn stranded(&self, shapes: &[Wants]) -> BTreeMap<String, u64> {
        let none = HashMap::new();
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for r in (0..self.world.len()).filter(|&r| !self.sharing[r]) {
            if shapes.iter().any(|w| self.pick(w, r, &none).is_some()) {
                continue;
            }
            for (class, inv) in &self.world[r].inventories {
                let free = (inv.capacity - inv.used).max(0) as u64;
                if free > 0 {
                    *out.entry(class.clone()).or_default() += free;
                }
            }
        }
        out
    }
}

/// `/metrics`' series of one family, by its one label's value.
fn family(text: &str, name: &str, label: &str) -> BTreeMap<String, u64> {
    let prefix = format!("{name}{{{label}=\"");
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (value, number) = rest.split_once("\"} ")?;
            Some((value.to_owned(), number.parse::<f64>().ok()? as u64))
        })
        .collect()
}

fn age(text: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix("allot_shape_counts_age_seconds ")?
            .parse()
            .ok()
    })
}

#[test]
fn shape_counts_at_flat_10000_equal_headroom_and_a_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_args(
        &format!("sqlite:{}", dir.path().join("allot.db").display()),
        &["--bind", "127.0.0.1:0", "--shape-counts-interval", "1"],
        &[],
    );
    let client = server.client();
    let url = format!("http://{}", server.addr);
    bench(&["seed", "--shape", "flat", "--roots", "10000", "--url", &url]);
    // Before any shape: the count of shapes, and no counts.
    let (_, text) = client.call("GET", "/metrics", None);
    assert!(text.contains("\nallot_shapes 0\n"), "{text}");
    assert!(age(&text).is_none());
    let shapes = shapes();
    assert_eq!(shapes.len(), 20);
    for &(name, request) in &shapes {
        let path = format!("/shapes/{}", name.replace(' ', "%20"));
        call(
            &client,
            "PUT",
            &path,
            Some(json!({ "request": request })),
            201,
        );
    }
    // The first scrape starts the count; a later one reads it.
    let began = Instant::now();
    let text = loop {
        let (status, text) = client.call("GET", "/metrics", None);
        assert_eq!(status, 200);
        if age(&text).is_some() {
            break text;
        }
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "no counts: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(text.contains("\nallot_shapes 20\n"), "{text}");
    let headroom = family(&text, "allot_headroom", "shape");
    let stranded = family(&text, "allot_stranded", "resourcetype");
    assert_eq!(headroom.len(), 20, "{text}");

    let world = read_world(&client);
    assert_eq!(world.len(), 10_010);
    let brute = Brute::new(&world);
    let all: Vec<Wants> = shapes.iter().map(|(_, r)| wants(r)).collect();
    for ((name, request), w) in shapes.iter().zip(&all) {
        let by_name = call(
            &client,
            "GET",
            &format!("/headroom?shape={}", name.replace(' ', "%20")),
            None,
            200,
        );
        let by_query = call(&client, "GET", &format!("/headroom?{request}"), None, 200);
        let counted = brute.headroom(w);
        assert_eq!(by_name["headroom"], by_query["headroom"], "{name}");
        assert_eq!(
            by_name["headroom"].as_u64(),
            Some(counted),
            "{name}: the brute force"
        );
        assert_eq!(headroom[*name], counted, "{name}: /metrics");
    }
    // The shapes are varied: some fit nowhere, some everywhere they may.
    assert_eq!(headroom["past max_unit"], 0);
    assert!(
        headroom["pool disk"] > 0 && headroom["small"] > 100_000,
        "{headroom:?}"
    );
    let expected = brute.stranded(&all);
    assert!(!expected.is_empty() && expected["VCPU"] > 0, "{expected:?}");
    assert_eq!(stranded, expected, "allot_stranded");
}
