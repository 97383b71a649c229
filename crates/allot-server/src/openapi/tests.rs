//! The document cannot drift: it is served as the file holds it, its paths and methods
//! are the router's, and its request bodies are the ones the handlers validate.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::components::{CONSUMER, PROVIDER};
use super::{document, operations, text, FILE, PATH};
use crate::{router, AppState, Config, PolicyMode, Settings};

/// Set to rewrite docs/openapi.json from the code.
const REWRITE: &str = "ALLOT_WRITE_OPENAPI";

fn app() -> (axum::Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("allot.db").display());
    let store = allot_store::Store::open(&url).unwrap();
    let host = allot_store::Host::new(store, Arc::new(|| 1_700_000_000)).unwrap();
    let settings = Settings {
        policy: PolicyMode::Legacy,
        ..Settings::default()
    };
    let config = Config {
        settings,
        ..Config::default()
    };
    let state = AppState {
        host,
        config: Arc::new(config),
    };
    (router(state), dir)
}

async fn call(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, bytes.to_vec())
}

#[tokio::test]
async fn served_without_a_token_as_the_file_holds_it() {
    let (app, _dir) = app();
    let (status, headers, body) = call(&app, Request::get(PATH).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    // Byte for byte the file's text (which is the document's).
    assert!(
        body == text().as_bytes(),
        "the served document is not text()"
    );

    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(FILE);
    if std::env::var_os(REWRITE).is_some() {
        std::fs::write(&file, text()).unwrap();
    }
    let kept = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        kept == text(),
        "{FILE} is not the document the server serves: rewrite it with \
         `{REWRITE}=1 cargo test --release --workspace --locked -p allot-server --lib openapi` \
         and commit it"
    );
}

/// The paths the route table names (`.route("...")` in `handlers/`, and the
/// constants the service routes use), read from the source: axum cannot list a
/// router's routes.
fn routed_paths() -> BTreeSet<String> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut text = String::new();
    for entry in std::fs::read_dir(src.join("handlers")).unwrap() {
        text.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    let constants = [
        ("crate::metrics::PATH", crate::metrics::PATH),
        ("allot_client::status::PATH", allot_client::status::PATH),
        ("crate::openapi::PATH", PATH),
    ];
    let mut paths = BTreeSet::from([crate::health::PATH.to_owned()]);
    let route = regex::Regex::new(r#"\.route\(\s*(?:"([^"]*)"|([a-z_:]+::PATH))"#).unwrap();
    for found in route.captures_iter(&text) {
        let path = match (found.get(1), found.get(2)) {
            (Some(literal), _) => literal.as_str(),
            (None, Some(name)) => {
                constants
                    .iter()
                    .find(|(n, _)| *n == name.as_str())
                    .unwrap_or_else(|| panic!("a route at unknown constant {}", name.as_str()))
                    .1
            }
            _ => unreachable!(),
        };
        paths.insert(path.to_owned());
    }
    paths
}

/// The document's methods of each path.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let mut paths: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for op in operations() {
        paths
            .entry(op.path.to_owned())
            .or_default()
            .insert(op.method.to_owned());
    }
    paths
}

#[test]
fn every_route_is_documented_and_every_path_routed() {
    let routed = routed_paths();
    let documented: BTreeSet<String> = documented().into_keys().collect();
    let missing: Vec<_> = routed.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&routed).collect();
    assert!(
        missing.is_empty(),
        "routes missing from the document: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "documented paths no route serves: {extra:?}"
    );
}

/// A path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{uuid}", PROVIDER)
        .replace("{consumer_uuid}", CONSUMER)
        .replace("{name}", "CUSTOM_FUZZ")
        .replace("{resource_class}", "VCPU")
}

#[tokio::test]
async fn each_path_has_exactly_the_documented_methods() {
    let (app, _dir) = app();
    for (path, methods) in documented() {
        if path == crate::health::PATH {
            continue; // Any method (oslo's contract).
        }
        let req = Request::builder()
            .method("TRACE")
            .uri(concrete(&path))
            .header("x-auth-token", "admin")
            .body(Body::empty())
            .unwrap();
        let (status, headers, _) = call(&app, req).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        let allowed: BTreeSet<String> = headers["allow"]
            .to_str()
            .unwrap()
            .split(',')
            .map(|m| m.trim().to_owned())
            .filter(|m| m != "HEAD")
            .collect();
        assert_eq!(allowed, methods, "{path}");
    }
}

#[tokio::test]
async fn each_request_body_is_the_one_its_handler_validates() {
    let (app, _dir) = app();
    let doc = document();
    for op in operations() {
        let Some(schema) = &op.body else { continue };
        let at = &doc["paths"][op.path][op.method.to_ascii_lowercase()];
        let body = &at["requestBody"]["content"]["application/json"];
        assert_eq!(&body["schema"], schema, "{} {}", op.method, op.path);
        let example = &body["examples"]["accepted"]["value"];
        crate::schema::validate(example, schema)
            .unwrap_or_else(|e| panic!("{} {}: {}", op.method, op.path, e.message));
        // The handler reads the example with the same schema: it passes validation
        // (it may still be refused for what it names, a provider that does not exist).
        let req = Request::builder()
            .method(op.method)
            .uri(concrete(op.path))
            .header("x-auth-token", "admin")
            .header("openstack-api-version", "placement 1.39")
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(example).unwrap()))
            .unwrap();
        let (status, _, answer) = call(&app, req).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            !answer.contains("JSON does not validate"),
            "{} {}: {status} {answer}",
            op.method,
            op.path
        );
    }
}

/// Every schema of every answer says something (no `{}`), and every operation has
/// an id of its own.
#[test]
fn no_empty_response_schema_and_unique_ids() {
    fn walk(v: &Value, at: &str) {
        match v {
            Value::Object(map) => {
                if let Some(schema) = map.get("schema") {
                    assert_ne!(schema, &serde_json::json!({}), "an empty schema at {at}");
                }
                for (k, v) in map {
                    walk(v, &format!("{at}/{k}"));
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, at)),
            _ => {}
        }
    }
    walk(document(), "");
    let mut ids = BTreeSet::new();
    for path in document()["paths"].as_object().unwrap().values() {
        for op in path.as_object().unwrap().values() {
            let id = op["operationId"].as_str().unwrap();
            assert!(ids.insert(id.to_owned()), "operationId {id} twice");
        }
    }
}

/// Every operation, sent as its example at 1.39 and again without a version header
/// (served at 1.0), answers a status the document lists: what the fuzzer found first
/// (`POST /resource_providers` answers 200 from 1.20; URLs newer than 1.0 answer 404
/// there, and `DELETE .../inventories` 405), kept from coming back.
#[tokio::test]
async fn examples_answer_documented_statuses() {
    let (app, _dir) = app();
    let doc = document();
    for version in [Some("placement 1.39"), None] {
        for op in operations() {
            let at = &doc["paths"][op.path][op.method.to_ascii_lowercase()];
            let mut req = Request::builder()
                .method(op.method)
                .uri(concrete(op.path))
                .header("x-auth-token", "admin");
            if let Some(version) = version {
                req = req.header("openstack-api-version", version);
            }
            let body = match &op.body {
                Some(_) => {
                    req = req.header("content-type", "application/json");
                    let example = &at["requestBody"]["content"]["application/json"]["examples"];
                    Body::from(serde_json::to_vec(&example["accepted"]["value"]).unwrap())
                }
                None => Body::empty(),
            };
            let (status, _, answer) = call(&app, req.body(body).unwrap()).await;
            assert!(
                at["responses"].get(status.as_str()).is_some(),
                "{} {} at {version:?}: {status} is not documented ({})",
                op.method,
                op.path,
                String::from_utf8_lossy(&answer)
            );
        }
    }
}
