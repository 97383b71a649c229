//! `/resource_providers/{uuid}/inventories` through `router(state)`, without sockets:
//! the order of checks, bodies, generations and headers.

mod support;

use allot_core::{Change, ProviderRow, Uuid};
use allot_server::router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const RP: &str = "7260669a-e3d4-4867-aaa7-683e2ab6958c";

/// An application with one provider, `RP`, made directly in the store (the provider
/// endpoints are not what this file tests).
fn app() -> (axum::Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let host = support::host_at(dir.path());
    host.write(|view, now| {
        let id = view.next_provider_id();
        let row = ProviderRow {
            id,
            uuid: Uuid::parse_str(RP).unwrap(),
            name: "rp".into(),
            generation: 0,
            parent: None,
            root: id,
            created_at: now,
            updated_at: now,
        };
        Ok((
            (),
            vec![Change::PutProvider {
                row,
                previous_generation: None,
            }],
        ))
    })
    .unwrap();
    (router(support::state_of(host)), dir)
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

async fn call(
    app: &axum::Router,
    method: Method,
    path: &str,
    version: &str,
    body: Option<Value>,
) -> Reply {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("x-auth-token", "admin")
        .header("accept", "application/json")
        .header("host", "placement.test")
        .header("openstack-api-version", format!("placement {version}"));
    let body = match body {
        Some(b) => {
            req = req.header("content-type", "application/json");
            Body::from(serde_json::to_vec(&b).unwrap())
        }
        None => Body::empty(),
    };
    let response = app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn detail(r: &Reply) -> String {
    r.body["errors"][0]["detail"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn inv_url(class: &str) -> String {
    format!("/resource_providers/{RP}/inventories/{class}")
}

fn all_url() -> String {
    format!("/resource_providers/{RP}/inventories")
}

#[tokio::test]
async fn one_at_a_time() {
    let (app, _d) = app();
    let r = call(&app, Method::GET, &all_url(), "1.0", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body,
        json!({"resource_provider_generation": 0, "inventories": {}})
    );

    let disk = json!({"resource_class": "DISK_GB", "total": 2048, "reserved": 512, "min_unit": 10,
                      "max_unit": 1024, "step_size": 10, "allocation_ratio": 1.0});
    let r = call(&app, Method::POST, &all_url(), "1.0", Some(disk.clone())).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(
        r.headers["location"],
        format!("http://placement.test{}", inv_url("DISK_GB"))
    );
    assert_eq!(r.body["resource_provider_generation"], 1);
    assert_eq!(r.body["reserved"], 512);
    assert!(r.headers.get("last-modified").is_none());

    let r = call(&app, Method::GET, &inv_url("DISK_GB"), "1.15", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["cache-control"], "no-cache");
    assert_eq!(r.headers["last-modified"], "Tue, 14 Nov 2023 22:13:20 GMT");
    assert_eq!(r.body["step_size"], 10);
    assert_eq!(r.body["allocation_ratio"], 1.0);

    // A second POST of the class conflicts.
    let r = call(&app, Method::POST, &all_url(), "1.23", Some(disk)).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(detail(&r).contains("Update conflict"));
    assert_eq!(r.body["errors"][0]["code"], "placement.concurrent_update");

    // The PUT of one class needs the right generation, then the capacity, then the class.
    let put = |generation: u64, reserved: u64| json!({"resource_provider_generation": generation, "total": 2048, "reserved": reserved});
    let r = call(
        &app,
        Method::PUT,
        &inv_url("DISK_GB"),
        "1.23",
        Some(put(5, 0)),
    )
    .await;
    assert_eq!(
        (
            r.status,
            detail(&r).contains("resource provider generation conflict")
        ),
        (StatusCode::CONFLICT, true)
    );
    let r = call(
        &app,
        Method::PUT,
        &inv_url("DISK_GB"),
        "1.0",
        Some(put(1, 4096)),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains(&format!(
        "Unable to update inventory for resource provider {RP}"
    )));
    let r = call(
        &app,
        Method::PUT,
        &inv_url("MEMORY_MB"),
        "1.0",
        Some(put(1, 0)),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains("No inventory record with resource class"));
    let r = call(
        &app,
        Method::PUT,
        &inv_url("DISK_GB"),
        "1.0",
        Some(put(1, 1024)),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["resource_provider_generation"], 2);
    assert_eq!(r.body["reserved"], 1024);
    assert_eq!(r.body["max_unit"], 2147483647);

    let r = call(&app, Method::GET, &inv_url("IPV4_ADDRESS"), "1.0", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(detail(&r).contains(&format!("No inventory of class IPV4_ADDRESS for {RP}")));

    let r = call(&app, Method::DELETE, &inv_url("DISK_GB"), "1.0", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(r.headers.get("content-type").is_none());
    let r = call(&app, Method::DELETE, &inv_url("DISK_GB"), "1.0", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(detail(&r).contains("No inventory of class DISK_GB found for delete"));
    let r = call(&app, Method::GET, &all_url(), "1.15", None).await;
    assert_eq!(
        r.body,
        json!({"resource_provider_generation": 3, "inventories": {}})
    );
    // An empty list has no time to tell.
    assert!(r.headers.get("last-modified").is_none());
    assert_eq!(r.headers["cache-control"], "no-cache");
}

#[tokio::test]
async fn post_checks_in_placements_order() {
    let (app, _d) = app();
    let r = call(
        &app,
        Method::POST,
        &all_url(),
        "1.0",
        Some(json!({"resource_class": "DISK_GB", "total": 0})),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains("JSON does not validate: 0 is less than the minimum of 1"));
    assert!(detail(&r).contains("Failed validating 'minimum' in schema['properties']['total']"));
    let r = call(
        &app,
        Method::POST,
        &all_url(),
        "1.0",
        Some(json!({"resource_class": "NO_CLASS_14", "total": 1})),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains("No such resource class NO_CLASS_14"));
    let r = call(
        &app,
        Method::POST,
        &all_url(),
        "1.0",
        Some(json!({"resource_class": "DISK_GB", "total": 256, "reserved": 512})),
    )
    .await;
    assert!(detail(&r).contains("Unable to create inventory for resource provider"));

    // A missing provider is reported before a bad body.
    let other = "/resource_providers/2e1dda56-8b18-4fb9-8c5c-3125891b7143/inventories";
    let r = call(&app, Method::POST, other, "1.0", Some(json!({"bad": 1}))).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = call(&app, Method::GET, other, "1.0", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(detail(&r)
        .contains("No resource provider with uuid 2e1dda56-8b18-4fb9-8c5c-3125891b7143 found"));
    let r = call(
        &app,
        Method::GET,
        "/resource_providers/not-a-uuid/inventories/VCPU",
        "1.0",
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // Without a JSON content type: 415 before anything else.
    let req = Request::post(all_url())
        .header("x-auth-token", "admin")
        .header("content-type", "text/plain");
    let response = app
        .clone()
        .oneshot(req.body(Body::from("x")).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn replace_all_and_delete_all() {
    let (app, _d) = app();
    let body = json!({"resource_provider_generation": 0,
                      "inventories": {"IPV4_ADDRESS": {"total": 253}, "DISK_GB": {"total": 1024}}});
    let r = call(&app, Method::PUT, &all_url(), "1.15", Some(body)).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.headers["cache-control"], "no-cache");
    assert!(r.headers.contains_key("last-modified"));
    assert_eq!(r.body["resource_provider_generation"], 1);
    assert_eq!(r.body["inventories"]["IPV4_ADDRESS"]["reserved"], 0);
    assert_eq!(r.body["inventories"]["DISK_GB"]["allocation_ratio"], 1.0);

    let put = |generation: i64, inventories: Value| json!({"resource_provider_generation": generation, "inventories": inventories});
    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.23",
        Some(put(99, json!({}))),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.body["errors"][0]["code"], "placement.concurrent_update");
    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.0",
        Some(put(-1, json!({}))),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.0",
        Some(put(1, json!({"HOUSE": {"total": 253}}))),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains("Unknown resource class in inventory"));
    // Keys that are not class names escape the schema, but still name no class.
    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.0",
        Some(put(1, json!({"house": {"total": "x"}}))),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains("Unknown resource class in inventory"));
    // ... and only once the generation matched, as in Placement (which reads the
    // entries after comparing it).
    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.0",
        Some(put(99, json!({"house": 3}))),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(detail(&r).contains("resource provider generation conflict"));
    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.0",
        Some(put(1, json!({"DISK_GB": {"total": 2147483648u64}}))),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains("Failed validating 'maximum'"));

    let full = json!({"IPV4_ADDRESS": {"total": 253, "reserved": 253}});
    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.25",
        Some(put(1, full.clone())),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(detail(&r).contains("greater than or equal to total"));
    let r = call(&app, Method::PUT, &all_url(), "1.26", Some(put(1, full))).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["resource_provider_generation"], 2);

    // DELETE of all inventories exists from 1.5; before, the method is not allowed.
    let r = call(&app, Method::DELETE, &all_url(), "1.4", None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    let r = call(&app, Method::DELETE, &all_url(), "1.5", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = call(&app, Method::DELETE, &all_url(), "1.5", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = call(&app, Method::GET, &all_url(), "1.0", None).await;
    assert_eq!(
        r.body,
        json!({"resource_provider_generation": 4, "inventories": {}})
    );

    let r = call(
        &app,
        Method::PUT,
        &all_url(),
        "1.4",
        Some(put(4, json!({}))),
    )
    .await;
    assert_eq!(
        r.body,
        json!({"resource_provider_generation": 5, "inventories": {}})
    );
}
