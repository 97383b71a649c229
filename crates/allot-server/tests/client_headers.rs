//! The response headers real clients read: the request id under both names (Nova's
//! report client, keystoneauth and openstacksdk read `x-openstack-request-id`), and
//! absolute `Location` headers built from the request's host the way webob builds
//! Placement's, over a real socket so that the fallback to the local address is the
//! one `serve` wires up.

mod support;

use allot_server::router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use support::state;
use tower::ServiceExt;

fn create_provider(name: &str, host: Option<&str>) -> Request<Body> {
    let mut req = Request::post("/resource_providers")
        .header("x-auth-token", "admin")
        .header("content-type", "application/json");
    if let Some(host) = host {
        req = req.header("host", host);
    }
    req.body(Body::from(format!("{{\"name\": \"{name}\"}}")))
        .unwrap()
}

fn request_ids(headers: &axum::http::HeaderMap) -> (String, String) {
    let get = |name: &str| {
        headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    (get("openstack-request-id"), get("x-openstack-request-id"))
}

#[tokio::test]
async fn request_id_under_both_names_on_success_and_error() {
    let (state, _d) = state();
    let app = router(state);

    let ok = app
        .clone()
        .oneshot(create_provider("rp1", Some("placement.example:8778")))
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::CREATED);
    let (ours, oslo) = request_ids(ok.headers());
    assert!(ours.starts_with("req-"), "{ours}");
    assert_eq!(ours, oslo);

    let err = app
        .oneshot(
            Request::get("/resource_providers/nope")
                .header("x-auth-token", "admin")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(err.status(), StatusCode::NOT_FOUND);
    let (ours, oslo) = request_ids(err.headers());
    assert_eq!(ours, oslo);
    let body = http_body_util::BodyExt::collect(err.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["errors"][0]["request_id"], oslo.as_str());
}

#[tokio::test]
async fn location_is_absolute_from_the_host_header() {
    let (state, _d) = state();
    let app = router(state);
    let cases = [
        (
            Some("placement.example:8778"),
            "http://placement.example:8778/",
        ),
        // webob drops the default port.
        (Some("placement.example:80"), "http://placement.example/"),
        (Some("[::1]:8778"), "http://[::1]:8778/"),
        // Hostile or malformed hosts are not echoed: without a socket there is no
        // local address either, so the fallback is `localhost`.
        (Some("evil.example/x?y"), "http://localhost/"),
        (Some("user@evil.example"), "http://localhost/"),
        (Some("a b"), "http://localhost/"),
        (Some("evil\"example"), "http://localhost/"),
        (Some("host:notaport"), "http://localhost/"),
        (Some(""), "http://localhost/"),
        (None, "http://localhost/"),
    ];
    for (i, (host, prefix)) in cases.into_iter().enumerate() {
        let r = app
            .clone()
            .oneshot(create_provider(&format!("rp{i}"), host))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{host:?}");
        let location = r.headers()["location"].to_str().unwrap();
        let rest = location
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{host:?}: {location} does not start with {prefix}"));
        assert!(rest.starts_with("resource_providers/"), "{location}");
    }
}

/// Sends a raw HTTP/1.x request (on a blocking socket, off the runtime's threads) and
/// returns the response head.
async fn raw(addr: std::net::SocketAddr, request: &str) -> String {
    use std::io::{Read, Write};
    let request = request.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        stream.read_to_end(&mut out).unwrap();
        let text = String::from_utf8_lossy(&out).into_owned();
        text.split("\r\n\r\n").next().unwrap_or("").to_owned()
    })
    .await
    .unwrap()
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test]
async fn location_falls_back_to_the_local_address_over_a_socket() {
    let (state, _d) = state();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(allot_server::serve(listener, state, None, async {
        let _ = stopped.await;
    }));

    let body = "{\"name\": \"rp-socket\"}";
    // HTTP/1.0 without a Host header (webob: SERVER_NAME:SERVER_PORT).
    let head = raw(
        addr,
        &format!(
            "POST /resource_providers HTTP/1.0\r\nx-auth-token: admin\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert!(head.starts_with("HTTP/1.0 201"), "{head}");
    let location = header(&head, "location").expect("a location header");
    assert!(
        location.starts_with(&format!("http://{addr}/resource_providers/")),
        "{location}"
    );
    assert!(header(&head, "x-openstack-request-id").is_some(), "{head}");

    // A hostile Host falls back the same way; a good one is used as sent.
    for (host, prefix) in [
        ("evil.example/x?y", format!("http://{addr}/")),
        (
            "placement.example:8778",
            "http://placement.example:8778/".into(),
        ),
    ] {
        let body = format!("{{\"name\": \"rp-{}\"}}", host.len());
        let head = raw(
            addr,
            &format!(
                "POST /resource_providers HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\
                 x-auth-token: admin\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 201"), "{head}");
        let location = header(&head, "location").expect("a location header");
        assert!(location.starts_with(&prefix), "{host}: {location}");
    }

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
