//! `allot serve --tls-cert --tls-key` over real TLS on loopback (issue 27), with
//! certificates made at test time (`allot_tls::testing`): curl over HTTP/1.1 and
//! HTTP/2, `https` links, the metrics listener, a plain-HTTP request on the HTTPS
//! port, settings that stop the start, and a certificate swapped on SIGHUP while a
//! client keeps working.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use allot_tls::testing::TestCa;
use support::{json, Server};

/// A server on SQLite with a certificate for `localhost` and `127.0.0.1`.
struct Https {
    _dir: tempfile::TempDir,
    ca: TestCa,
    cert: PathBuf,
    key: PathBuf,
    server: Server,
}

fn https(extra: &[&str]) -> Https {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let (cert, key) = ca.issue("server", &["localhost", "127.0.0.1"]);
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let mut args = vec![
        "--bind",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let server = Server::start_args(&db, &args, &[]);
    Https {
        _dir: dir,
        ca,
        cert,
        key,
        server,
    }
}

/// `curl ARGS`: (exit status, standard output).
fn curl(args: &[&str]) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl (Debian's curl package) runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The port of `HOST:PORT`.
fn port(addr: &str) -> &str {
    addr.rsplit(':').next().unwrap()
}

#[test]
fn curl_speaks_http1_and_http2_and_links_are_https() {
    let h = https(&[]);
    let ca = h.ca.cert();
    let ca = ca.to_str().unwrap();
    let base = format!("https://localhost:{}", port(&h.server.addr));
    for version in ["--http1.1", "--http2"] {
        let (code, out) = curl(&[
            version,
            "--cacert",
            ca,
            "-H",
            "x-auth-token: admin",
            "-w",
            "\n%{http_version} %{http_code}",
            &format!("{base}/"),
        ]);
        assert_eq!(code, 0, "{out}");
        let (body, status) = out.rsplit_once('\n').unwrap();
        let expected = if version == "--http2" {
            "2 200"
        } else {
            "1.1 200"
        };
        assert_eq!(status, expected, "{out}");
        assert_eq!(json(body)["versions"][0]["max_version"], "1.39");
    }
    // A created provider's Location is https, over either protocol.
    for (version, name) in [("--http1.1", "one"), ("--http2", "two")] {
        let (code, out) = curl(&[
            version,
            "--cacert",
            ca,
            "-i",
            "-H",
            "x-auth-token: admin",
            "-H",
            "openstack-api-version: placement 1.20",
            "-H",
            "content-type: application/json",
            "-d",
            &format!(r#"{{"name": "{name}"}}"#),
            &format!("{base}/resource_providers"),
        ]);
        assert_eq!(code, 0, "{out}");
        let location = out
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("location: ")
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| panic!("no Location: {out}"));
        assert!(
            location
                .trim()
                .starts_with(&format!("{base}/resource_providers/")),
            "{location}"
        );
    }
    // Without the CA, curl refuses the certificate (60: peer certificate cannot be
    // authenticated).
    let (code, out) = curl(&[&format!("{base}/")]);
    assert_eq!(code, 60, "{out}");
}

#[test]
fn plain_http_on_the_https_port_is_told_to_use_https() {
    let h = https(&[]);
    let reply = support::send_raw(&h.server.addr, "GET", "/resource_providers", &[], "");
    assert_eq!(reply.status, 400, "{}", reply.body);
    let (status, detail) = reply.envelope();
    assert_eq!(status, 400);
    assert!(
        detail.contains(&format!("use https://{}/", h.server.addr)),
        "{detail}"
    );
}

#[test]
fn the_metrics_listener_serves_https_too() {
    let h = https(&["--metrics-bind", "127.0.0.1:0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = loop {
        if let Some(url) = h
            .server
            .log()
            .iter()
            .find_map(|l| l.strip_prefix("allot: metrics on ").map(str::to_owned))
        {
            break url;
        }
        assert!(
            Instant::now() < deadline,
            "no metrics line: {:?}",
            h.server.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(url.starts_with("https://"), "{url}");
    let ca = h.ca.cert();
    let (code, out) = curl(&["--cacert", ca.to_str().unwrap(), &url]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("allot_build_info"), "{out}");
}

#[test]
fn tls_settings_that_cannot_work_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let (cert, key) = ca.issue("server", &["localhost"]);
    let (other, _) = ca.issue("other", &["localhost"]);
    let (cert, key, other) = (
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        other.to_str().unwrap(),
    );
    let e = support::refused(&["--tls-cert", cert], &[]);
    assert!(e.contains("no key: add --tls-key"), "{e}");
    let e = support::refused(&["--tls-key", key], &[]);
    assert!(e.contains("no certificate: add --tls-cert"), "{e}");
    let e = support::refused(&["--tls-cert", other, "--tls-key", key], &[]);
    assert!(e.contains("not the key of") && e.contains(other), "{e}");
    let e = support::refused(&["--tls-cert", "/nonexistent.pem", "--tls-key", key], &[]);
    assert!(e.contains("/nonexistent.pem"), "{e}");
}

/// An HTTP/1.1 client over TLS that keeps its connection, on `std` and rustls.
struct Client {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl Client {
    fn connect(addr: &str, ca: &Path) -> std::io::Result<Client> {
        let config = allot_tls::ClientTls {
            roots: allot_tls::Roots::File(ca.to_owned()),
            check: allot_tls::Check::Full,
            identity: None,
        }
        .config()
        .unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn =
            rustls::ClientConnection::new(Arc::new(config), name).map_err(std::io::Error::other)?;
        let tcp = TcpStream::connect(addr)?;
        tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        // Finish the handshake now, so that the certificate can be looked at.
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(Client { stream })
    }

    /// The certificate the server showed (DER).
    fn certificate(&self) -> Vec<u8> {
        self.stream.conn.peer_certificates().unwrap()[0].to_vec()
    }

    /// One GET on the kept connection: the status.
    fn get(&mut self, path: &str) -> std::io::Result<u16> {
        write!(
            self.stream,
            "GET {path} HTTP/1.1\r\nhost: localhost\r\nx-auth-token: admin\r\n\r\n"
        )?;
        self.stream.flush()?;
        let mut reader = BufReader::new(&mut self.stream);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("status line {line:?}")))?;
        let mut length = 0;
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            if line.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        Ok(status)
    }
}

/// The DER of the first certificate of a PEM file.
fn der(pem: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(pem)
        .unwrap()
        .to_vec()
}

#[test]
fn a_certificate_swapped_on_sighup_reaches_new_connections_while_a_client_keeps_working() {
    let h = https(&[]);
    let ca = h.ca.cert();
    let old = der(&h.cert);
    let mut kept = Client::connect(&h.server.addr, &ca).unwrap();
    assert_eq!(kept.certificate(), old);
    assert_eq!(kept.get("/").unwrap(), 200);

    // Two clients work throughout: one on its kept connection, one on a new
    // connection for every request.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = [true, false]
        .into_iter()
        .map(|keep| {
            let (stop, done, addr, ca) = (
                stop.clone(),
                done.clone(),
                h.server.addr.clone(),
                ca.clone(),
            );
            let mut kept = keep.then(|| Client::connect(&addr, &ca).unwrap());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let status = match &mut kept {
                        Some(client) => client.get("/resource_providers"),
                        None => Client::connect(&addr, &ca).and_then(|mut c| c.get("/")),
                    };
                    assert_eq!(status.expect("a request failed during the swap"), 200);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    // The new pair replaces the old files (as certbot or cert-manager does), then
    // SIGHUP.
    let (new_cert, new_key) = h.ca.issue("rotated", &["localhost", "127.0.0.1"]);
    let new = der(&new_cert);
    assert_ne!(new, old);
    std::fs::rename(&new_key, &h.key).unwrap();
    std::fs::rename(&new_cert, &h.cert).unwrap();
    h.server.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = Client::connect(&h.server.addr, &ca).unwrap().certificate();
        if seen == new {
            break;
        }
        assert_eq!(seen, old, "neither certificate");
        assert!(Instant::now() < deadline, "the new certificate never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = done.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("a client failed");
    }
    assert!(
        done.load(Ordering::Relaxed) > before,
        "the clients did not go on after the swap"
    );
    // The connection made before the swap still works, on its old certificate.
    assert_eq!(kept.get("/").unwrap(), 200);
    assert_eq!(kept.certificate(), old);

    // A bad pair on SIGHUP: the log says so, and the certificate in use stays.
    std::fs::write(&h.key, "not a key").unwrap();
    h.server.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !h
        .server
        .log()
        .iter()
        .any(|l| l.contains("certificate not reloaded, the old one stays"))
    {
        assert!(
            Instant::now() < deadline,
            "no error logged: {:?}",
            h.server.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut after = Client::connect(&h.server.addr, &ca).unwrap();
    assert_eq!(after.certificate(), new);
    assert_eq!(after.get("/").unwrap(), 200);
}

/// A Keystone whose certificate allot cannot verify, found at run time (at start the
/// stand-in closed the connection, as a Keystone still starting might): every request
/// is a 503 whose detail and log line name the certificate's problem, never a retry
/// in plain text.
#[test]
fn a_keystone_certificate_that_does_not_verify_is_a_503_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let trusted = TestCa::new(dir.path(), "trusted");
    let stranger = TestCa::new(dir.path(), "stranger");
    let (cert, key) = stranger.issue("keystone", &["127.0.0.1"]);
    let tls = allot_tls::ServerTls::open(&cert, &key).unwrap();
    let config = Arc::new(tls.config(&[]).unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/v3", listener.local_addr().unwrap());
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counted = handshakes.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            // The first connection (allot's check at start) is closed at once.
            if n == 0 {
                continue;
            }
            counted.fetch_add(1, Ordering::SeqCst);
            let mut conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let _ = conn.complete_io(&mut stream);
        }
    });
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let ca = trusted.cert();
    let server = Server::start_args(
        &db,
        &[
            "--bind",
            "127.0.0.1:0",
            "--auth",
            "keystone",
            "--keystone-url",
            &url,
            "--keystone-cafile",
            ca.to_str().unwrap(),
        ],
        &[("ALLOT_KEYSTONE_PASSWORD", "p")],
    );
    let reply = support::send_raw(
        &server.addr,
        "GET",
        "/resource_providers",
        &[("x-auth-token", b"some-token")],
        "",
    );
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(reply.header("retry-after").is_some());
    let (_, detail) = reply.envelope();
    assert!(detail.contains("UnknownIssuer"), "{detail}");
    assert!(
        handshakes.load(Ordering::SeqCst) > 0,
        "no TLS handshake was tried"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server
        .log()
        .iter()
        .any(|l| l.contains("identity service unavailable") && l.contains("UnknownIssuer"))
    {
        assert!(
            Instant::now() < deadline,
            "no reason logged: {:?}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
