//! Error codes and details as Placement 16.0 gives them: the `code` clients branch on
//! for each refusal whose code differs from endpoint to endpoint, and a `detail` whose
//! last line (what osc-placement prints) carries the whole schema message.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use support::app;
use tower::ServiceExt;

/// One request as an admin at `1.minor`, with a JSON body if given.
async fn call(
    app: &axum::Router,
    method: &str,
    path: &str,
    minor: u16,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let builder = Request::builder()
        .method(method)
        .uri(path)
        .header("x-auth-token", "admin")
        .header("x-roles", "admin")
        .header("openstack-api-version", format!("placement 1.{minor}"));
    let req = match body {
        Some(b) => builder
            .header("content-type", "application/json")
            .body(Body::from(b.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap();
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn code(body: &Value) -> &str {
    body["errors"][0]["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_taken_class_name_has_no_code_of_its_own() {
    let (app, _d) = app();
    let create = || Some(json!({"name": "CUSTOM_TAKEN"}));
    let (status, _) = call(&app, "POST", "/resource_classes", 39, create()).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = call(&app, "POST", "/resource_classes", 39, create()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(code(&body), "placement.undefined_code");
    assert!(body["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("Conflicting resource class already exists: CUSTOM_TAKEN"));

    // Renaming onto a taken name (the PUT with a body, before 1.7) conflicts too; codes
    // appear only from 1.23, so none is shown there.
    let other = Some(json!({"name": "CUSTOM_OTHER"}));
    call(&app, "POST", "/resource_classes", 23, other).await;
    let (status, body) = call(&app, "PUT", "/resource_classes/CUSTOM_OTHER", 6, create()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(body["errors"][0]["code"].is_null());
}

#[tokio::test]
async fn a_taken_provider_name_keeps_duplicate_name() {
    let (app, _d) = app();
    let rp = || Some(json!({"name": "rp-1"}));
    let (status, _) = call(&app, "POST", "/resource_providers", 39, rp()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(&app, "POST", "/resource_providers", 39, rp()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(code(&body), "placement.duplicate_name");
}

#[tokio::test]
async fn repeated_trait_filters_take_the_last_value() {
    let (app, _d) = app();
    call(&app, "PUT", "/traits/CUSTOM_B_ONE", 39, None).await;
    let (status, body) = call(
        &app,
        "GET",
        "/traits?name=startswith:CUSTOM_A&name=startswith:CUSTOM_B",
        39,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["traits"], json!(["CUSTOM_B_ONE"]));
}

#[tokio::test]
async fn schema_failures_fit_on_the_detail_s_last_line() {
    let (app, _d) = app();
    let (status, body) = call(
        &app,
        "POST",
        "/resource_classes",
        39,
        Some(json!({"name": "osc_bad_name"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(code(&body), "placement.undefined_code");
    let detail = body["errors"][0]["detail"].as_str().unwrap();
    // What osc-placement shows: the last line of the detail, stripped.
    let shown = detail.split('\n').next_back().unwrap().trim();
    assert!(
        shown.starts_with(
            "JSON does not validate: 'osc_bad_name' does not match '^CUSTOM_[A-Z0-9_]+$'  \
             Failed validating 'pattern' in schema['properties']['name']:     {"
        ),
        "{shown}"
    );
    assert!(
        shown.ends_with("On instance['name']:     'osc_bad_name'"),
        "{shown}"
    );
}
