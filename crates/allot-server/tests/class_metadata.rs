//! Resource class metadata (an allot extension, issue 10) through `router(state)`:
//! the standard classes' compiled-in metadata, setting and reading a custom class's,
//! the list with `with_metadata=true` (and without it, Placement's body unchanged),
//! renames and deletes, a restart, policy, and bad input in the error envelope.

mod support;

use allot_server::router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

/// A request as `token` (`USER[:PROJECT]`) with the roles `roles` (none if empty).
async fn call_as(
    app: &axum::Router,
    (token, roles): (&str, &str),
    method: Method,
    path: &str,
    version: &str,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("x-auth-token", token)
        .header("accept", "application/json")
        .header("openstack-api-version", format!("placement {version}"));
    let req = if roles.is_empty() {
        req
    } else {
        req.header("x-roles", roles)
    };
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b.to_owned())),
        None => req.body(Body::empty()),
    };
    let response = app.clone().oneshot(req.unwrap()).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, body)
}

async fn call(
    app: &axum::Router,
    method: Method,
    path: &str,
    version: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let text = body.map(|b| b.to_string());
    call_as(app, ("admin", ""), method, path, version, text.as_deref()).await
}

const META: &str = "/resource_classes/CUSTOM_WIDGET/metadata";

fn widget() -> Value {
    json!({"description": "Widgets of the test rig", "display_name": "Widgets", "units": "count"})
}

async fn with_widget(app: &axum::Router) {
    let (s, _) = call(
        app,
        Method::PUT,
        "/resource_classes/CUSTOM_WIDGET",
        "1.7",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
}

fn detail(body: &Value) -> &str {
    body["errors"][0]["detail"].as_str().unwrap_or("")
}

#[tokio::test]
async fn standard_classes_come_with_metadata() {
    let (app, _d) = support::app();
    let (s, body) = call(
        &app,
        Method::GET,
        "/resource_classes/MEMORY_MB/metadata",
        "1.39",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["units"], "MiB");
    assert_eq!(body["display_name"], "Memory");
    assert!(body["description"].is_string());
    // Any microversion: the extension is not Placement's.
    let (s, body) = call(
        &app,
        Method::GET,
        "/resource_classes/VCPU/metadata",
        "1.0",
        None,
    )
    .await;
    assert_eq!((s, &body["units"]), (StatusCode::OK, &json!("count")));
    // Fixed, like the class.
    let (s, body) = call(
        &app,
        Method::PUT,
        "/resource_classes/VCPU/metadata",
        "1.39",
        Some(widget()),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        detail(&body).contains("Cannot update the metadata of standard resource class VCPU."),
        "{body}"
    );
}

#[tokio::test]
async fn custom_classes_have_none_until_set() {
    let (app, _d) = support::app();
    with_widget(&app).await;
    let empty = json!({"description": null, "display_name": null, "units": null});
    let (s, body) = call(&app, Method::GET, META, "1.39", None).await;
    assert_eq!((s, body), (StatusCode::OK, empty.clone()));

    let (s, body) = call(&app, Method::PUT, META, "1.39", Some(widget())).await;
    assert_eq!((s, body), (StatusCode::OK, widget()));
    let (s, body) = call(&app, Method::GET, META, "1.39", None).await;
    assert_eq!((s, body), (StatusCode::OK, widget()));

    // A PUT replaces: what it leaves out is unset.
    let (s, body) = call(
        &app,
        Method::PUT,
        META,
        "1.39",
        Some(json!({"units": "GiB"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        body,
        json!({"description": null, "display_name": null, "units": "GiB"})
    );
    let (s, body) = call(&app, Method::PUT, META, "1.39", Some(json!({}))).await;
    assert_eq!((s, body), (StatusCode::OK, empty));
}

#[tokio::test]
async fn the_list_shows_metadata_only_when_asked() {
    let (app, _d) = support::app();
    with_widget(&app).await;
    call(&app, Method::PUT, META, "1.39", Some(widget())).await;

    // Placement's body, unchanged.
    for query in ["", "?with_metadata=false"] {
        let (s, body) = call(
            &app,
            Method::GET,
            &format!("/resource_classes{query}"),
            "1.39",
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let classes = body["resource_classes"].as_array().unwrap();
        assert!(
            classes.iter().all(|c| c.get("metadata").is_none()),
            "{query}"
        );
        let first = &classes[0];
        assert_eq!(
            first,
            &json!({"links": [{"href": "/resource_classes/VCPU", "rel": "self"}], "name": "VCPU"})
        );
    }

    let (s, body) = call(
        &app,
        Method::GET,
        "/resource_classes?with_metadata=true",
        "1.39",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let classes = body["resource_classes"].as_array().unwrap();
    assert_eq!(classes[0]["metadata"]["units"], "count");
    assert!(classes.iter().all(|c| c["metadata"].is_object()));
    let mine = classes
        .iter()
        .find(|c| c["name"] == "CUSTOM_WIDGET")
        .unwrap();
    assert_eq!(mine["metadata"], widget());

    let (s, body) = call(
        &app,
        Method::GET,
        "/resource_classes?with_metadata=yes",
        "1.39",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(detail(&body).contains("with_metadata"), "{body}");
}

#[tokio::test]
async fn metadata_follows_renames_and_goes_with_deletes() {
    let (app, _d) = support::app();
    with_widget(&app).await;
    call(&app, Method::PUT, META, "1.39", Some(widget())).await;
    let (s, _) = call(
        &app,
        Method::PUT,
        "/resource_classes/CUSTOM_WIDGET",
        "1.6",
        Some(json!({"name": "CUSTOM_GADGET"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let gadget = "/resource_classes/CUSTOM_GADGET/metadata";
    let (s, body) = call(&app, Method::GET, gadget, "1.39", None).await;
    assert_eq!((s, body), (StatusCode::OK, widget()));
    let (s, body) = call(&app, Method::GET, META, "1.39", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(
        detail(&body).contains("No such resource class CUSTOM_WIDGET."),
        "{body}"
    );

    let (s, _) = call(
        &app,
        Method::DELETE,
        "/resource_classes/CUSTOM_GADGET",
        "1.39",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = call(&app, Method::GET, gadget, "1.39", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Made again, the class starts bare.
    call(
        &app,
        Method::PUT,
        "/resource_classes/CUSTOM_GADGET",
        "1.7",
        None,
    )
    .await;
    let (s, body) = call(&app, Method::GET, gadget, "1.39", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["units"], Value::Null);
}

#[tokio::test]
async fn metadata_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let app = router(support::state_of(support::host_at(dir.path())));
        with_widget(&app).await;
        let (s, _) = call(&app, Method::PUT, META, "1.39", Some(widget())).await;
        assert_eq!(s, StatusCode::OK);
    }
    let app = router(support::state_of(support::host_at(dir.path())));
    let (s, body) = call(&app, Method::GET, META, "1.39", None).await;
    assert_eq!((s, body), (StatusCode::OK, widget()));
}

#[tokio::test]
async fn bad_input_is_a_4xx_in_the_envelope() {
    let (app, _d) = support::app();
    with_widget(&app).await;
    let long = |n: usize| "x".repeat(n);
    let bodies = [
        "{",
        "[]",
        "null",
        "{\"units\": 1}",
        "{\"units\": \"\"}",
        "{\"unit\": \"count\"}",
        &json!({"units": long(33)}).to_string(),
        &json!({"display_name": long(256)}).to_string(),
        &json!({"description": long(1025)}).to_string(),
    ];
    for raw in bodies {
        let (s, body) = call_as(&app, ("admin", ""), Method::PUT, META, "1.39", Some(raw)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{raw}");
        assert!(!detail(&body).is_empty(), "{raw}: {body}");
    }
    // At the limits, accepted.
    let edge = json!({"units": long(32), "display_name": long(255), "description": long(1024)});
    let (s, _) = call(&app, Method::PUT, META, "1.39", Some(edge)).await;
    assert_eq!(s, StatusCode::OK);
    // Unknown and malformed class names: 404, for GET and PUT alike.
    for path in [
        "/resource_classes/CUSTOM_NOPE/metadata",
        "/resource_classes/not%20a%20class/metadata",
    ] {
        for method in [Method::GET, Method::PUT] {
            let body = (method == Method::PUT).then(widget);
            let (s, reply) = call(&app, method.clone(), path, "1.39", body).await;
            assert_eq!(s, StatusCode::NOT_FOUND, "{method} {path}");
            assert!(detail(&reply).contains("No such resource class"), "{reply}");
        }
    }
}

#[tokio::test]
async fn only_admins_write_metadata() {
    let (app, _d) = support::app();
    with_widget(&app).await;
    // A service may read but not write; an admin writes; a member does neither.
    let service = ("svc:p", "service");
    let member = ("someone:p", "member,reader");
    let put = Some(r#"{"units": "count"}"#);
    let req = |who, method: Method, body| call_as(&app, who, method, META, "1.39", body);
    let (s, _) = req(service, Method::GET, None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, body) = req(service, Method::PUT, put).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(
        detail(&body).contains("allot:resource_classes:metadata:update"),
        "{body}"
    );
    let (s, _) = req(member, Method::GET, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = req(("admin", ""), Method::PUT, put).await;
    assert_eq!(s, StatusCode::OK);
}
