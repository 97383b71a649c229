//! The web UI's server side (issue 26) over real HTTP against the real binary: the
//! login and its cookie (`HttpOnly`, `SameSite=Strict`, `Path=/ui`), nothing shown
//! without a session, cross-origin posts and a missing CSRF token refused, the API's
//! policy applied to the pages (static tokens: a reader is refused what the API
//! refuses a reader; a reader a policy file lets read more is shown on each page
//! what the API shows it), a revoked token ending its session, the API never taking the
//! cookie, and bad input answered 4xx, never 5xx. The browser-driven test is
//! `tests/ui/test_ui.py` (`scripts/ui-test`).

mod support;

use std::path::Path;
use std::time::Duration;

use support::{exchange, token_cmd, Reply, Server};

const RP: &str = "6a0f5b0e-54c5-4a39-9a5b-3a1f3c2e8d11";
const CONSUMER: &str = "b5d3f3a2-7a0e-4f51-8c7e-0d9a2a1c4e22";

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

/// A form post. Unless `more` gives `origin` or `sec-fetch-site` itself, with what a
/// browser sends with a form of the UI's own page (both).
fn post_form(addr: &str, path: &str, more: &[(&str, &str)], body: &str) -> Reply {
    let own = format!("http://{addr}");
    let mut headers = vec![("content-type", "application/x-www-form-urlencoded")];
    if !more
        .iter()
        .any(|(k, _)| matches!(*k, "origin" | "sec-fetch-site"))
    {
        headers.extend([("origin", own.as_str()), ("sec-fetch-site", "same-origin")]);
    }
    headers.extend_from_slice(more);
    request(addr, "POST", path, &headers, body)
}

/// An API call as `token` at the latest microversion.
fn api(addr: &str, method: &str, path: &str, token: &str, body: &str) -> Reply {
    let mut headers = vec![
        ("x-auth-token", token),
        ("openstack-api-version", "placement latest"),
        ("accept", "application/json"),
    ];
    if !body.is_empty() {
        headers.push(("content-type", "application/json"));
    }
    request(addr, method, path, &headers, body)
}

/// A provider with inventory, and a pending claim on it (noauth2's admin).
fn seed(addr: &str, token: &str) {
    let r = api(
        addr,
        "POST",
        "/resource_providers",
        token,
        &format!(r#"{{"name": "ui-compute-1", "uuid": "{RP}"}}"#),
    );
    assert!(r.status == 200 || r.status == 201, "{}", r.body);
    let r = api(
        addr,
        "PUT",
        &format!("/resource_providers/{RP}/inventories"),
        token,
        r#"{"resource_provider_generation": 0, "inventories": {
            "VCPU": {"total": 32, "allocation_ratio": 2.0},
            "MEMORY_MB": {"total": 131072, "reserved": 2048}}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api(
        addr,
        "POST",
        "/claims",
        token,
        &format!(
            r#"{{"consumer_uuid": "{CONSUMER}", "project_id": "p1", "user_id": "u1",
            "allocations": {{"{RP}": {{"resources": {{"VCPU": 4, "MEMORY_MB": 8192}}}}}},
            "expires_in": 600, "tag": "boot-request-7"}}"#
        ),
    );
    assert_eq!(r.status, 201, "{}", r.body);
}

/// Logs in with `token` (and more form fields); the session cookie's pair
/// (`allot_ui=...`) and the whole `Set-Cookie` value.
fn login(addr: &str, form: &str) -> (String, String) {
    let r = post_form(addr, "/ui/login", &[], form);
    assert_eq!(r.status, 303, "login: {}", r.body);
    let set = r.header("set-cookie").expect("a session cookie").to_owned();
    let pair = set.split(';').next().unwrap().to_owned();
    (pair, set)
}

fn get(addr: &str, path: &str, cookie: &str) -> Reply {
    request(addr, "GET", path, &[("cookie", cookie)], "")
}

fn server(dir: &Path, args: &[&str]) -> Server {
    let db = format!("sqlite:{}", dir.join("allot.db").display());
    Server::start_args(&db, args, &[])
}

#[test]
fn login_sets_a_strict_cookie_and_pages_need_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &["--bind", "127.0.0.1:0"]);
    seed(&s.addr, "admin");
    let pages = [
        "/ui".to_owned(),
        "/ui/providers?q=ui-compute".to_owned(),
        format!("/ui/providers/{RP}"),
        format!("/ui/consumers/{CONSUMER}"),
        "/ui/claims".to_owned(),
        "/ui/headroom?resources=VCPU:1".to_owned(),
    ];
    // Without a session: the login page, and nothing of the data.
    for page in &pages {
        for cookie in [
            "",
            "allot_ui=0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            let r = get(&s.addr, page, cookie);
            assert_eq!(r.status, 303, "{page} without a session: {}", r.body);
            let location = r.header("location").unwrap();
            assert!(location.starts_with("/ui/login?next="), "{location}");
            assert!(!r.body.contains("ui-compute-1") && !r.body.contains("boot-request"));
        }
    }
    let r = post_form(&s.addr, "/ui/logout", &[], "csrf=x");
    assert_eq!(r.status, 401);
    // The login page is open and says what to give; a wrong login is a 4xx.
    let r = get(&s.addr, "/ui/login", "");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("USER[:PROJECT]"), "{}", r.body);
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let r = post_form(&s.addr, "/ui/login", &[], "token=");
    assert_eq!(r.status, 400);
    assert!(r.header("set-cookie").is_none());

    let (cookie, set) = login(&s.addr, "token=admin");
    for part in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(part), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    for page in &pages {
        let r = get(&s.addr, page, &cookie);
        assert_eq!(r.status, 200, "{page}: {}", r.body);
        assert_eq!(r.header("cache-control"), Some("no-store"));
    }
    let r = get(&s.addr, &format!("/ui/providers/{RP}"), &cookie);
    assert!(r.body.contains("ui-compute-1") && r.body.contains("boot-request-7"));
    // MEMORY_MB in its units: 131072 - 2048 = 126 GiB of capacity.
    assert!(r.body.contains("126 GiB"), "{}", r.body);
    // A login returns to where it was sent from, and never off the site.
    let r = post_form(&s.addr, "/ui/login?next=%2Fui%2Fclaims", &[], "token=admin");
    assert_eq!(r.header("location"), Some("/ui/claims"));
    for next in [
        "//evil.example/",
        "https://evil.example/",
        "/resource_providers",
    ] {
        let path = format!(
            "/ui/login?next={}",
            form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
        );
        let r = post_form(&s.addr, &path, &[], "token=admin");
        assert_eq!(r.header("location"), Some("/ui"), "{next}");
    }

    // The API never takes the cookie: the same request without a token is a 401.
    let r = request(
        &s.addr,
        "GET",
        "/resource_providers",
        &[("cookie", &cookie), ("accept", "application/json")],
        "",
    );
    assert_eq!(r.status, 401, "{}", r.body);

    // Logout needs the session's CSRF token and this origin; then the session is over.
    let r = post_form(&s.addr, "/ui/logout", &[("cookie", &cookie)], "csrf=nope");
    assert_eq!(r.status, 403);
    assert_eq!(get(&s.addr, "/ui", &cookie).status, 200, "still logged in");
    let page = get(&s.addr, "/ui", &cookie).body;
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the logout form's CSRF token")
        .to_owned();
    let r = post_form(
        &s.addr,
        "/ui/logout",
        &[("cookie", &cookie), ("origin", "http://evil.example")],
        &format!("csrf={csrf}"),
    );
    assert_eq!(r.status, 403, "a cross-origin logout");
    let r = post_form(
        &s.addr,
        "/ui/logout",
        &[("cookie", &cookie)],
        &format!("csrf={csrf}"),
    );
    assert_eq!(r.status, 303);
    assert!(r.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(get(&s.addr, "/ui", &cookie).status, 303, "logged out");
}

/// A form post with exactly these headers (no `origin` or `sec-fetch-site` but
/// those given), its `Host` `host`.
fn post_as(addr: &str, host: &str, headers: &[(&str, &str)], form: &str) -> Reply {
    let mut req = format!(
        "POST /ui/login HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\
         content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n",
        form.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(form);
    exchange(addr, req.as_bytes())
}

#[test]
fn cross_origin_posts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &["--bind", "127.0.0.1:0"]);
    let own = format!("http://{}", s.addr);
    let a = s.addr.as_str();
    for (host, headers) in [
        (a, vec![("origin", "http://evil.example")]),
        (a, vec![("origin", "null")]),
        (a, vec![("sec-fetch-site", "cross-site")]),
        (a, vec![("sec-fetch-site", "same-site")]),
        (a, vec![("sec-fetch-site", "none")]),
        (
            a,
            vec![("origin", own.as_str()), ("sec-fetch-site", "cross-site")],
        ),
        // Neither header: no browser's form (issue 46).
        (a, vec![]),
        // A page of a name rebound to this address: its `Host` and `Origin` agree,
        // and neither is this service.
        ("evil.example", vec![("origin", "http://evil.example")]),
        (a, vec![("origin", "https://127.0.0.1")]),
    ] {
        let r = post_as(a, host, &headers, "token=admin");
        assert_eq!(r.status, 403, "{host} {headers:?}: {}", r.body);
        assert!(r.header("set-cookie").is_none(), "{headers:?}");
        assert!(r.body.contains("did not come from this site"), "{}", r.body);
    }
    // From the page itself, as a browser sends it: `Sec-Fetch-Site` alone is
    // enough, and so is `Origin` alone when it names the address connected to.
    for headers in [
        vec![("origin", own.as_str()), ("sec-fetch-site", "same-origin")],
        vec![("sec-fetch-site", "same-origin")],
        vec![("origin", own.as_str())],
    ] {
        let r = post_as(a, "allot.example", &headers, "token=admin");
        assert_eq!(r.status, 303, "{headers:?}: {}", r.body);
    }
}

/// With `--public-url`, `Origin` is compared with it, not with the address.
#[test]
fn the_public_url_is_the_origin() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(
        dir.path(),
        &[
            "--bind",
            "127.0.0.1:0",
            "--public-url",
            "HTTPS://Allot.Example:443/",
        ],
    );
    let a = s.addr.as_str();
    let own = format!("http://{a}");
    for (origin, status) in [
        ("https://allot.example", 303),
        (own.as_str(), 403),
        ("http://allot.example", 403),
        ("https://allot.example:8443", 403),
    ] {
        let r = post_as(a, "allot.example", &[("origin", origin)], "token=admin");
        assert_eq!(r.status, status, "{origin}: {}", r.body);
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(["serve", "--public-url", "https://allot.example/ui"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("public-url") || err.contains("invalid URL"),
        "{err}"
    );
}

#[test]
fn bad_input_is_a_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &["--bind", "127.0.0.1:0"]);
    seed(&s.addr, "admin");
    let (cookie, _) = login(&s.addr, "token=admin");
    let long = "x".repeat(300);
    let cases = [
        ("/ui/providers?page=0", 400),
        ("/ui/providers?page=-1", 400),
        ("/ui/providers?page=abc", 400),
        ("/ui/claims?page=99999999999", 400),
        (&*format!("/ui/providers?q={long}"), 400),
        (&*format!("/ui/x?{}", "a".repeat(5000)), 404),
        (&*format!("/ui/providers?{}", "a=b&".repeat(2000)), 400),
        ("/ui/providers/not-a-uuid", 404),
        ("/ui/providers/00000000-0000-0000-0000-000000000000", 404),
        ("/ui/consumers/%ZZ", 404),
        ("/ui/consumers/00000000-0000-0000-0000-000000000000", 404),
        ("/ui/headroom?resources=VCPU:x", 400),
        ("/ui/headroom?resources=NOPE:1", 400),
        (
            "/ui/headroom?resources=VCPU:1&group_by=trait&prefix=lower",
            400,
        ),
        ("/ui/headroom?resources=VCPU:1&group_by=rack", 400),
        ("/ui/nothing/here", 404),
        ("/ui/static/../../etc/passwd", 404),
        ("/ui/providers?page=999", 200),
        ("/ui/providers?q=%FF%FE", 200),
        ("/ui/providers?q=%3Cscript%3E", 200),
    ];
    for (path, status) in cases {
        let r = get(&s.addr, path, &cookie);
        assert_eq!(r.status, status, "{path}: {}", r.body);
        assert!(!r.body.contains("<script>"), "{path}: echoed unescaped");
    }
    // Login forms that cannot be read.
    let own = format!("http://{}", s.addr);
    let r = request(
        &s.addr,
        "POST",
        "/ui/login",
        &[
            ("content-type", "application/json"),
            ("origin", &own),
            ("sec-fetch-site", "same-origin"),
        ],
        r#"{"token": "admin"}"#,
    );
    assert_eq!(r.status, 400);
    let r = post_form(
        &s.addr,
        "/ui/login",
        &[],
        &format!("token={}", "a".repeat(9000)),
    );
    assert_eq!(r.status, 400);
    let r = post_form(&s.addr, "/ui/login", &[], &"a".repeat(40_000));
    assert_eq!(r.status, 413);
    let r = post_form(&s.addr, "/ui/login", &[], "token=caf%C3%A9");
    assert_eq!(r.status, 400);
    let r = post_form(&s.addr, "/ui/login", &[], "token=a%0Ab");
    assert_eq!(r.status, 400);
    // Methods a page does not have.
    let r = request(&s.addr, "DELETE", "/ui", &[("cookie", &cookie)], "");
    assert_eq!(r.status, 405);
}

#[test]
fn static_tokens_and_the_apis_policy() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let admin = token_cmd(
        &file,
        &["add", "--user", "ops", "--project", "p1", "--role", "admin"],
    );
    let reader = token_cmd(
        &file,
        &["add", "--user", "r", "--project", "p1", "--role", "reader"],
    );
    let s = server(
        dir.path(),
        &[
            "--bind",
            "127.0.0.1:0",
            "--auth",
            "tokens",
            "--token-file",
            file.to_str().unwrap(),
        ],
    );
    seed(&s.addr, &admin);
    // A token the file does not hold, or noauth2's kind of token: no session.
    for form in ["token=admin", "token=allot-0000"] {
        let r = post_form(&s.addr, "/ui/login", &[], form);
        assert_eq!(r.status, 401, "{form}");
        assert!(r.header("set-cookie").is_none());
        assert!(r.body.contains("not valid"), "{}", r.body);
    }
    let (as_admin, _) = login(&s.addr, &format!("token={admin}"));
    assert_eq!(get(&s.addr, "/ui", &as_admin).status, 200);
    // A reader is refused what the API refuses a reader, and shown what it allows.
    let (as_reader, _) = login(&s.addr, &format!("token={reader}"));
    assert_eq!(
        api(&s.addr, "GET", "/resource_providers", &reader, "").status,
        403
    );
    for page in ["/ui", "/ui/providers", "/ui/claims"] {
        let r = get(&s.addr, page, &as_reader);
        assert_eq!(r.status, 403, "{page}");
        assert!(r.body.contains("placement:") || r.body.contains("allot:"));
        assert!(!r.body.contains("ui-compute-1"));
    }
    assert_eq!(
        api(&s.addr, "GET", "/headroom?resources=VCPU:1", &reader, "").status,
        200
    );
    let r = get(&s.addr, "/ui/headroom?resources=VCPU:1", &as_reader);
    assert_eq!(r.status, 200, "{}", r.body);
    // Revoking the token ends its sessions at the next page (after the reload).
    let id = token_cmd(&file, &["list", "-f", "json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&id).unwrap();
    let admin_id = rows[0]["id"].as_str().unwrap().to_owned();
    token_cmd(&file, &["revoke", &admin_id]);
    s.hup();
    let mut ended = false;
    for _ in 0..100 {
        if get(&s.addr, "/ui", &as_admin).status == 303 {
            ended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ended, "the revoked token's session ended");
}

/// A reader whom an operator's policy file also lets list providers, allocations
/// and claims (issue 46): every page shows it what the API shows it and no more, so
/// never a provider's name where the API's answer gives only a uuid (headroom by
/// host, a claim, a consumer), nor pending claims or counts it may not read.
#[test]
fn every_page_shows_a_reader_what_the_api_shows() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    let rules: String = [
        "placement:resource_providers:list",
        "placement:resource_providers:inventories:list",
        "placement:resource_providers:usages",
        "placement:allocations:list",
        "allot:claims:list",
    ]
    .iter()
    .map(|rule| format!("\"{rule}\": \"role:reader or role:admin or role:service\"\n"))
    .collect();
    std::fs::write(&policy, rules).unwrap();
    let s = server(
        dir.path(),
        &[
            "--bind",
            "127.0.0.1:0",
            "--policy-file",
            policy.to_str().unwrap(),
        ],
    );
    seed(&s.addr, "admin");
    let held = "c0a8f1d2-3b4c-4d5e-8f60-718293a4b5c6";
    let r = api(
        &s.addr,
        "PUT",
        &format!("/allocations/{held}"),
        "admin",
        &format!(
            r#"{{"allocations": {{"{RP}": {{"resources": {{"VCPU": 2}}}}}},
            "project_id": "p1", "user_id": "u1", "consumer_generation": null,
            "consumer_type": "INSTANCE"}}"#
        ),
    );
    assert_eq!(r.status, 204, "{}", r.body);
    // What the API shows the reader: no provider by uuid, the claims and the
    // headroom by root uuid, never a name.
    let as_api = |path: &str| {
        let headers = [
            ("x-auth-token", "r:p1"),
            ("x-roles", "reader"),
            ("openstack-api-version", "placement latest"),
            ("accept", "application/json"),
        ];
        request(&s.addr, "GET", path, &headers, "")
    };
    assert_eq!(as_api(&format!("/resource_providers/{RP}")).status, 403);
    assert_eq!(
        as_api(&format!("/resource_providers/{RP}/pending")).status,
        403
    );
    for path in [
        "/claims",
        &format!("/allocations/{held}"),
        "/headroom?resources=VCPU:1&group_by=root",
    ] {
        let r = as_api(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(
            r.body.contains(RP) && !r.body.contains("ui-compute-1"),
            "{path}"
        );
    }
    let (reader, _) = login(&s.addr, "token=r:p1&roles=reader");
    for page in [
        "/ui/headroom?resources=VCPU:1&group_by=root".to_owned(),
        "/ui/claims".to_owned(),
        format!("/ui/consumers/{CONSUMER}"),
        format!("/ui/consumers/{held}"),
    ] {
        let r = get(&s.addr, &page, &reader);
        assert_eq!(r.status, 200, "{page}: {}", r.body);
        assert!(r.body.contains(RP), "{page}: the uuid, as the API gives it");
        assert!(!r.body.contains("ui-compute-1"), "{page}: {}", r.body);
    }
    // The API lists providers by name to it, and refuses it one provider and the
    // pending claims on providers: the list shows names, no page bar counts a
    // claim, and the overview has no count the API would not give.
    let r = get(&s.addr, "/ui/providers", &reader);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("ui-compute-1"));
    assert!(r.body.contains("data-pending=\"0\"") && !r.body.contains("data-pending=\"4\""));
    let r = get(&s.addr, "/ui", &reader);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains("data-pending=\"4\""), "{}", r.body);
    // It may list claims (so count them), not the allocations against providers.
    assert!(r.body.contains(">pending claims<"), "{}", r.body);
    assert!(!r.body.contains(">consumers<"), "{}", r.body);
    let r = get(&s.addr, &format!("/ui/providers/{RP}"), &reader);
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body.contains("placement:resource_providers:show"));
    // An admin, whom the API shows all of it, is shown all of it.
    let (admin, _) = login(&s.addr, "token=admin");
    let r = get(
        &s.addr,
        "/ui/headroom?resources=VCPU:1&group_by=root",
        &admin,
    );
    assert!(r.body.contains("ui-compute-1"), "{}", r.body);
    let r = get(&s.addr, "/ui/providers", &admin);
    assert!(r.body.contains("data-pending=\"4\""), "{}", r.body);
    let r = get(&s.addr, "/ui", &admin);
    assert!(r.body.contains(">pending claims<") && r.body.contains(">consumers<"));
}
