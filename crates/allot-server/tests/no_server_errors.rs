//! Bad input of any kind gets a 4xx in the error envelope, never a 5xx: random methods,
//! paths, query strings, headers and bodies thrown at every URL family, through the
//! router (no sockets), on a store that already holds some data.

mod support;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::{json, Value};
use tower::ServiceExt;

const RP: &str = "a1b2c3d4-0000-4000-8000-000000000001";

/// URL templates of every family; `{rp}` is an existing provider.
const PATHS: &[&str] = &[
    "/",
    "/resource_providers",
    "/resource_providers/{rp}",
    "/resource_providers/{rp}/inventories",
    "/resource_providers/{rp}/inventories/VCPU",
    "/resource_providers/{rp}/inventories/CUSTOM_X",
    "/resource_providers/{rp}/aggregates",
    "/resource_providers/{rp}/traits",
    "/resource_providers/{rp}/usages",
    "/resource_providers/{rp}/allocations",
    "/resource_providers/not-a-uuid",
    "/resource_classes",
    "/resource_classes/CUSTOM_X",
    "/resource_classes/VCPU",
    "/traits",
    "/traits/CUSTOM_T",
    "/allocations",
    "/allocations/b1b2c3d4-0000-4000-8000-000000000002",
    "/allocations/zzz",
    "/usages",
    "/reshaper",
    "/allocation_candidates",
    // allot's extensions.
    "/claims",
    "/server_groups",
    "/server_groups/{sg}",
    "/server_groups/{sg}/members",
    "/server_groups/{rp}",
    "/drains",
    "/drains/{rp}",
    "/drains/{rp}/confirm",
    "/dry_run",
];

/// A write a dry run takes, on the seed's provider.
const DRY_RUN_PATH: &str = "/resource_providers/a1b2c3d4-0000-4000-8000-000000000001/inventories";

/// A server group the seed makes, holding the seed's consumer.
const SG: &str = "5e7e0000-0000-4000-8000-000000000001";

const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"];

const QUERY_KEYS: &[&str] = &[
    "name",
    "uuid",
    "member_of",
    "in_tree",
    "required",
    "resources",
    "limit",
    "project_id",
    "user_id",
    "consumer_type",
    "group_policy",
    "resources1",
    "required1",
    "member_of1",
    "same_subtree",
    "root_required",
    "associated",
    "in_tree1",
    "resources_X",
    "policy",
    "force",
    "marker",
];

const QUERY_VALUES: &[&str] = &[
    "",
    "x",
    "in:",
    "!",
    "!in:",
    "in:a,b",
    "VCPU:1",
    "VCPU:-1",
    "VCPU:99999999999999999999",
    "VCPU",
    ":",
    "CUSTOM_X:1,VCPU:1",
    "HW_CPU_X86_AVX2,!CUSTOM_T",
    "in:HW_CPU_X86_AVX2,CUSTOM_T",
    RP,
    "true",
    "nope",
    "0",
    "-1",
    "1,2",
    "isolate",
    "none",
    "%ff",
    "1",
    "_X",
    "anti-affinity",
    SG,
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "x",
            RP,
            "VCPU",
            "CUSTOM_X",
            "HW_CPU_X86_AVX2",
            "in:",
            "INSTANCE",
            "☃",
            "anti-affinity",
            "root",
            "trait:CUSTOM_",
            "resources=VCPU:1",
            SG,
            // A dry run's method and path.
            "PUT",
            "DELETE",
            "/reshaper",
            DRY_RUN_PATH,
        ])
        .prop_map(Value::from),
    ];
    let keys = prop::sample::select(vec![
        "name",
        "uuid",
        "parent_provider_uuid",
        "total",
        "reserved",
        "min_unit",
        "max_unit",
        "step_size",
        "allocation_ratio",
        "inventories",
        "resource_provider_generation",
        "aggregates",
        "traits",
        "allocations",
        "resources",
        "project_id",
        "user_id",
        "consumer_generation",
        "consumer_type",
        "mappings",
        "VCPU",
        RP,
        "x",
        // allot's extensions: claims, picks, server groups, drains.
        "consumer_uuid",
        "request",
        "consumers",
        "server_group",
        "policy",
        "rules",
        "max_server_per_host",
        "scope",
        "members",
        "add",
        "remove",
        "roots",
        "requests",
        "disable",
        "partial",
        "method",
        "path",
        "body",
    ]);
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(keys.clone(), inner, 0..5).prop_map(|m| Value::Object(
                m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

#[derive(Debug, Clone)]
struct Case {
    method: &'static str,
    path: String,
    query: Vec<(&'static str, &'static str)>,
    version: Option<String>,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
    token: &'static str,
}

fn arb_case() -> impl Strategy<Value = Case> {
    let body = prop_oneof![
        Just(None),
        arb_json().prop_map(|v| Some(serde_json::to_vec(&v).unwrap())),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Some),
    ];
    (
        prop::sample::select(METHODS),
        prop::sample::select(PATHS),
        prop::collection::vec(
            (
                prop::sample::select(QUERY_KEYS),
                prop::sample::select(QUERY_VALUES),
            ),
            0..4,
        ),
        prop::option::of(prop_oneof![
            (0u16..45).prop_map(|m| format!("placement 1.{m}")),
            Just("placement latest".to_owned()),
            Just("placement 1.x".to_owned()),
        ]),
        prop::option::of(prop::sample::select(vec![
            "application/json",
            "text/plain",
            "application/json; charset=utf-8",
        ])),
        body,
        prop::sample::select(vec!["admin", "user", "admin:p1"]),
    )
        .prop_map(
            |(method, path, query, version, content_type, body, token)| Case {
                method,
                path: path.replace("{rp}", RP).replace("{sg}", SG),
                query,
                version,
                content_type,
                body,
                token,
            },
        )
}

/// A server with one provider, an inventory, a custom class and trait, an
/// allocation and a server group, so that handlers reach their deeper paths.
fn seeded_app(rt: &tokio::runtime::Runtime) -> (axum::Router, tempfile::TempDir) {
    let (app, dir) = support::app();
    let seed = [
        (
            "POST",
            "/resource_providers".to_owned(),
            json!({"name": "cn1", "uuid": RP}),
        ),
        (
            "PUT",
            format!("/resource_providers/{RP}/inventories"),
            json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}),
        ),
        ("PUT", "/resource_classes/CUSTOM_X".to_owned(), Value::Null),
        ("PUT", "/traits/CUSTOM_T".to_owned(), Value::Null),
        (
            "PUT",
            "/allocations/b1b2c3d4-0000-4000-8000-000000000002".to_owned(),
            json!({"allocations": {RP: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
                   "consumer_generation": null, "consumer_type": "INSTANCE"}),
        ),
        (
            "PUT",
            format!("/server_groups/{SG}"),
            json!({"name": "g", "project_id": "p", "policy": "anti-affinity",
                   "members": ["b1b2c3d4-0000-4000-8000-000000000002"]}),
        ),
    ];
    rt.block_on(async {
        for (method, path, body) in seed {
            let mut req = Request::builder()
                .method(method)
                .uri(path)
                .header("x-auth-token", "admin")
                .header("openstack-api-version", "placement latest");
            let body = if body.is_null() {
                Body::empty()
            } else {
                req = req.header("content-type", "application/json");
                Body::from(body.to_string())
            };
            app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
        }
    });
    (app, dir)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn no_request_gets_a_server_error(cases in prop::collection::vec(arb_case(), 1..8)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (app, _dir) = seeded_app(&rt);
        for case in cases {
            let mut uri = case.path.clone();
            if !case.query.is_empty() {
                let q: Vec<String> = case.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
                uri = format!("{uri}?{}", q.join("&"));
            }
            let mut req = Request::builder().method(case.method).uri(&uri).header("x-auth-token", case.token);
            if let Some(v) = &case.version {
                req = req.header("openstack-api-version", v);
            }
            if let Some(ct) = case.content_type {
                req = req.header("content-type", ct);
            }
            let body = case.body.clone().map(Body::from).unwrap_or_else(Body::empty);
            let response = rt.block_on(app.clone().oneshot(req.body(body).unwrap())).unwrap();
            let status = response.status();
            let bytes = rt.block_on(response.into_body().collect()).unwrap().to_bytes();
            prop_assert!(status.as_u16() < 500, "{case:?} -> {status}: {}", String::from_utf8_lossy(&bytes));
            if status.is_client_error() && case.method != "HEAD" {
                let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                prop_assert!(v["errors"][0]["status"] == status.as_u16(), "{case:?} -> {status}: no envelope: {}", String::from_utf8_lossy(&bytes));
            }
        }
    }
}
