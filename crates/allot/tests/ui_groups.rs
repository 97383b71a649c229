//! The web UI's server groups and drains pages (issue 44) over real HTTP against the
//! real binary, in the style of `ui.rs`: groups and a drain made through the API,
//! then `/ui/groups`, `/ui/groups/{uuid}` and `/ui/drains` read with a session
//! cookie and held to what the API says (the policy, where a member is, how broken
//! the rule is, the drain's roots and claims), and a caller without the API's rule
//! given the UI's refusal.

mod support;

use std::path::Path;

use serde_json::{json, Value};
use support::{exchange, Reply, Server};
use uuid::Uuid;

/// One request with any headers (no defaults but `host` and `connection: close`).
fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         content-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    exchange(addr, req.as_bytes())
}

/// An API call as noauth2's admin at the latest microversion that must answer
/// `status`; its JSON body (null when empty).
fn api(addr: &str, method: &str, path: &str, body: Option<Value>, status: u16) -> Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut headers = vec![
        ("x-auth-token", "admin"),
        ("openstack-api-version", "placement latest"),
        ("accept", "application/json"),
    ];
    if !body.is_empty() {
        headers.push(("content-type", "application/json"));
    }
    let r = request(addr, method, path, &headers, &body);
    assert_eq!(r.status, status, "{method} {path}: {}", r.body);
    if r.body.is_empty() {
        Value::Null
    } else {
        r.json()
    }
}

/// Logs in with a form, as a browser sends it from the login page; the session
/// cookie's pair (`allot_ui=...`).
fn login(addr: &str, form: &str) -> String {
    let origin = format!("http://{addr}");
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("origin", origin.as_str()),
        ("sec-fetch-site", "same-origin"),
    ];
    let r = request(addr, "POST", "/ui/login", &headers, form);
    assert_eq!(r.status, 303, "login: {}", r.body);
    let set = r.header("set-cookie").expect("a session cookie");
    set.split(';').next().unwrap().to_owned()
}

fn get(addr: &str, path: &str, cookie: &str) -> Reply {
    request(addr, "GET", path, &[("cookie", cookie)], "")
}

/// A server whose policy file also lets a reader read server groups and drains.
fn server(dir: &Path) -> Server {
    let db = format!("sqlite:{}", dir.join("allot.db").display());
    let policy = dir.join("policy.yaml");
    let rules: String = [
        "allot:server_groups:list",
        "allot:server_groups:show",
        "allot:drains:show",
    ]
    .iter()
    .map(|rule| format!("\"{rule}\": \"role:reader or role:admin or role:service\"\n"))
    .collect();
    std::fs::write(&policy, rules).unwrap();
    let policy = policy.to_str().unwrap();
    Server::start_args(
        &db,
        &["--bind", "127.0.0.1:0", "--policy-file", policy],
        &[],
    )
}

/// A root named `name` with 16 VCPU.
fn root(addr: &str, name: &str) -> Uuid {
    let uuid = Uuid::new_v4();
    let body = json!({"name": name, "uuid": uuid});
    api(addr, "POST", "/resource_providers", Some(body), 200);
    let body = json!({"resource_provider_generation": 0,
                      "inventories": {"VCPU": {"total": 16}}});
    let path = format!("/resource_providers/{uuid}/inventories");
    api(addr, "PUT", &path, Some(body), 200);
    uuid
}

/// A consumer holding 2 VCPU on `on`.
fn allocate(addr: &str, on: Uuid) -> Uuid {
    let c = Uuid::new_v4();
    let body = json!({"allocations": {on.to_string(): {"resources": {"VCPU": 2}}},
                      "project_id": "p", "user_id": "u", "consumer_generation": null,
                      "consumer_type": "INSTANCE"});
    api(addr, "PUT", &format!("/allocations/{c}"), Some(body), 204);
    c
}

/// The table row of a page that carries `attribute="value"`, up to its end.
fn row<'a>(html: &'a str, attribute: &str, value: impl std::fmt::Display) -> &'a str {
    let key = format!("{attribute}=\"{value}\"");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {key} in {html}"));
    let rest = &html[start..];
    &rest[..rest.find("</tr>").unwrap_or(rest.len())]
}

#[test]
fn groups_and_drains_pages() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let addr = s.addr.as_str();
    let cn: Vec<Uuid> = (1..=4).map(|i| root(addr, &format!("grp-cn{i}"))).collect();
    // Two members of an anti-affinity group on one root: broken by one, as a group
    // imported from Nova after a forced move may be; a third elsewhere.
    let (a, b, c) = (
        allocate(addr, cn[0]),
        allocate(addr, cn[0]),
        allocate(addr, cn[1]),
    );
    let anti = Uuid::new_v4();
    let body = json!({"name": "web-anti", "project_id": "p", "policy": "anti-affinity",
                      "members": [a, b, c]});
    let group = api(
        addr,
        "PUT",
        &format!("/server_groups/{anti}"),
        Some(body),
        200,
    );
    assert_eq!(group["violations"], 1, "{group}");
    let aff = Uuid::new_v4();
    let body = json!({"name": "db-aff", "project_id": "p", "policy": "affinity",
                      "members": [c]});
    api(
        addr,
        "PUT",
        &format!("/server_groups/{aff}"),
        Some(body),
        200,
    );

    let cookie = login(addr, "token=admin");
    let r = get(addr, "/ui/groups", &cookie);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("href=\"/ui/groups\""), "the tab");
    // By name: db-aff before web-anti.
    let (first, second) = (
        r.body.find("db-aff").unwrap(),
        r.body.find("web-anti").unwrap(),
    );
    assert!(first < second, "sorted by name");
    let anti_row = row(&r.body, "data-group", anti);
    assert!(anti_row.contains("anti-affinity"), "{anti_row}");
    assert!(anti_row.contains(&format!("href=\"/ui/groups/{anti}\"")));
    assert!(
        anti_row.contains("class=\"broken\" data-violations=\"1\""),
        "{anti_row}"
    );
    let aff_row = row(&r.body, "data-group", aff);
    assert!(
        aff_row.contains(">affinity<") && aff_row.contains("holds"),
        "{aff_row}"
    );

    let r = get(addr, &format!("/ui/groups/{anti}"), &cookie);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("anti-affinity") && r.body.contains("data-violations=\"1\""));
    let member = row(&r.body, "data-consumer", a);
    assert!(
        member.contains(&format!("href=\"/ui/consumers/{a}\"")),
        "{member}"
    );
    assert!(
        member.contains(&format!("href=\"/ui/providers/{}\">grp-cn1</a>", cn[0])),
        "{member}"
    );

    // Drain the root of the two: each member goes where the rule holds again.
    let body = json!({"roots": [cn[0]]});
    let drain = api(addr, "POST", "/drains", Some(body), 201);
    let drain_uuid = drain["uuid"].as_str().unwrap().to_owned();
    let r = get(addr, "/ui/drains", &cookie);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains(&drain_uuid), "{}", r.body);
    let section = &r.body[r
        .body
        .find(&format!("data-drain=\"{drain_uuid}\""))
        .unwrap()..];
    assert!(section.contains("class=\"state\">open<"), "{section}");
    assert!(section.contains(&format!("href=\"/ui/providers/{}\">grp-cn1</a>", cn[0])));
    assert!(
        section.contains("data-state=\"pending\">2 pending<"),
        "{section}"
    );
    assert!(section.contains("data-state=\"confirmed\">0 confirmed<"));
    for claim in drain["claims"].as_array().unwrap() {
        let consumer = claim["consumer_uuid"].as_str().unwrap();
        let target = claim["allocations"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap();
        let line = row(section, "data-consumer", consumer);
        assert!(
            line.contains(&format!("href=\"/ui/providers/{target}\"")),
            "{line}"
        );
        assert!(line.contains("class=\"state\">pending<"), "{line}");
    }
    // The group as the API sees it now: the claims hold the members' new homes.
    let api_group = api(addr, "GET", &format!("/server_groups/{anti}"), None, 200);
    assert_eq!(api_group["violations"], 0, "{api_group}");
    let r = get(addr, &format!("/ui/groups/{anti}"), &cookie);
    assert!(r.body.contains("data-violations=\"0\""), "{}", r.body);
    let moved = api_group["placement"][a.to_string()]["roots"][0]
        .as_str()
        .unwrap();
    let member = row(&r.body, "data-consumer", a);
    assert!(
        member.contains(&format!("href=\"/ui/providers/{moved}\"")),
        "{member}"
    );

    // Confirmed, the drain's claims count as confirmed.
    api(
        addr,
        "POST",
        &format!("/drains/{drain_uuid}/confirm"),
        None,
        200,
    );
    let r = get(addr, "/ui/drains", &cookie);
    assert!(
        r.body.contains("data-state=\"confirmed\">2 confirmed<"),
        "{}",
        r.body
    );
    assert!(r.body.contains("class=\"state\">confirmed<"));

    // Without the API's rules: the UI's refusal, naming the rule, and no data.
    let user = login(addr, "token=bob:p");
    for (path, rule) in [
        ("/ui/groups".to_owned(), "allot:server_groups:list"),
        (format!("/ui/groups/{anti}"), "allot:server_groups:show"),
        ("/ui/drains".to_owned(), "allot:drains:show"),
    ] {
        let r = get(addr, &path, &user);
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert!(r.body.contains(rule), "{path}: {}", r.body);
        assert!(
            !r.body.contains("web-anti") && !r.body.contains("grp-cn1"),
            "{path}"
        );
    }
    // A reader whom the policy file lets read groups and drains, but not providers:
    // the API gives it roots by uuid, and so do the pages (issue 46).
    let as_reader = |path: &str| {
        let headers = [
            ("x-auth-token", "r:p"),
            ("x-roles", "reader"),
            ("openstack-api-version", "placement latest"),
            ("accept", "application/json"),
        ];
        request(addr, "GET", path, &headers, "")
    };
    assert_eq!(
        as_reader(&format!("/resource_providers/{}", cn[0])).status,
        403
    );
    let r = as_reader(&format!("/server_groups/{anti}"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains("grp-cn"), "{}", r.body);
    let reader = login(addr, "token=r:p&roles=reader");
    for path in [format!("/ui/groups/{anti}"), "/ui/drains".to_owned()] {
        let r = get(addr, &path, &reader);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(!r.body.contains("grp-cn"), "{path}: {}", r.body);
    }
    let r = get(addr, &format!("/ui/groups/{anti}"), &reader);
    assert!(
        row(&r.body, "data-consumer", a).contains(moved),
        "{}",
        r.body
    );
    let r = get(addr, "/ui/drains", &reader);
    assert!(r
        .body
        .contains(&format!("<code class=\"uuid\">{}</code>", cn[0])));
    // Bad input is a 4xx, as on the other pages.
    for (path, status) in [
        ("/ui/groups?page=0", 400),
        ("/ui/groups?page=99", 200),
        ("/ui/groups/not-a-uuid", 404),
        ("/ui/groups/00000000-0000-0000-0000-000000000000", 404),
    ] {
        assert_eq!(get(addr, path, &cookie).status, status, "{path}");
    }
    // Without a session: to the login.
    assert_eq!(get(addr, "/ui/drains", "").status, 303);
}
