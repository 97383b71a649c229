//! The allocations API through `router(state)`, without sockets: the body forms of
//! each microversion, consumer generations, the order of checks and their messages,
//! `POST /allocations`, the GETs and their headers, and that nothing malformed gets
//! past a 4xx.

mod support;

use allot_core::{Change, Inventory, ProviderRow, ResourceClass, Uuid};
use allot_server::router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const RP: &str = "7260669a-e3d4-4867-aaa7-683e2ab6958c";
const RP2: &str = "fcfa516a-abbe-45d1-8152-d5225d82e596";
const C1: &str = "599ffd2d-526a-4b2e-8683-f13ad25f9958";
const C2: &str = "39715579-2167-4c63-8247-301311cc6703";

/// Two providers made directly in the store: RP (VCPU 8, DISK_GB 100 in steps of 10)
/// and RP2 (VCPU 4).
fn app_at(dir: &std::path::Path, fresh: bool) -> axum::Router {
    let host = support::host_at(dir);
    if fresh {
        host.write(|view, now| {
            let mut changes = Vec::new();
            let providers = [
                (
                    RP,
                    vec![
                        ("VCPU", Inventory::with_total(8)),
                        (
                            "DISK_GB",
                            Inventory {
                                step_size: std::num::NonZeroU64::new(10).unwrap(),
                                ..Inventory::with_total(100)
                            },
                        ),
                    ],
                ),
                (RP2, vec![("VCPU", Inventory::with_total(4))]),
            ];
            for (n, (uuid, inventories)) in providers.into_iter().enumerate() {
                let id = allot_core::ProviderId(view.next_provider_id().0 + n as u64);
                let row = ProviderRow {
                    id,
                    uuid: Uuid::parse_str(uuid).unwrap(),
                    name: uuid.into(),
                    generation: 0,
                    parent: None,
                    root: id,
                    created_at: now,
                    updated_at: now,
                };
                changes.push(Change::PutProvider {
                    row,
                    previous_generation: None,
                });
                changes.push(Change::SetInventories(
                    id,
                    inventories
                        .into_iter()
                        .map(|(c, i)| (ResourceClass::new_unchecked(c), i))
                        .collect(),
                ));
            }
            Ok(((), changes))
        })
        .unwrap();
    }
    router(support::state_of(host))
}

fn app() -> (axum::Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (app_at(dir.path(), true), dir)
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Reply {
    fn detail(&self) -> String {
        self.body["errors"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }
}

async fn send(app: &axum::Router, req: Request<Body>) -> Reply {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn request(method: Method, path: &str, version: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header("x-auth-token", "admin")
        .header("accept", "application/json")
        .header("openstack-api-version", format!("placement {version}"))
}

async fn call(
    app: &axum::Router,
    method: Method,
    path: &str,
    version: &str,
    body: Option<Value>,
) -> Reply {
    let req = request(method, path, version);
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(&b).unwrap())),
        None => req.body(Body::empty()),
    };
    send(app, req.unwrap()).await
}

/// A raw body (possibly not JSON) with a JSON content type.
async fn call_raw(
    app: &axum::Router,
    method: Method,
    path: &str,
    version: &str,
    raw: &str,
) -> Reply {
    let req = request(method, path, version)
        .header("content-type", "application/json")
        .body(Body::from(raw.to_owned()))
        .unwrap();
    send(app, req).await
}

fn alloc_url(c: &str) -> String {
    format!("/allocations/{c}")
}

/// The dict form (1.12 on) for one provider.
fn dict(rp: &str, resources: Value) -> Value {
    json!({rp: {"resources": resources}})
}

fn owned(allocations: Value) -> Value {
    json!({"allocations": allocations, "project_id": "p1", "user_id": "u1"})
}

fn with(mut body: Value, key: &str, value: Value) -> Value {
    body[key] = value;
    body
}

async fn provider_generation(app: &axum::Router, rp: &str) -> u64 {
    let r = call(
        app,
        Method::GET,
        &format!("/resource_providers/{rp}/allocations"),
        "1.0",
        None,
    )
    .await;
    r.body["resource_provider_generation"].as_u64().unwrap()
}

#[tokio::test]
async fn list_form_and_reads_by_microversion() {
    let (app, _d) = app();
    let list = json!({"allocations": [
        {"resource_provider": {"uuid": RP}, "resources": {"VCPU": 2, "DISK_GB": 20}},
        {"resource_provider": {"uuid": RP2}, "resources": {"VCPU": 1}},
    ]});
    let r = call(&app, Method::PUT, &alloc_url(C1), "1.0", Some(list)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    assert!(r.headers.get("content-type").is_none());
    assert!(r.headers.get("last-modified").is_none());

    // 1.0-1.11: allocations only.
    let r = call(&app, Method::GET, &alloc_url(C1), "1.11", None).await;
    assert_eq!(
        r.body,
        json!({"allocations": {
            RP: {"generation": 1, "resources": {"VCPU": 2, "DISK_GB": 20}},
            RP2: {"generation": 1, "resources": {"VCPU": 1}},
        }})
    );
    assert!(r.headers.get("cache-control").is_none());
    // 1.12: the owner (the incomplete consumer's, written at 1.0).
    let r = call(&app, Method::GET, &alloc_url(C1), "1.12", None).await;
    assert_eq!(r.body["project_id"], "00000000-0000-0000-0000-000000000000");
    assert_eq!(r.body["user_id"], "00000000-0000-0000-0000-000000000000");
    assert!(r.body.get("consumer_generation").is_none());
    // 1.15: caching headers; 1.28: the consumer generation; 1.38: the type.
    let r = call(&app, Method::GET, &alloc_url(C1), "1.28", None).await;
    assert_eq!(r.headers["cache-control"], "no-cache");
    assert_eq!(r.headers["last-modified"], "Tue, 14 Nov 2023 22:13:20 GMT");
    assert_eq!(r.body["consumer_generation"], 1);
    assert!(r.body.get("consumer_type").is_none());
    let r = call(&app, Method::GET, &alloc_url(C1), "1.38", None).await;
    assert_eq!(r.body["consumer_type"], "unknown");

    // Unknown, or not a canonical uuid: nothing, whatever the version.
    for path in [
        alloc_url(C2),
        alloc_url("not-a-uuid"),
        alloc_url(&C1.to_uppercase()),
    ] {
        let r = call(&app, Method::GET, &path, "1.38", None).await;
        assert_eq!(
            (r.status, r.body.clone()),
            (StatusCode::OK, json!({"allocations": {}})),
            "{path}"
        );
    }

    // By provider.
    let url = format!("/resource_providers/{RP}/allocations");
    let r = call(&app, Method::GET, &url, "1.14", None).await;
    assert_eq!(
        r.body,
        json!({"allocations": {C1: {"resources": {"VCPU": 2, "DISK_GB": 20}}},
               "resource_provider_generation": 1})
    );
    assert!(r.headers.get("last-modified").is_none());
    let r = call(&app, Method::GET, &url, "1.28", None).await;
    assert_eq!(r.body["allocations"][C1]["consumer_generation"], 1);
    assert_eq!(r.headers["cache-control"], "no-cache");
    let bad = "cb8a3007-b93a-471f-9e1f-4d58355678bd";
    let r = call(
        &app,
        Method::GET,
        &format!("/resource_providers/{bad}/allocations"),
        "1.0",
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.detail().contains(&format!(
        "Resource provider '{bad}' not found: No resource provider with uuid {bad} found"
    )));

    // Only GET, PUT and DELETE on a consumer; only POST on the collection.
    let r = call(&app, Method::GET, "/allocations", "1.13", None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers["allow"], "POST");
    let mut req = request(Method::GET, &alloc_url(C1), "1.0")
        .body(Body::empty())
        .unwrap();
    req.headers_mut()
        .insert("accept", "text/plain".parse().unwrap());
    assert_eq!(send(&app, req).await.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn put_checks_in_placements_order() {
    let (app, _d) = app();
    let body = owned(dict(RP, json!({"VCPU": 1})));
    // Content type before policy, policy before the consumer uuid, that before JSON.
    let mut req = request(Method::PUT, &alloc_url("nope"), "1.12")
        .header("content-type", "text/plain")
        .body(Body::from("x"))
        .unwrap();
    req.headers_mut()
        .insert("x-auth-token", "user".parse().unwrap());
    assert_eq!(
        send(&app, req).await.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    let mut req = request(Method::PUT, &alloc_url("nope"), "1.12")
        .header("content-type", "application/json")
        .body(Body::from("x"))
        .unwrap();
    req.headers_mut()
        .insert("x-auth-token", "user".parse().unwrap());
    assert_eq!(send(&app, req).await.status, StatusCode::FORBIDDEN);
    let r = call_raw(&app, Method::PUT, &alloc_url("nope"), "1.12", "x").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.detail().contains("Malformed consumer_uuid: nope"));
    let r = call_raw(&app, Method::PUT, &alloc_url(C1), "1.12", "{").await;
    assert!(r.detail().contains("Malformed JSON"), "{}", r.detail());

    // Schema per version.
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "1.0",
            json!({"allocations": []}),
            "Failed validating 'minItems'",
        ),
        (
            "1.7",
            json!({"allocations": dict(RP, json!({"VCPU": 1}))}),
            "is not of type 'array'",
        ),
        (
            "1.8",
            json!({"allocations": [{"resource_provider": {"uuid": RP}, "resources": {"VCPU": 1}}]}),
            "'project_id' is a required property",
        ),
        ("1.12", owned(json!({})), "should be non-empty"),
        (
            "1.12",
            owned(dict(RP, json!({"VCPU": 0}))),
            "0 is less than the minimum of 1",
        ),
        (
            "1.12",
            owned(dict(RP, json!({"vcpu": 1}))),
            "does not match any of the regexes",
        ),
        (
            "1.28",
            body.clone(),
            "'consumer_generation' is a required property",
        ),
        (
            "1.33",
            with(
                with(body.clone(), "consumer_generation", Value::Null),
                "mappings",
                json!({"x": [RP]}),
            ),
            "Additional properties are not allowed ('mappings' was unexpected)",
        ),
        (
            "1.34",
            with(
                with(body.clone(), "consumer_generation", Value::Null),
                "mappings",
                json!({}),
            ),
            "{} should be non-empty",
        ),
        (
            "1.38",
            with(body.clone(), "consumer_generation", Value::Null),
            "'consumer_type' is a required property",
        ),
    ];
    for (version, body, wanted) in cases {
        let r = call(&app, Method::PUT, &alloc_url(C1), version, Some(body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{version} {wanted}");
        assert!(
            r.detail().contains("JSON does not validate"),
            "{}",
            r.detail()
        );
        assert!(r.detail().contains(wanted), "{version}: {}", r.detail());
    }

    // Then: generation, provider, class, inventory, constraints, capacity.
    let new = |resources: Value| with(owned(resources), "consumer_generation", Value::Null);
    let missing = "be8b9cba-e7db-4a12-a386-99b4242167fe";
    let cases: Vec<(Value, StatusCode, String)> = vec![
        (with(owned(dict(missing, json!({"VCPU": 1}))), "consumer_generation", json!(5)),
            StatusCode::CONFLICT, "consumer generation conflict - expected null but got 5".into()),
        (new(dict(missing, json!({"COWS": 1}))), StatusCode::BAD_REQUEST,
            format!("Allocation for resource provider '{missing}' that does not exist.")),
        (new(dict(&RP.to_uppercase(), json!({"VCPU": 1}))), StatusCode::BAD_REQUEST,
            format!("Allocation for resource provider '{}' that does not exist.", RP.to_uppercase())),
        (new(dict(RP, json!({"COWS": 1}))), StatusCode::BAD_REQUEST,
            format!("Unable to allocate inventory for consumer {C1}: No such resource class COWS.")),
        (new(dict(RP2, json!({"DISK_GB": 10}))), StatusCode::CONFLICT,
            format!("Unable to allocate inventory: Inventory for 'DISK_GB' on resource provider '{RP2}' invalid.")),
        (new(dict(RP, json!({"DISK_GB": 15}))), StatusCode::CONFLICT,
            "The requested amount would violate inventory constraints.".into()),
        (new(dict(RP, json!({"VCPU": 9}))), StatusCode::CONFLICT,
            "The requested amount would exceed the capacity.".into()),
    ];
    for (body, status, wanted) in cases {
        let r = call(&app, Method::PUT, &alloc_url(C1), "1.28", Some(body)).await;
        assert_eq!(r.status, status, "{wanted}: {}", r.detail());
        assert!(r.detail().contains(&wanted), "{}", r.detail());
    }
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C1),
        "1.28",
        Some(with(
            owned(dict(RP, json!({"VCPU": 1}))),
            "consumer_generation",
            json!(0),
        )),
    )
    .await;
    assert_eq!(r.body["errors"][0]["code"], "placement.concurrent_update");
    // Nothing was written by any of that.
    assert_eq!(provider_generation(&app, RP).await, 0);
    let r = call(&app, Method::GET, &alloc_url(C1), "1.28", None).await;
    assert_eq!(r.body, json!({"allocations": {}}));
}

#[tokio::test]
async fn consumer_generations_project_and_type() {
    let (app, _d) = app();
    let put = |generation: Value, vcpu: u64| {
        with(
            owned(dict(RP, json!({"VCPU": vcpu}))),
            "consumer_generation",
            generation,
        )
    };
    // A new consumer needs null; it is at 1 after its first write.
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C1),
        "1.28",
        Some(put(Value::Null, 1)),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C1),
        "1.28",
        Some(put(Value::Null, 1)),
    )
    .await;
    assert!(r
        .detail()
        .contains("consumer generation conflict - expected 1 but got None"));
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C1),
        "1.28",
        Some(put(json!(-3), 1)),
    )
    .await;
    assert!(r.detail().contains("expected 1 but got -3"));
    // A dashless uuid names the same consumer.
    let dashless = C1.replace('-', "");
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(&dashless),
        "1.28",
        Some(put(json!(1), 2)),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
    let r = call(&app, Method::GET, &alloc_url(C1), "1.28", None).await;
    assert_eq!(r.body["consumer_generation"], 2);
    assert_eq!(r.body["allocations"][RP]["resources"]["VCPU"], 2);
    // Before 1.28 the generation is not checked; project and user follow the write.
    let moved =
        json!({"allocations": dict(RP, json!({"VCPU": 2})), "project_id": "p2", "user_id": "u2"});
    let r = call(&app, Method::PUT, &alloc_url(C1), "1.27", Some(moved)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    // A type from 1.38; a write before 1.38 keeps it.
    let typed = with(put(json!(3), 2), "consumer_type", json!("INSTANCE"));
    let r = call(&app, Method::PUT, &alloc_url(C1), "1.38", Some(typed)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C1),
        "1.37",
        Some(put(json!(4), 3)),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = call(&app, Method::GET, &alloc_url(C1), "1.38", None).await;
    assert_eq!(
        (
            &r.body["project_id"],
            &r.body["user_id"],
            &r.body["consumer_type"],
            &r.body["consumer_generation"]
        ),
        (&json!("p1"), &json!("u1"), &json!("INSTANCE"), &json!(5))
    );

    // Emptying (1.28) removes the consumer and bumps the provider it leaves.
    let before = provider_generation(&app, RP).await;
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C1),
        "1.28",
        Some(with(owned(json!({})), "consumer_generation", json!(5))),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
    assert_eq!(provider_generation(&app, RP).await, before + 1);
    let r = call(&app, Method::GET, &alloc_url(C1), "1.28", None).await;
    assert_eq!(r.body, json!({"allocations": {}}));
    // So a retry is a new consumer again.
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C1),
        "1.28",
        Some(put(Value::Null, 1)),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());

    // Emptying a consumer that holds nothing keeps its record at 0, as Placement does.
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C2),
        "1.28",
        Some(with(owned(json!({})), "consumer_generation", Value::Null)),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = call(
        &app,
        Method::PUT,
        &alloc_url(C2),
        "1.28",
        Some(put(Value::Null, 1)),
    )
    .await;
    assert!(
        r.detail().contains("expected 0 but got None"),
        "{}",
        r.detail()
    );
    let r = call(&app, Method::DELETE, &alloc_url(C2), "1.28", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // mappings are accepted from 1.34, and not kept.
    let mapped = with(
        put(json!(1), 1),
        "mappings",
        json!({"": [RP], "_NET1": [RP]}),
    );
    let r = call(&app, Method::PUT, &alloc_url(C1), "1.34", Some(mapped)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
    let r = call(&app, Method::GET, &alloc_url(C1), "1.34", None).await;
    assert!(r.body.get("mappings").is_none());
}

#[tokio::test]
async fn delete_bumps_nothing() {
    let (app, _d) = app();
    let body =
        json!({"allocations": [{"resource_provider": {"uuid": RP}, "resources": {"VCPU": 1}}]});
    call(&app, Method::PUT, &alloc_url(C1), "1.0", Some(body)).await;
    assert_eq!(provider_generation(&app, RP).await, 1);
    let r = call(&app, Method::DELETE, &alloc_url(C1), "1.0", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(provider_generation(&app, RP).await, 1);
    for c in [C1, "not-a-uuid"] {
        let r = call(&app, Method::DELETE, &alloc_url(c), "1.0", None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert!(r
            .detail()
            .contains(&format!("No allocations for consumer '{c}'")));
    }
}

#[tokio::test]
async fn post_many_consumers() {
    let (app, _d) = app();
    let one = |rp: &str, vcpu: u64| owned(dict(rp, json!({"VCPU": vcpu})));
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.12",
        Some(json!({C1: one(RP, 1)})),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = call(&app, Method::POST, "/allocations", "1.13", Some(json!({}))).await;
    assert!(r.detail().contains("should be non-empty"));

    // All or nothing.
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.13",
        Some(json!({C1: one(RP, 4), C2: one(RP, 5)})),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.detail().contains("would exceed the capacity"));
    assert_eq!(provider_generation(&app, RP).await, 0);
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.13",
        Some(json!({C1: one(RP, 4), C2: one(RP2, 4)})),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
    let r = call(&app, Method::GET, &alloc_url(C2), "1.28", None).await;
    assert_eq!(r.body["consumer_generation"], 1);

    // The move: C2 gives up RP2 and C1 takes it, in one request.
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.13",
        Some(json!({C2: owned(json!({})), C1: one(RP2, 4)})),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
    assert_eq!(
        call(&app, Method::GET, &alloc_url(C2), "1.0", None)
            .await
            .body,
        json!({"allocations": {}})
    );
    let r = call(
        &app,
        Method::GET,
        &format!("/resource_providers/{RP2}/allocations"),
        "1.0",
        None,
    )
    .await;
    assert_eq!(
        r.body["allocations"],
        json!({C1: {"resources": {"VCPU": 4}}})
    );
    assert_eq!(r.body["resource_provider_generation"], 2);

    // Generations are checked consumer by consumer, in the order of the request.
    let gen = |body: Value, g: Value| with(body, "consumer_generation", g);
    for (first, second, wanted) in [
        (C1, C2, "expected 2 but got 7"),
        (C2, C1, "expected null but got 7"),
    ] {
        let text = format!(
            r#"{{"{first}": {}, "{second}": {}}}"#,
            gen(one(RP, 1), json!(7)),
            gen(one(RP, 1), json!(7))
        );
        let r = call_raw(&app, Method::POST, "/allocations", "1.28", &text).await;
        assert!(r.detail().contains(wanted), "{}", r.detail());
    }
    // The class wording of POST.
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.13",
        Some(json!({C2: owned(dict(RP, json!({"CUSTOM_PONY": 1})))})),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r
        .detail()
        .contains("Unable to allocate inventory No such resource class CUSTOM_PONY."));
    // Types from 1.38, mappings from 1.34.
    let typed = gen(
        with(one(RP, 1), "consumer_type", json!("MIGRATION")),
        Value::Null,
    );
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.38",
        Some(json!({C2: typed.clone()})),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
    let r = call(&app, Method::GET, &alloc_url(C2), "1.38", None).await;
    assert_eq!(r.body["consumer_type"], "MIGRATION");
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.37",
        Some(json!({C2: typed})),
    )
    .await;
    assert!(r.detail().contains("'consumer_type' was unexpected"));
    let mapped = gen(with(one(RP, 1), "mappings", json!({"_A": [RP]})), json!(1));
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.33",
        Some(json!({C2: mapped.clone()})),
    )
    .await;
    assert!(r.detail().contains("'mappings' was unexpected"));
    let r = call(
        &app,
        Method::POST,
        "/allocations",
        "1.34",
        Some(json!({C2: mapped})),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.detail());
}

#[tokio::test]
async fn survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let app = app_at(dir.path(), true);
        let typed = json!({"allocations": dict(RP, json!({"VCPU": 2})), "project_id": "p", "user_id": "u",
                           "consumer_generation": null, "consumer_type": "INSTANCE"});
        let r = call(&app, Method::PUT, &alloc_url(C1), "1.38", Some(typed)).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    let app = app_at(dir.path(), false);
    let r = call(&app, Method::GET, &alloc_url(C1), "1.38", None).await;
    assert_eq!(
        r.body,
        json!({"allocations": {RP: {"generation": 1, "resources": {"VCPU": 2}}},
               "project_id": "p", "user_id": "u", "consumer_generation": 1,
               "consumer_type": "INSTANCE"})
    );
}

#[tokio::test]
async fn malformed_input_is_a_4xx_and_changes_nothing() {
    let (app, _d) = app();
    let bodies = [
        "", "null", "[]", "\"x\"", "1", "{}", "{\"allocations\": null}",
        "{\"allocations\": {\"x\": 1}}", "{\"allocations\": [1]}",
        "{\"allocations\": [{\"resource_provider\": {}, \"resources\": {\"VCPU\": 1}}]}",
        "{\"allocations\": {\"7260669a-e3d4-4867-aaa7-683e2ab6958c\": {\"resources\": {\"VCPU\": 1e3}}}}",
        "{\"allocations\": {\"7260669a-e3d4-4867-aaa7-683e2ab6958c\": {\"resources\": {\"VCPU\": 99999999999999999999}}}, \"project_id\": \"p\", \"user_id\": \"u\", \"consumer_generation\": null}",
        "{\"allocations\": {\"7260669a-e3d4-4867-aaa7-683e2ab6958c\": {\"resources\": {\"VCPU\": 18446744073709551615}}}, \"project_id\": \"p\", \"user_id\": \"u\", \"consumer_generation\": 18446744073709551615}",
        "{\"allocations\": {\"------------------------------------\": {\"resources\": {\"VCPU\": 1}}}, \"project_id\": \"p\", \"user_id\": \"u\", \"consumer_generation\": null}",
        "{\"------------------------------------\": {\"allocations\": {}, \"project_id\": \"p\", \"user_id\": \"u\"}}",
        "{\"allocations\": {\"7260669a-e3d4-4867-aaa7-683e2ab6958c\": {\"resources\": {\"VCPU\": 1}}}, \"project_id\": 1, \"user_id\": \"u\"}",
    ];
    for version in ["1.0", "1.8", "1.12", "1.28", "1.34", "1.38"] {
        for raw in bodies {
            for (method, path) in [
                (Method::PUT, alloc_url(C1)),
                (Method::POST, "/allocations".to_owned()),
            ] {
                let r = call_raw(&app, method.clone(), &path, version, raw).await;
                assert!(
                    r.status.is_client_error(),
                    "{method} {version} {raw}: {}",
                    r.status
                );
            }
        }
    }
    assert_eq!(provider_generation(&app, RP).await, 0);
    assert_eq!(provider_generation(&app, RP2).await, 0);
}
