//! Pending claims through the real binary over real HTTP: a mass start of 64
//! concurrent clients never over-commits and every refusal is a clean 409, and
//! claims answered 201 survive a `kill -9` straight after, expiry included.
//! (Expiry at its instant, confirms and releases are tested in-process with an
//! injected clock: `allot-server/tests/claims.rs`.)

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use serde_json::Value;
use support::{json, Client, Server};
use uuid::Uuid;

/// Providers of the mass start, and what each has.
const PROVIDERS: usize = 3;
const VCPU: u64 = 20;
const CLIENTS: usize = 64;

fn provider_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0xc1a1_3000_0000_4000_8000_0000_0000_0000 + i as u128)
}

/// Creates provider `i` with `VCPU` VCPU.
fn provider(client: &Client, i: usize) {
    let body = format!(r#"{{"name": "mass{i}", "uuid": "{}"}}"#, provider_uuid(i));
    let (status, body) = client.call("POST", "/resource_providers", Some(&body));
    assert_eq!(status, 200, "{body}");
    let body = format!(
        r#"{{"resource_provider_generation": 0, "inventories": {{"VCPU": {{"total": {VCPU}}}}}}}"#
    );
    let path = format!("/resource_providers/{}/inventories", provider_uuid(i));
    let (status, body) = client.call("PUT", &path, Some(&body));
    assert_eq!(status, 200, "{body}");
}

fn claim_body(consumer: Uuid, provider: usize, expires_in: &str) -> String {
    format!(
        r#"{{"consumer_uuid": "{consumer}", "project_id": "p", "user_id": "u",
            "consumer_type": "INSTANCE", "tag": "mass-start", "expires_in": {expires_in},
            "allocations": {{"{}": {{"resources": {{"VCPU": 1}}}}}}}}"#,
        provider_uuid(provider)
    )
}

fn pending_vcpu(client: &Client, provider: usize) -> u64 {
    let (status, body) = client.call(
        "GET",
        &format!("/resource_providers/{}/pending", provider_uuid(provider)),
        None,
    );
    assert_eq!(status, 200, "{body}");
    json(&body)["pending"]["VCPU"].as_u64().unwrap_or(0)
}

#[test]
fn a_mass_start_never_over_commits() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("allot.db"));
    let client = server.client();
    for i in 0..PROVIDERS {
        provider(&client, i);
    }
    let accepted = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let (client, accepted, start) = (client.clone(), accepted.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                // Each client claims on the providers in turn until all refuse.
                let mut full = [false; PROVIDERS];
                let mut n = 0u128;
                while full.iter().any(|f| !f) {
                    let p = (t + n as usize) % PROVIDERS;
                    n += 1;
                    if full[p] {
                        continue;
                    }
                    let consumer = Uuid::from_u128(((t as u128) << 64) + n);
                    let (status, body) =
                        client.call("POST", "/claims", Some(&claim_body(consumer, p, "null")));
                    match status {
                        201 => {
                            let claim = json(&body);
                            assert_eq!(claim["state"], "pending", "{body}");
                            accepted.fetch_add(1, Ordering::Relaxed);
                        }
                        409 => {
                            let error = &json(&body)["errors"][0];
                            assert_eq!(error["code"], "allot.claim.does_not_fit", "{body}");
                            assert!(
                                error["detail"].as_str().is_some_and(|d| d.contains("VCPU")
                                    && d.contains(&provider_uuid(p).to_string())),
                                "{body}"
                            );
                            full[p] = true;
                        }
                        other => panic!("claim answered {other}: {body}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(accepted.load(Ordering::Relaxed), PROVIDERS as u64 * VCPU);
    for i in 0..PROVIDERS {
        assert_eq!(pending_vcpu(&client, i), VCPU, "provider {i}");
    }
    // The full providers are offered to nobody, and no allocation fits either.
    let (status, body) = client.call("GET", "/allocation_candidates?resources=VCPU:1", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["allocation_requests"].as_array().unwrap().len(),
        0
    );
    let body = format!(
        r#"{{"allocations": {{"{}": {{"resources": {{"VCPU": 1}}}}}},
            "project_id": "p", "user_id": "u", "consumer_generation": null,
            "consumer_type": "INSTANCE"}}"#,
        provider_uuid(0)
    );
    let (status, body) = client.call(
        "PUT",
        &format!("/allocations/{}", Uuid::new_v4()),
        Some(&body),
    );
    assert_eq!(status, 409, "{body}");
    // The usages of Placement's API report allocations only.
    let (_, body) = client.call(
        "GET",
        &format!("/resource_providers/{}/usages", provider_uuid(0)),
        None,
    );
    assert_eq!(json(&body)["usages"]["VCPU"], 0);
}

#[test]
fn claims_answered_201_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("allot.db");
    let server = Server::start(&db);
    let client = server.client();
    provider(&client, 0);
    let mut made = Vec::new();
    for (n, expires_in) in ["3600", "null", "86400"].iter().enumerate() {
        let consumer = Uuid::from_u128(0xabc0 + n as u128);
        let (status, body) = client.call(
            "POST",
            "/claims",
            Some(&claim_body(consumer, 0, expires_in)),
        );
        assert_eq!(status, 201, "{body}");
        made.push(json(&body));
    }
    // Straight after the last 201: no graceful shutdown, no flush.
    server.kill9();

    let server = Server::start(&db);
    let client = server.client();
    for claim in &made {
        let uuid = claim["uuid"].as_str().unwrap();
        let (status, body) = client.call("GET", &format!("/claims/{uuid}"), None);
        assert_eq!(status, 200, "{body}");
        let after = json(&body);
        for field in [
            "uuid",
            "consumer_uuid",
            "state",
            "tag",
            "created_at",
            "expires_at",
            "allocations",
        ] {
            assert_eq!(after[field], claim[field], "{field} of {uuid}");
        }
    }
    assert_eq!(made[1]["expires_at"], Value::Null);
    assert!(made[0]["expires_at"].is_string());
    assert_eq!(pending_vcpu(&client, 0), 3);
    let (_, body) = client.call("GET", "/allocation_candidates?resources=VCPU:18", None);
    assert_eq!(
        json(&body)["allocation_requests"].as_array().unwrap().len(),
        0
    );
    let (_, body) = client.call("GET", "/allocation_candidates?resources=VCPU:17", None);
    assert_eq!(
        json(&body)["allocation_requests"].as_array().unwrap().len(),
        1
    );
    server.terminate();
}
