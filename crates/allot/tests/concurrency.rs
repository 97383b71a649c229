//! Claims never over-commit under concurrency, through the real binary over real HTTP,
//! and what was accepted survives a `kill -9`.
//!
//! 5 providers with 20 VCPU each (100 in all); 32 client threads race to make 384
//! one-unit claims (`PUT /allocations/{new consumer}` at 1.39), each on a provider
//! chosen round-robin, so that every provider is asked for far more than it has.
//! Exactly 100 claims must be accepted (204) and the rest refused (409), every
//! provider must end at exactly 20 used (and a watcher polling the usages while the
//! claims run must never see more), and after a `kill -9` and a restart on the same
//! database every accepted claim, and nothing else, must be there.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use support::{json, Client, Server};
use uuid::Uuid;

const PROVIDERS: usize = 5;
const VCPU_PER_PROVIDER: u64 = 20;
const THREADS: usize = 32;
const CLAIMS: usize = 384;

fn provider_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0x0a11_0700_0000_4000_8000_0000_0000_0000 + i as u128)
}

fn consumer_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0xc0a5_0000_0000_4000_8000_0000_0000_0000 + i as u128)
}

/// VCPU used on provider `i`, as `GET /resource_providers/{uuid}/usages` says.
fn vcpu_used(client: &Client, i: usize) -> u64 {
    let (status, body) = client.call(
        "GET",
        &format!("/resource_providers/{}/usages", provider_uuid(i)),
        None,
    );
    assert_eq!(status, 200, "{body}");
    json(&body)["usages"]["VCPU"].as_u64().unwrap_or(0)
}

/// One claim: one VCPU on provider `provider` for a new consumer.
fn claim(client: &Client, consumer: Uuid, provider: usize) -> u16 {
    let body = format!(
        r#"{{"allocations": {{"{}": {{"resources": {{"VCPU": 1}}}}}},
            "project_id": "project", "user_id": "user",
            "consumer_generation": null, "consumer_type": "INSTANCE"}}"#,
        provider_uuid(provider)
    );
    let (status, response) = client.request(
        "PUT",
        &format!("/allocations/{consumer}"),
        Some(&body),
        "1.39",
    );
    assert!(
        status == 204 || status == 409,
        "claim {consumer} on provider {provider}: {status} {response}"
    );
    if status == 409 {
        assert!(
            response.contains("would exceed the capacity"),
            "a refusal for another reason than capacity: {response}"
        );
    }
    status
}

/// The claim of consumer `c` as `GET /allocations/{c}` shows it: provider index and
/// VCPU, or None when it holds nothing.
fn held(client: &Client, c: Uuid) -> Option<(usize, u64)> {
    let (status, body) = client.request("GET", &format!("/allocations/{c}"), None, "1.39");
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    let allocations = v["allocations"].as_object().expect("allocations object");
    if allocations.is_empty() {
        return None;
    }
    assert_eq!(allocations.len(), 1, "{body}");
    let (rp, resources) = allocations.iter().next().unwrap();
    let index = (0..PROVIDERS)
        .find(|i| provider_uuid(*i).to_string() == *rp)
        .unwrap_or_else(|| panic!("unknown provider in {body}"));
    assert_eq!(v["project_id"], "project", "{body}");
    assert_eq!(v["user_id"], "user", "{body}");
    assert_eq!(v["consumer_type"], "INSTANCE", "{body}");
    Some((index, resources["resources"]["VCPU"].as_u64().unwrap()))
}

#[test]
fn concurrent_claims_never_over_commit_and_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("allot.db");
    let server = Server::start(&db);
    let client = server.client();

    for i in 0..PROVIDERS {
        let body = format!(r#"{{"name": "cn{i}", "uuid": "{}"}}"#, provider_uuid(i));
        let (status, body) = client.call("POST", "/resource_providers", Some(&body));
        assert_eq!(status, 200, "{body}");
        let inventory = format!(
            r#"{{"resource_provider_generation": 0,
                "inventories": {{"VCPU": {{"total": {VCPU_PER_PROVIDER}}}}}}}"#
        );
        let (status, body) = client.call(
            "PUT",
            &format!("/resource_providers/{}/inventories", provider_uuid(i)),
            Some(&inventory),
        );
        assert_eq!(status, 200, "{body}");
    }

    // A watcher polls every provider's usage for as long as the claims run.
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let client = client.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut polls = 0;
            while !done.load(Ordering::Relaxed) {
                for i in 0..PROVIDERS {
                    let used = vcpu_used(&client, i);
                    assert!(
                        used <= VCPU_PER_PROVIDER,
                        "provider {i} seen at {used} VCPU used"
                    );
                }
                polls += 1;
            }
            polls
        })
    };

    // The claims: thread t makes claims t, t + THREADS, ...; claim n goes to provider
    // n % PROVIDERS. All threads start together.
    let outcomes: Arc<Mutex<BTreeMap<usize, u16>>> = Arc::default();
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let client = client.clone();
            let outcomes = outcomes.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                for n in (t..CLAIMS).step_by(THREADS) {
                    let status = claim(&client, consumer_uuid(n), n % PROVIDERS);
                    outcomes.lock().unwrap().insert(n, status);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client thread failed");
    }
    done.store(true, Ordering::Relaxed);
    let polls = watcher.join().expect("the watcher saw an over-commit");
    assert!(polls > 0);

    let outcomes = Arc::try_unwrap(outcomes).unwrap().into_inner().unwrap();
    assert_eq!(outcomes.len(), CLAIMS);
    let accepted: Vec<usize> = outcomes
        .iter()
        .filter(|(_, s)| **s == 204)
        .map(|(n, _)| *n)
        .collect();
    let refused = outcomes.values().filter(|s| **s == 409).count();
    assert_eq!(
        accepted.len() as u64,
        PROVIDERS as u64 * VCPU_PER_PROVIDER,
        "accepted"
    );
    assert_eq!(accepted.len() + refused, CLAIMS);
    let mut per_provider = [0u64; PROVIDERS];
    for n in &accepted {
        per_provider[n % PROVIDERS] += 1;
    }
    for (i, accepted) in per_provider.iter().enumerate() {
        assert_eq!(*accepted, VCPU_PER_PROVIDER, "claims accepted on {i}");
        assert_eq!(vcpu_used(&client, i), VCPU_PER_PROVIDER, "usage of {i}");
    }

    // Die without warning, come back on the same database: every accepted claim is
    // there as it was made, no refused one is, and the usages are unchanged.
    server.kill9();
    let server = Server::start(&db);
    let client = server.client();
    for (n, status) in &outcomes {
        let expected = (*status == 204).then_some((n % PROVIDERS, 1));
        assert_eq!(held(&client, consumer_uuid(*n)), expected, "consumer {n}");
    }
    for i in 0..PROVIDERS {
        assert_eq!(vcpu_used(&client, i), VCPU_PER_PROVIDER, "usage of {i}");
    }
    server.terminate();
}
