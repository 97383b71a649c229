//! The reading of a MariaDB URL's TLS arguments, without a server: what each asks
//! for and checks, what is refused and why, the driver's options made from them, and
//! the words of an error. The same settings over real TLS are `tests/tls.rs`.

use super::*;
use allot_tls::rustls::CertificateError;
use allot_tls::testing::TestCa;

fn read(params: &[(&str, &str)]) -> Result<MyTls, String> {
    MyTls::from_params(params.iter().copied(), false)
}

fn check(params: &[(&str, &str)]) -> Option<Check> {
    read(params).unwrap().client.map(|c| c.check)
}

fn refused(params: &[(&str, &str)]) -> String {
    read(params).unwrap_err()
}

#[test]
fn nothing_asked_is_no_tls() {
    assert_eq!(read(&[]).unwrap().client, None);
    // The Python driver's other arguments are passed over.
    assert_eq!(read(&[("charset", "utf8")]).unwrap().client, None);
    for off in [
        ("ssl_disabled", "true"),
        ("ssl_disabled", "false"),
        ("ssl", "false"),
        ("ssl_mode", "disabled"),
    ] {
        assert_eq!(read(&[off]).unwrap().client, None, "{off:?}");
    }
}

#[test]
fn asked_for_everything_is_checked_unless_turned_off() {
    let tls = read(&[("ssl_ca", "/etc/placement/ca.pem")]).unwrap();
    let client = tls.client.unwrap();
    assert_eq!(client.check, Check::Full);
    assert_eq!(client.roots, Roots::File("/etc/placement/ca.pem".into()));
    assert_eq!(client.identity, None);
    // Without a CA: the system's roots, still everything checked.
    for asking in [
        ("ssl_verify_cert", "true"),
        ("ssl_verify_identity", "True"),
        ("ssl", "1"),
        ("ssl_mode", "VERIFY_IDENTITY"),
    ] {
        let client = read(&[asking]).unwrap().client.unwrap();
        assert_eq!(
            (client.check, client.roots),
            (Check::Full, Roots::System),
            "{asking:?}"
        );
    }
    // The name's check off: the chain only.
    for chain in [
        &[("ssl_ca", "/ca.pem"), ("ssl_verify_identity", "false")][..],
        &[("ssl_ca", "/ca.pem"), ("ssl_check_hostname", "False")],
        &[("ssl_mode", "verify_ca")],
        &[("ssl_mode", "REQUIRED"), ("ssl_ca", "/ca.pem")],
        &[("ssl_mode", "REQUIRED"), ("ssl_verify_cert", "true")],
    ] {
        assert_eq!(check(chain), Some(Check::Chain), "{chain:?}");
    }
    // Nothing checked, encrypted all the same.
    for nothing in [
        &[("ssl_verify_cert", "false")][..],
        &[("ssl_verify_cert", "no"), ("ssl_ca", "/ca.pem")],
        &[("ssl_verify_cert", "0"), ("ssl_verify_identity", "off")],
        &[("ssl_mode", "REQUIRED")],
    ] {
        assert_eq!(check(nothing), Some(Check::Nothing), "{nothing:?}");
    }
    // The last of an argument given twice wins.
    assert_eq!(
        check(&[("ssl_verify_cert", "false"), ("ssl_verify_cert", "true")]),
        Some(Check::Full)
    );
}

#[test]
fn a_client_certificate_and_its_key() {
    let identity = |params: &[(&str, &str)]| read(params).unwrap().client.unwrap().identity;
    assert_eq!(
        identity(&[("ssl_cert", "/c.pem"), ("ssl_key", "/c.key")]),
        Some(Identity {
            cert: "/c.pem".into(),
            key: "/c.key".into()
        })
    );
    // Python's ssl: no key named, the key is in the certificate's file.
    assert_eq!(
        identity(&[("ssl_cert", "/both.pem")]),
        Some(Identity {
            cert: "/both.pem".into(),
            key: "/both.pem".into()
        })
    );
    assert!(refused(&[("ssl_key", "/c.key")]).contains("ssl_key without ssl_cert"));
}

#[test]
fn what_cannot_be_honoured_is_refused_by_name() {
    for (params, why) in [
        (
            &[("ssl_capath", "/etc/ssl/certs")][..],
            "ssl_capath is not supported",
        ),
        (
            &[("ssl_key_password", "x")],
            "ssl_key_password is not supported",
        ),
        (&[("ssl_cipher", "HIGH")], "ssl_cipher is not supported"),
        (
            &[("ssl_mode", "PREFERRED")],
            "ssl_mode=PREFERRED is not supported",
        ),
        (&[("ssl_mode", "verify")], "invalid ssl_mode \"verify\""),
        (
            &[("tls", "true")],
            "the TLS argument tls is not one allot reads",
        ),
        (&[("sslmode", "require")], "the TLS argument sslmode is not"),
        (
            &[("ssl_verify_cert", "maybe")],
            "invalid ssl_verify_cert \"maybe\"",
        ),
        (&[("ssl_verify_cert", "")], "invalid ssl_verify_cert \"\""),
        (&[("ssl_ca", "")], "ssl_ca is empty"),
        // Contradictions.
        (
            &[("ssl_disabled", "true"), ("ssl_ca", "/ca.pem")],
            "ssl_disabled=true turns TLS off and ssl_ca asks for it",
        ),
        (
            &[("ssl", "false"), ("ssl_verify_cert", "true")],
            "ssl=false turns TLS off and ssl_verify_cert asks for it",
        ),
        (
            &[("ssl_mode", "VERIFY_CA"), ("ssl_verify_cert", "false")],
            "ssl_verify_cert=false turns off a check that ssl_mode=VERIFY_CA makes",
        ),
        (
            &[
                ("ssl_mode", "VERIFY_IDENTITY"),
                ("ssl_check_hostname", "false"),
            ],
            "ssl_check_hostname=false turns off a check that ssl_mode=VERIFY_IDENTITY",
        ),
        (
            &[
                ("ssl_verify_cert", "false"),
                ("ssl_verify_identity", "true"),
            ],
            "ssl_verify_identity=true checks the name on a certificate whose chain",
        ),
    ] {
        let e = refused(params);
        assert!(e.contains(why), "{params:?}: {e}");
    }
}

#[test]
fn no_tls_over_a_unix_socket() {
    let e = MyTls::from_params([("ssl_verify_cert", "true")], true).unwrap_err();
    assert!(
        e.starts_with("ssl_verify_cert asks for TLS over a Unix socket"),
        "{e}"
    );
    // Nothing asked (or TLS turned off): the socket as before.
    assert_eq!(MyTls::from_params([], true).unwrap().client, None);
    assert_eq!(
        MyTls::from_params([("ssl_disabled", "true")], true)
            .unwrap()
            .client,
        None
    );
}

#[test]
fn the_drivers_options_carry_allot_tls_material() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "ca");
    let (cert, key) = ca.issue("client", &["allot"]);
    let (_, stray) = ca.issue("stray", &["allot"]);
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let opts = |params: &[(&str, &str)]| read(params).unwrap().ssl_opts();
    assert_eq!(opts(&[]).unwrap(), None);
    let ssl = opts(&[("ssl_ca", &path(&ca.cert()))]).unwrap().unwrap();
    // The CA's certificate, never the driver's built-in roots; both checks.
    assert_eq!(ssl.root_certs().len(), 1);
    assert!(ssl.disable_built_in_roots());
    assert!(!ssl.accept_invalid_certs() && !ssl.skip_domain_validation());
    let ssl = opts(&[
        ("ssl_ca", &path(&ca.cert())),
        ("ssl_verify_identity", "false"),
    ])
    .unwrap()
    .unwrap();
    assert!(!ssl.accept_invalid_certs() && ssl.skip_domain_validation());
    let ssl = opts(&[("ssl_verify_cert", "false")]).unwrap().unwrap();
    assert!(ssl.accept_invalid_certs());
    let ssl = opts(&[
        ("ssl_ca", &path(&ca.cert())),
        ("ssl_cert", &path(&cert)),
        ("ssl_key", &path(&key)),
    ])
    .unwrap()
    .unwrap();
    assert!(ssl.client_identity().is_some());
    // A file at fault is named with its argument.
    let missing = dir.path().join("missing.pem");
    for (params, argument) in [
        (vec![("ssl_ca", path(&missing))], "ssl_ca"),
        (
            vec![
                ("ssl_verify_cert", "false".into()),
                ("ssl_cert", path(&missing)),
                ("ssl_key", path(&key)),
            ],
            "ssl_cert",
        ),
        (
            vec![
                ("ssl_verify_cert", "false".into()),
                ("ssl_cert", path(&cert)),
                ("ssl_key", path(&stray)),
            ],
            "ssl_key",
        ),
    ] {
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let e = opts(&params).unwrap_err();
        assert!(e.starts_with(&format!("{argument} ")), "{params:?}: {e}");
    }
}

/// A driver error with a rustls error under it, as a failed handshake gives one.
fn handshake_error(e: rustls::Error) -> mysql_async::Error {
    let io = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    mysql_async::Error::Io(mysql_async::IoError::Io(io))
}

#[test]
fn errors_are_explained_in_the_urls_terms() {
    let with_ca = read(&[("ssl_ca", "/etc/placement/ca.pem")]).unwrap();
    let unknown = handshake_error(CertificateError::UnknownIssuer.into());
    assert_eq!(
        with_ca.explain(&unknown).unwrap(),
        "TLS: the server's certificate is not signed by a certificate authority of ssl_ca \
         /etc/placement/ca.pem"
    );
    let system = read(&[("ssl", "true")]).unwrap();
    assert!(system
        .explain(&unknown)
        .unwrap()
        .ends_with("any of the system's certificate authorities (no ssl_ca given)"));
    let no_tls = mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer);
    assert!(with_ca
        .explain(&no_tls)
        .unwrap()
        .starts_with("TLS: the server does not offer TLS"));
    // Without TLS asked for, nothing is TLS's fault.
    assert_eq!(read(&[]).unwrap().explain(&no_tls), None);
    let other = mysql_async::Error::Driver(DriverError::ConnectionClosed);
    assert_eq!(with_ca.explain(&other), None);
    // A name the certificate does not have, under each check that looks at it.
    let mismatch = handshake_error(
        CertificateError::NotValidForNameContext {
            expected: rustls::pki_types::ServerName::try_from("db.example")
                .unwrap()
                .to_owned(),
            presented: vec![
                "DnsName(\"db1.example\")".into(),
                "IpAddress(10.0.0.5)".into(),
            ],
        }
        .into(),
    );
    let e = with_ca.explain(&mismatch).unwrap();
    assert!(
        e.starts_with(
            "TLS: the server's certificate is not for the host name db.example (it names \
             db1.example, 10.0.0.5); the name is checked"
        ),
        "{e}"
    );
    let chain = read(&[("ssl_ca", "/ca.pem"), ("ssl_verify_identity", "false")]).unwrap();
    let e = chain.explain(&mismatch).unwrap();
    assert!(
        e.contains("mysql_async 0.37.1) checks it all the same"),
        "{e}"
    );
}
