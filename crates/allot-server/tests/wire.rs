//! The wire contract, pinned: full response bodies of every URL family, as exact JSON
//! text, at a few microversions each, and those of the writes that answer with a body
//! (providers, inventories, traits, aggregates). Key order, field presence by microversion and
//! number formatting are all part of what clients see; a change here is a change of
//! the API, not a refactoring.

mod support;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const ROOT: &str = "00000000-0000-0000-0000-0000000000a1";
const CHILD: &str = "00000000-0000-0000-0000-0000000000b2";
const AGG: &str = "00000000-0000-0000-0000-0000000000c3";
const CONSUMER: &str = "00000000-0000-0000-0000-0000000000d4";

async fn call(
    app: &axum::Router,
    method: Method,
    path: &str,
    version: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("x-auth-token", "admin")
        .header("accept", "application/json")
        .header("openstack-api-version", format!("placement {version}"));
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(&b).unwrap())),
        None => req.body(Body::empty()),
    };
    let response = app.clone().oneshot(req.unwrap()).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// Sends a write that must succeed.
async fn write(app: &axum::Router, method: Method, path: &str, version: &str, body: Value) {
    let (status, text) = call(app, method, path, version, Some(body)).await;
    assert!(status.is_success(), "{path}: {status} {text}");
}

async fn generation(app: &axum::Router, uuid: &str) -> u64 {
    let (_, text) = call(
        app,
        Method::GET,
        &format!("/resource_providers/{uuid}"),
        "1.0",
        None,
    )
    .await;
    serde_json::from_str::<Value>(&text).unwrap()["generation"]
        .as_u64()
        .unwrap()
}

/// A root with a child, inventories on both, a trait and an aggregate on the root, a
/// custom class and trait, and one consumer's allocation.
async fn cloud() -> (axum::Router, tempfile::TempDir) {
    let (app, dir) = support::app();
    let v = "1.39";
    write(
        &app,
        Method::POST,
        "/resource_providers",
        v,
        json!({"name": "root", "uuid": ROOT}),
    )
    .await;
    write(
        &app,
        Method::POST,
        "/resource_providers",
        v,
        json!({"name": "child", "uuid": CHILD, "parent_provider_uuid": ROOT}),
    )
    .await;
    let root_inventories = json!({
        "resource_provider_generation": generation(&app, ROOT).await,
        "inventories": {
            "VCPU": {"total": 8, "allocation_ratio": 2.0},
            "DISK_GB": {"total": 100, "reserved": 10, "step_size": 5},
        },
    });
    write(
        &app,
        Method::PUT,
        &format!("/resource_providers/{ROOT}/inventories"),
        v,
        root_inventories,
    )
    .await;
    let child_inventories = json!({
        "resource_provider_generation": generation(&app, CHILD).await,
        "inventories": {"VGPU": {"total": 2, "max_unit": 1}},
    });
    write(
        &app,
        Method::PUT,
        &format!("/resource_providers/{CHILD}/inventories"),
        v,
        child_inventories,
    )
    .await;
    let (status, _) = call(&app, Method::PUT, "/resource_classes/CUSTOM_GOLD", v, None).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = call(&app, Method::PUT, "/traits/CUSTOM_FAST", v, None).await;
    assert_eq!(status, StatusCode::CREATED);
    let traits = json!({
        "resource_provider_generation": generation(&app, ROOT).await,
        "traits": ["HW_CPU_X86_AVX2", "CUSTOM_FAST"],
    });
    write(
        &app,
        Method::PUT,
        &format!("/resource_providers/{ROOT}/traits"),
        v,
        traits,
    )
    .await;
    let aggregates = json!({
        "resource_provider_generation": generation(&app, ROOT).await,
        "aggregates": [AGG],
    });
    write(
        &app,
        Method::PUT,
        &format!("/resource_providers/{ROOT}/aggregates"),
        v,
        aggregates,
    )
    .await;
    let allocation = json!({
        "allocations": {
            ROOT: {"resources": {"VCPU": 2, "DISK_GB": 20}},
            CHILD: {"resources": {"VGPU": 1}},
        },
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": null,
        "consumer_type": "INSTANCE",
    });
    write(
        &app,
        Method::PUT,
        &format!("/allocations/{CONSUMER}"),
        v,
        allocation,
    )
    .await;
    (app, dir)
}

/// (microversion, path, the exact body)
const PINNED: &[(&str, &str, &str)] = &[
    (
        "1.0",
        "/",
        r#"{"versions":[{"id":"v1.0","links":[{"href":"","rel":"self"}],"max_version":"1.39","min_version":"1.0","status":"CURRENT"}]}"#,
    ),
    (
        "1.2",
        "/resource_classes/CUSTOM_GOLD",
        r#"{"links":[{"href":"/resource_classes/CUSTOM_GOLD","rel":"self"}],"name":"CUSTOM_GOLD"}"#,
    ),
    (
        "1.7",
        "/resource_classes/VCPU",
        r#"{"links":[{"href":"/resource_classes/VCPU","rel":"self"}],"name":"VCPU"}"#,
    ),
    (
        "1.6",
        "/traits?name=in:CUSTOM_FAST,HW_CPU_X86_AVX2,HW_CPU_X86_SSE",
        r#"{"traits":["CUSTOM_FAST","HW_CPU_X86_AVX2","HW_CPU_X86_SSE"]}"#,
    ),
    (
        "1.6",
        "/traits?associated=true",
        r#"{"traits":["CUSTOM_FAST","HW_CPU_X86_AVX2"]}"#,
    ),
    (
        "1.0",
        "/resource_providers/{ROOT}",
        r#"{"generation":4,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/usages","rel":"usages"}],"name":"root","uuid":"00000000-0000-0000-0000-0000000000a1"}"#,
    ),
    (
        "1.6",
        "/resource_providers/{CHILD}",
        r#"{"generation":2,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/traits","rel":"traits"}],"name":"child","uuid":"00000000-0000-0000-0000-0000000000b2"}"#,
    ),
    (
        "1.14",
        "/resource_providers/{CHILD}",
        r#"{"generation":2,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/traits","rel":"traits"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/allocations","rel":"allocations"}],"name":"child","parent_provider_uuid":"00000000-0000-0000-0000-0000000000a1","root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","uuid":"00000000-0000-0000-0000-0000000000b2"}"#,
    ),
    (
        "1.39",
        "/resource_providers/{ROOT}",
        r#"{"generation":4,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/traits","rel":"traits"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/allocations","rel":"allocations"}],"name":"root","parent_provider_uuid":null,"root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","uuid":"00000000-0000-0000-0000-0000000000a1"}"#,
    ),
    (
        "1.14",
        "/resource_providers",
        r#"{"resource_providers":[{"generation":4,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/traits","rel":"traits"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000a1/allocations","rel":"allocations"}],"name":"root","parent_provider_uuid":null,"root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","uuid":"00000000-0000-0000-0000-0000000000a1"},{"generation":2,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/traits","rel":"traits"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/allocations","rel":"allocations"}],"name":"child","parent_provider_uuid":"00000000-0000-0000-0000-0000000000a1","root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","uuid":"00000000-0000-0000-0000-0000000000b2"}]}"#,
    ),
    (
        "1.0",
        "/resource_providers?name=child",
        r#"{"resource_providers":[{"generation":2,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000b2/usages","rel":"usages"}],"name":"child","uuid":"00000000-0000-0000-0000-0000000000b2"}]}"#,
    ),
    (
        "1.0",
        "/resource_providers/{ROOT}/inventories",
        r#"{"inventories":{"DISK_GB":{"allocation_ratio":1.0,"max_unit":2147483647,"min_unit":1,"reserved":10,"step_size":5,"total":100},"VCPU":{"allocation_ratio":2.0,"max_unit":2147483647,"min_unit":1,"reserved":0,"step_size":1,"total":8}},"resource_provider_generation":4}"#,
    ),
    (
        "1.39",
        "/resource_providers/{CHILD}/inventories",
        r#"{"inventories":{"VGPU":{"allocation_ratio":1.0,"max_unit":1,"min_unit":1,"reserved":0,"step_size":1,"total":2}},"resource_provider_generation":2}"#,
    ),
    (
        "1.0",
        "/resource_providers/{ROOT}/inventories/VCPU",
        r#"{"allocation_ratio":2.0,"max_unit":2147483647,"min_unit":1,"reserved":0,"resource_provider_generation":4,"step_size":1,"total":8}"#,
    ),
    (
        "1.39",
        "/resource_providers/{ROOT}/inventories/DISK_GB",
        r#"{"allocation_ratio":1.0,"max_unit":2147483647,"min_unit":1,"reserved":10,"resource_provider_generation":4,"step_size":5,"total":100}"#,
    ),
    (
        "1.1",
        "/resource_providers/{ROOT}/aggregates",
        r#"{"aggregates":["00000000-0000-0000-0000-0000000000c3"]}"#,
    ),
    (
        "1.19",
        "/resource_providers/{ROOT}/aggregates",
        r#"{"aggregates":["00000000-0000-0000-0000-0000000000c3"],"resource_provider_generation":4}"#,
    ),
    (
        "1.19",
        "/resource_providers/{CHILD}/aggregates",
        r#"{"aggregates":[],"resource_provider_generation":2}"#,
    ),
    (
        "1.6",
        "/resource_providers/{ROOT}/traits",
        r#"{"resource_provider_generation":4,"traits":["CUSTOM_FAST","HW_CPU_X86_AVX2"]}"#,
    ),
    (
        "1.0",
        "/resource_providers/{ROOT}/usages",
        r#"{"resource_provider_generation":4,"usages":{"DISK_GB":20,"VCPU":2}}"#,
    ),
    (
        "1.39",
        "/resource_providers/{CHILD}/usages",
        r#"{"resource_provider_generation":2,"usages":{"VGPU":1}}"#,
    ),
    (
        "1.9",
        "/usages?project_id=p",
        r#"{"usages":{"DISK_GB":20,"VCPU":2,"VGPU":1}}"#,
    ),
    (
        "1.38",
        "/usages?project_id=p",
        r#"{"usages":{"INSTANCE":{"DISK_GB":20,"VCPU":2,"VGPU":1,"consumer_count":1}}}"#,
    ),
    ("1.38", "/usages?project_id=nobody", r#"{"usages":{}}"#),
    (
        "1.0",
        "/allocations/{CONSUMER}",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"generation":4,"resources":{"DISK_GB":20,"VCPU":2}},"00000000-0000-0000-0000-0000000000b2":{"generation":2,"resources":{"VGPU":1}}}}"#,
    ),
    (
        "1.12",
        "/allocations/{CONSUMER}",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"generation":4,"resources":{"DISK_GB":20,"VCPU":2}},"00000000-0000-0000-0000-0000000000b2":{"generation":2,"resources":{"VGPU":1}}},"project_id":"p","user_id":"u"}"#,
    ),
    (
        "1.28",
        "/allocations/{CONSUMER}",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"generation":4,"resources":{"DISK_GB":20,"VCPU":2}},"00000000-0000-0000-0000-0000000000b2":{"generation":2,"resources":{"VGPU":1}}},"project_id":"p","user_id":"u","consumer_generation":1}"#,
    ),
    (
        "1.38",
        "/allocations/{CONSUMER}",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"generation":4,"resources":{"DISK_GB":20,"VCPU":2}},"00000000-0000-0000-0000-0000000000b2":{"generation":2,"resources":{"VGPU":1}}},"project_id":"p","user_id":"u","consumer_generation":1,"consumer_type":"INSTANCE"}"#,
    ),
    (
        "1.38",
        "/allocations/00000000-0000-0000-0000-0000000000ee",
        r#"{"allocations":{}}"#,
    ),
    (
        "1.0",
        "/resource_providers/{ROOT}/allocations",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000d4":{"resources":{"DISK_GB":20,"VCPU":2}}},"resource_provider_generation":4}"#,
    ),
    (
        "1.12",
        "/resource_providers/{CHILD}/allocations",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000d4":{"resources":{"VGPU":1}}},"resource_provider_generation":2}"#,
    ),
    (
        "1.28",
        "/resource_providers/{ROOT}/allocations",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000d4":{"resources":{"DISK_GB":20,"VCPU":2},"consumer_generation":1}},"resource_provider_generation":4}"#,
    ),
    (
        "1.38",
        "/resource_providers/{CHILD}/allocations",
        r#"{"allocations":{"00000000-0000-0000-0000-0000000000d4":{"resources":{"VGPU":1},"consumer_generation":1}},"resource_provider_generation":2}"#,
    ),
    (
        "1.10",
        "/allocation_candidates?resources=VCPU:1,DISK_GB:5",
        r#"{"allocation_requests":[{"allocations":[{"resource_provider":{"uuid":"00000000-0000-0000-0000-0000000000a1"},"resources":{"DISK_GB":5,"VCPU":1}}]}],"provider_summaries":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"DISK_GB":{"capacity":90,"used":20},"VCPU":{"capacity":16,"used":2}}}}}"#,
    ),
    (
        "1.12",
        "/allocation_candidates?resources=VCPU:1",
        r#"{"allocation_requests":[{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"VCPU":1}}}}],"provider_summaries":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"VCPU":{"capacity":16,"used":2}}}}}"#,
    ),
    (
        "1.17",
        "/allocation_candidates?resources=VCPU:1",
        r#"{"allocation_requests":[{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"VCPU":1}}}}],"provider_summaries":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"VCPU":{"capacity":16,"used":2}},"traits":["HW_CPU_X86_AVX2","CUSTOM_FAST"]}}}"#,
    ),
    (
        "1.27",
        "/allocation_candidates?resources=DISK_GB:5",
        r#"{"allocation_requests":[{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"DISK_GB":5}}}}],"provider_summaries":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"DISK_GB":{"capacity":90,"used":20},"VCPU":{"capacity":16,"used":2}},"traits":["HW_CPU_X86_AVX2","CUSTOM_FAST"]}}}"#,
    ),
    (
        "1.29",
        "/allocation_candidates?resources=VCPU:1,VGPU:1",
        r#"{"allocation_requests":[{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"VCPU":1}},"00000000-0000-0000-0000-0000000000b2":{"resources":{"VGPU":1}}}}],"provider_summaries":{"00000000-0000-0000-0000-0000000000a1":{"parent_provider_uuid":null,"resources":{"DISK_GB":{"capacity":90,"used":20},"VCPU":{"capacity":16,"used":2}},"root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","traits":["HW_CPU_X86_AVX2","CUSTOM_FAST"]},"00000000-0000-0000-0000-0000000000b2":{"parent_provider_uuid":"00000000-0000-0000-0000-0000000000a1","resources":{"VGPU":{"capacity":2,"used":1}},"root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","traits":[]}}}"#,
    ),
    (
        "1.34",
        "/allocation_candidates?resources=VCPU:1&resources_G=VGPU:1&group_policy=none",
        r#"{"allocation_requests":[{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"resources":{"VCPU":1}},"00000000-0000-0000-0000-0000000000b2":{"resources":{"VGPU":1}}},"mappings":{"":["00000000-0000-0000-0000-0000000000a1"],"_G":["00000000-0000-0000-0000-0000000000b2"]}}],"provider_summaries":{"00000000-0000-0000-0000-0000000000a1":{"parent_provider_uuid":null,"resources":{"DISK_GB":{"capacity":90,"used":20},"VCPU":{"capacity":16,"used":2}},"root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","traits":["HW_CPU_X86_AVX2","CUSTOM_FAST"]},"00000000-0000-0000-0000-0000000000b2":{"parent_provider_uuid":"00000000-0000-0000-0000-0000000000a1","resources":{"VGPU":{"capacity":2,"used":1}},"root_provider_uuid":"00000000-0000-0000-0000-0000000000a1","traits":[]}}}"#,
    ),
    (
        "1.39",
        "/allocation_candidates?resources=VCPU:100",
        r#"{"allocation_requests":[],"provider_summaries":{}}"#,
    ),
];

#[tokio::test]
async fn bodies_are_pinned() {
    let (app, _dir) = cloud().await;
    let mut wrong = Vec::new();
    for (version, path, expected) in PINNED {
        let path = path
            .replace("{ROOT}", ROOT)
            .replace("{CHILD}", CHILD)
            .replace("{CONSUMER}", CONSUMER);
        let (status, text) = call(&app, Method::GET, &path, version, None).await;
        assert_eq!(status, StatusCode::OK, "{version} {path}: {text}");
        if text != *expected {
            wrong.push(format!(
                "{version} {path}\n  got:  {text}\n  want: {expected}"
            ));
        }
    }
    assert!(PINNED.len() >= 20);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The allocation GETs write what they hold in the order of today's bodies, not
/// sorted: a consumer's providers in the order the providers were created, each as
/// `generation` then `resources`, then `project_id`, `user_id`, `consumer_generation`,
/// `consumer_type`; a provider's consumers by uuid, each as `resources` then
/// `consumer_generation`. Here the provider created first has the larger uuid, and
/// the consumer written first the larger uuid, so that a sorted map would show.
#[tokio::test]
async fn allocation_bodies_keep_their_order() {
    let (app, _dir) = cloud().await;
    let late = "00000000-0000-0000-0000-000000000001";
    let v = "1.39";
    write(
        &app,
        Method::POST,
        "/resource_providers",
        v,
        json!({"name": "late", "uuid": late}),
    )
    .await;
    let inventories = json!({
        "resource_provider_generation": generation(&app, late).await,
        "inventories": {"VCPU": {"total": 4}, "CUSTOM_GOLD": {"total": 4}},
    });
    write(
        &app,
        Method::PUT,
        &format!("/resource_providers/{late}/inventories"),
        v,
        inventories,
    )
    .await;
    let early = "00000000-0000-0000-0000-000000000002";
    let claim = |consumer_generation: Value| {
        json!({
            "allocations": {
                ROOT: {"resources": {"VCPU": 1}},
                late: {"resources": {"VCPU": 1, "CUSTOM_GOLD": 2}},
            },
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": consumer_generation,
            "consumer_type": "MIGRATION",
        })
    };
    write(
        &app,
        Method::PUT,
        &format!("/allocations/{CONSUMER}"),
        v,
        claim(json!(1)),
    )
    .await;
    write(
        &app,
        Method::PUT,
        &format!("/allocations/{early}"),
        v,
        claim(Value::Null),
    )
    .await;
    let cases = [
        (
            format!("/allocations/{early}"),
            r#"{"allocations":{"00000000-0000-0000-0000-0000000000a1":{"generation":6,"resources":{"VCPU":1}},"00000000-0000-0000-0000-000000000001":{"generation":3,"resources":{"CUSTOM_GOLD":2,"VCPU":1}}},"project_id":"p","user_id":"u","consumer_generation":1,"consumer_type":"MIGRATION"}"#,
        ),
        (
            format!("/resource_providers/{late}/allocations"),
            r#"{"allocations":{"00000000-0000-0000-0000-000000000002":{"resources":{"CUSTOM_GOLD":2,"VCPU":1},"consumer_generation":1},"00000000-0000-0000-0000-0000000000d4":{"resources":{"CUSTOM_GOLD":2,"VCPU":1},"consumer_generation":2}},"resource_provider_generation":3}"#,
        ),
    ];
    for (path, expected) in cases {
        let (status, text) = call(&app, Method::GET, &path, "1.38", None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {text}");
        assert_eq!(text, expected, "{path}");
    }
}

const W1: &str = "00000000-0000-0000-0000-0000000000e1";
const W2: &str = "00000000-0000-0000-0000-0000000000e2";
const W3: &str = "00000000-0000-0000-0000-0000000000e3";

/// (method, microversion, path, request body, status, the exact response body), in
/// the order they are sent: each write's generation is what the one before left.
const WRITES: &[(&str, &str, &str, &str, u16, &str)] = &[
    (
        "POST",
        "1.0",
        "/resource_providers",
        r#"{"name": "w3", "uuid": "{W3}"}"#,
        201,
        "",
    ),
    (
        "POST",
        "1.20",
        "/resource_providers",
        r#"{"name": "w1", "uuid": "{W1}"}"#,
        200,
        r#"{"generation":0,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1/traits","rel":"traits"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1/allocations","rel":"allocations"}],"name":"w1","parent_provider_uuid":null,"root_provider_uuid":"00000000-0000-0000-0000-0000000000e1","uuid":"00000000-0000-0000-0000-0000000000e1"}"#,
    ),
    (
        "POST",
        "1.39",
        "/resource_providers",
        r#"{"name": "w2", "uuid": "{W2}", "parent_provider_uuid": "{W1}"}"#,
        200,
        r#"{"generation":0,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/traits","rel":"traits"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/allocations","rel":"allocations"}],"name":"w2","parent_provider_uuid":"00000000-0000-0000-0000-0000000000e1","root_provider_uuid":"00000000-0000-0000-0000-0000000000e1","uuid":"00000000-0000-0000-0000-0000000000e2"}"#,
    ),
    (
        "PUT",
        "1.0",
        "/resource_providers/{W1}",
        r#"{"name": "w1b"}"#,
        200,
        r#"{"generation":0,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e1/usages","rel":"usages"}],"name":"w1b","uuid":"00000000-0000-0000-0000-0000000000e1"}"#,
    ),
    (
        "PUT",
        "1.14",
        "/resource_providers/{W2}",
        r#"{"name": "w2b", "parent_provider_uuid": "{W1}"}"#,
        200,
        r#"{"generation":0,"links":[{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2","rel":"self"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/inventories","rel":"inventories"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/usages","rel":"usages"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/aggregates","rel":"aggregates"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/traits","rel":"traits"},{"href":"/resource_providers/00000000-0000-0000-0000-0000000000e2/allocations","rel":"allocations"}],"name":"w2b","parent_provider_uuid":"00000000-0000-0000-0000-0000000000e1","root_provider_uuid":"00000000-0000-0000-0000-0000000000e1","uuid":"00000000-0000-0000-0000-0000000000e2"}"#,
    ),
    (
        "PUT",
        "1.0",
        "/resource_providers/{W1}/inventories",
        r#"{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8, "allocation_ratio": 1.5}, "DISK_GB": {"total": 100, "reserved": 4}}}"#,
        200,
        r#"{"inventories":{"DISK_GB":{"allocation_ratio":1.0,"max_unit":2147483647,"min_unit":1,"reserved":4,"step_size":1,"total":100},"VCPU":{"allocation_ratio":1.5,"max_unit":2147483647,"min_unit":1,"reserved":0,"step_size":1,"total":8}},"resource_provider_generation":1}"#,
    ),
    (
        "POST",
        "1.0",
        "/resource_providers/{W1}/inventories",
        r#"{"resource_provider_generation": 1, "resource_class": "MEMORY_MB", "total": 1024, "step_size": 256}"#,
        201,
        r#"{"allocation_ratio":1.0,"max_unit":2147483647,"min_unit":1,"reserved":0,"resource_provider_generation":2,"step_size":256,"total":1024}"#,
    ),
    (
        "PUT",
        "1.39",
        "/resource_providers/{W1}/inventories/VCPU",
        r#"{"resource_provider_generation": 2, "total": 16, "max_unit": 8}"#,
        200,
        r#"{"allocation_ratio":1.0,"max_unit":8,"min_unit":1,"reserved":0,"resource_provider_generation":3,"step_size":1,"total":16}"#,
    ),
    (
        "PUT",
        "1.6",
        "/resource_providers/{W1}/traits",
        r#"{"resource_provider_generation": 3, "traits": ["HW_CPU_X86_SSE", "HW_CPU_X86_AVX2"]}"#,
        200,
        r#"{"resource_provider_generation":4,"traits":["HW_CPU_X86_AVX2","HW_CPU_X86_SSE"]}"#,
    ),
    (
        "PUT",
        "1.1",
        "/resource_providers/{W1}/aggregates",
        r#"["00000000-0000-0000-0000-0000000000c3"]"#,
        200,
        r#"{"aggregates":["00000000-0000-0000-0000-0000000000c3"]}"#,
    ),
    (
        "PUT",
        "1.19",
        "/resource_providers/{W2}/aggregates",
        r#"{"resource_provider_generation": 0, "aggregates": ["00000000-0000-0000-0000-0000000000c3", "00000000-0000-0000-0000-0000000000c4"]}"#,
        200,
        r#"{"aggregates":["00000000-0000-0000-0000-0000000000c3","00000000-0000-0000-0000-0000000000c4"],"resource_provider_generation":1}"#,
    ),
];

#[tokio::test]
async fn write_bodies_are_pinned() {
    let (app, _dir) = cloud().await;
    let mut wrong = Vec::new();
    for (method, version, path, body, status, expected) in WRITES {
        let fill = |s: &str| {
            s.replace("{W1}", W1)
                .replace("{W2}", W2)
                .replace("{W3}", W3)
        };
        let path = fill(path);
        let body: Value = serde_json::from_str(&fill(body)).unwrap();
        let method: Method = method.parse().unwrap();
        let (got_status, text) = call(&app, method.clone(), &path, version, Some(body)).await;
        if got_status.as_u16() != *status || text != *expected {
            wrong.push(format!(
                "{method} {version} {path}\n  got:  {got_status} {text}\n  want: {status} {expected}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
