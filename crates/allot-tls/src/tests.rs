//! Handshakes in memory between the configurations this crate builds, with
//! certificates made at test time: what each [`Check`] accepts and refuses, and what
//! a reload changes; and the material handed to a driver that builds its own
//! configuration (MariaDB's).

use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, ServerConnection};

use crate::testing::TestCa;
use crate::{presented_name, rustls_cause, Check, ClientTls, Identity, Roots, ServerTls, TlsError};

/// Runs a handshake to its end; the certificate the client saw, or the first error.
fn handshake(
    client: &ClientTls,
    server: &Arc<ServerTls>,
    name: &str,
) -> Result<Vec<u8>, rustls::Error> {
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let mut c = ClientConnection::new(Arc::new(client.config().unwrap()), name)?;
    let mut s = ServerConnection::new(Arc::new(server.config(&[b"h2"]).unwrap()))?;
    for _ in 0..10 {
        let mut wire = Vec::new();
        c.write_tls(&mut wire).unwrap();
        s.read_tls(&mut wire.as_slice()).unwrap();
        s.process_new_packets()?;
        wire.clear();
        s.write_tls(&mut wire).unwrap();
        c.read_tls(&mut wire.as_slice()).unwrap();
        c.process_new_packets()?;
        if !c.is_handshaking() && !s.is_handshaking() {
            assert_eq!(c.alpn_protocol(), None, "the client offered no ALPN");
            return Ok(c.peer_certificates().unwrap()[0].to_vec());
        }
    }
    panic!("the handshake did not end");
}

fn client(roots: &std::path::Path, check: Check) -> ClientTls {
    ClientTls {
        roots: Roots::File(roots.to_owned()),
        check,
        identity: None,
    }
}

fn is_bad_certificate(e: &rustls::Error) -> bool {
    matches!(e, rustls::Error::InvalidCertificate(_))
}

#[test]
fn each_check_accepts_and_refuses_what_libpq_would() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let other = TestCa::new(dir.path(), "other");
    let (cert, key) = ca.issue("server", &["localhost", "127.0.0.1"]);
    let server = ServerTls::open(&cert, &key).unwrap();

    // verify-full: the right root and the right name.
    assert!(handshake(&client(&ca.cert(), Check::Full), &server, "localhost").is_ok());
    assert!(handshake(&client(&ca.cert(), Check::Full), &server, "127.0.0.1").is_ok());
    let e = handshake(&client(&ca.cert(), Check::Full), &server, "db.example").unwrap_err();
    assert!(is_bad_certificate(&e), "{e}");
    let e = handshake(&client(&other.cert(), Check::Full), &server, "localhost").unwrap_err();
    assert!(is_bad_certificate(&e), "{e}");
    // verify-ca: the right root, any name.
    assert!(handshake(&client(&ca.cert(), Check::Chain), &server, "db.example").is_ok());
    let e = handshake(&client(&other.cert(), Check::Chain), &server, "localhost").unwrap_err();
    assert!(is_bad_certificate(&e), "{e}");
    // require / insecure: anything.
    assert!(handshake(
        &client(&other.cert(), Check::Nothing),
        &server,
        "db.example"
    )
    .is_ok());
}

#[test]
fn a_reload_shows_the_new_certificate_and_a_bad_file_keeps_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let (cert, key) = ca.issue("server", &["localhost"]);
    let server = ServerTls::open(&cert, &key).unwrap();
    let trusting = client(&ca.cert(), Check::Full);
    let first = handshake(&trusting, &server, "localhost").unwrap();

    // A new certificate in place of the old: the next handshake shows it.
    let (new_cert, new_key) = ca.issue("rotated", &["localhost"]);
    std::fs::rename(&new_cert, &cert).unwrap();
    std::fs::rename(&new_key, &key).unwrap();
    assert_eq!(handshake(&trusting, &server, "localhost").unwrap(), first);
    server.reload().unwrap();
    let second = handshake(&trusting, &server, "localhost").unwrap();
    assert_ne!(second, first);

    // A certificate whose key is not beside it: refused, the old one stays.
    let (stray, _) = ca.issue("stray", &["localhost"]);
    std::fs::copy(&stray, &cert).unwrap();
    let e = server.reload().unwrap_err();
    assert!(e.to_string().contains("not the key of"), "{e}");
    std::fs::write(&key, "half a key").unwrap();
    let e = server.reload().unwrap_err();
    assert!(e.to_string().contains("no PEM private key"), "{e}");
    assert_eq!(handshake(&trusting, &server, "localhost").unwrap(), second);
}

#[test]
fn unusable_files_are_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let (cert, key) = ca.issue("server", &["localhost"]);
    let missing = dir.path().join("missing.pem");
    let e = ServerTls::open(&missing, &key).unwrap_err();
    assert!(
        matches!(&e, TlsError::File { path, .. } if *path == missing),
        "{e}"
    );
    let e = ServerTls::open(&key, &key).unwrap_err();
    assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
    let e = client(&key, Check::Full).config().unwrap_err();
    assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
    // A client certificate and its key load; a key file without a key does not.
    let mut with_identity = client(&ca.cert(), Check::Full);
    with_identity.identity = Some(Identity {
        cert: cert.clone(),
        key: key.clone(),
    });
    assert!(with_identity.config().is_ok());
    with_identity.identity = Some(Identity {
        cert: cert.clone(),
        key: cert,
    });
    let e = with_identity.config().unwrap_err();
    assert!(e.to_string().contains("no PEM private key"), "{e}");
}

#[test]
fn a_drivers_material_is_read_and_checked_here() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let other = TestCa::new(dir.path(), "other");
    // A bundle of two authorities: both, in order.
    let bundle = dir.path().join("bundle.pem");
    let both = [ca.cert(), other.cert()].map(|f| std::fs::read_to_string(f).unwrap());
    std::fs::write(&bundle, both.concat()).unwrap();
    let roots = client(&bundle, Check::Full).root_certificates().unwrap();
    assert_eq!(roots.len(), 2);
    let e = client(&dir.path().join("missing.pem"), Check::Full)
        .root_certificates()
        .unwrap_err();
    assert!(
        matches!(&e, TlsError::File { path, .. } if path.ends_with("missing.pem")),
        "{e}"
    );
    // A client certificate is checked against its key.
    let (cert, key) = ca.issue("client", &["allot"]);
    let (_, stray_key) = ca.issue("stray", &["allot"]);
    assert!(Identity {
        cert: cert.clone(),
        key: key.clone()
    }
    .check()
    .is_ok());
    let e = Identity {
        cert: cert.clone(),
        key: stray_key,
    }
    .check()
    .unwrap_err();
    assert!(e.to_string().contains("not the key of"), "{e}");
    let e = Identity {
        cert: key.clone(),
        key,
    }
    .check()
    .unwrap_err();
    assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
}

#[test]
fn a_handshakes_error_is_found_under_a_drivers() {
    // As tokio-rustls hands it to a driver: inside an io::Error, under the driver's own.
    #[derive(Debug)]
    struct Driver(std::io::Error);
    impl std::fmt::Display for Driver {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("driver")
        }
    }
    impl std::error::Error for Driver {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
    let e = Driver(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        tls.clone(),
    ));
    assert_eq!(rustls_cause(&e), Some(&tls));
    let plain = Driver(std::io::Error::other("refused"));
    assert_eq!(rustls_cause(&plain), None);
}

#[test]
fn certificate_names_are_shown_as_written() {
    assert_eq!(presented_name("DnsName(\"db.example\")"), "db.example");
    assert_eq!(presented_name("IpAddress(10.0.0.5)"), "10.0.0.5");
    assert_eq!(presented_name("something else"), "something else");
}
