//! The wire contract, pinned: full response bodies of every URL family, as exact JSON
//! text, at a few microversions each. Key order, field presence by microversion and
//! number formatting are all part of what clients see; a change here is a change of
//! the API, not a refactoring.

use std::sync::Arc;

use allot_server::{router, AppState, Config};
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
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("allot.db").display());
    let store = allot_store::Store::open(&url).unwrap();
    let host = allot_store::Host::new(store, Arc::new(|| 1_700_000_000)).unwrap();
    let app = router(AppState {
        host,
        config: Arc::new(Config::default()),
    });
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
        let path = path.replace("{ROOT}", ROOT).replace("{CHILD}", CHILD);
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
