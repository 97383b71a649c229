//! The HTTP layer through `router(state)`, without sockets: negotiation, the error
//! envelope, auth, and that a refused write changes nothing.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use support::app;
use tower::ServiceExt;

async fn call(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    (status, headers, json)
}

fn get(path: &str) -> axum::http::request::Builder {
    Request::get(path).header("x-auth-token", "admin")
}

#[tokio::test]
async fn version_document_and_headers() {
    let (app, _d) = app();
    let (status, headers, body) = call(
        &app,
        Request::get("/")
            .header("openstack-api-version", "placement latest")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["openstack-api-version"], "placement 1.39");
    assert_eq!(headers["vary"], "openstack-api-version");
    assert!(headers["openstack-request-id"]
        .to_str()
        .unwrap()
        .starts_with("req-"));
    assert_eq!(headers["last-modified"], "Tue, 14 Nov 2023 22:13:20 GMT");
    assert_eq!(body["versions"][0]["max_version"], "1.39");
    assert_eq!(body["versions"][0]["min_version"], "1.0");
}

#[tokio::test]
async fn errors_use_the_envelope() {
    let (app, _d) = app();
    let (status, headers, body) = call(
        &app,
        get("/nowhere")
            .header("openstack-api-version", "placement 1.23")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(headers["content-type"], "application/json");
    let error = &body["errors"][0];
    assert_eq!(error["status"], 404);
    assert_eq!(error["title"], "Not Found");
    assert_eq!(error["code"], "placement.undefined_code");
    assert_eq!(
        error["request_id"],
        headers["openstack-request-id"].to_str().unwrap()
    );

    // Before 1.23 there is no code.
    let (_, _, body) = call(&app, get("/nowhere").body(Body::empty()).unwrap()).await;
    assert!(body["errors"][0].get("code").is_none());
}

#[tokio::test]
async fn bad_versions_are_refused() {
    let (app, _d) = app();
    let (status, _, body) = call(
        &app,
        get("/")
            .header("openstack-api-version", "placement 1.99")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(body["errors"][0]["max_version"], "1.39");
    let (status, _, _) = call(
        &app,
        get("/")
            .header("openstack-api-version", "placement x")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn token_required_except_at_root() {
    let (app, _d) = app();
    let (status, _, body) = call(
        &app,
        Request::get("/resource_classes")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["errors"][0]["status"], 401);
    let (status, _, _) = call(
        &app,
        Request::get("/resource_classes")
            .header("x-auth-token", "someone")
            .header("openstack-api-version", "placement 1.2")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn method_not_allowed_lists_methods() {
    let (app, _d) = app();
    let (status, headers, body) =
        call(&app, Request::delete("/").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "GET");
    assert!(body["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("The method DELETE is not allowed"));
}

#[tokio::test]
async fn malformed_body_changes_nothing() {
    let (app, _d) = app();
    for (content_type, body, want) in [
        ("application/json", "{not json", StatusCode::BAD_REQUEST),
        (
            "application/json",
            r#"{"name": "CUSTOM_A", "extra": 1}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "application/json",
            r#"{"name": 5}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "text/plain",
            r#"{"name": "CUSTOM_A"}"#,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
    ] {
        let req = Request::post("/resource_classes")
            .header("x-auth-token", "admin")
            .header("openstack-api-version", "placement 1.2")
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap();
        let (status, _, json) = call(&app, req).await;
        assert_eq!(status, want, "{body}: {json}");
        assert!(json["errors"][0]["detail"].is_string());
    }
    let (_, _, list) = call(
        &app,
        get("/resource_classes")
            .header("openstack-api-version", "placement 1.2")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let names: Vec<&str> = list["resource_classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"VCPU"));
    assert!(!names.iter().any(|n| n.starts_with("CUSTOM_")), "{names:?}");
}
