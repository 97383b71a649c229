//! The reading of libpq's TLS settings, without a server: every `sslmode`, the roots
//! and their defaults, the variables, the URL split. The same settings over real TLS
//! are `tests/tls.rs`.

use super::*;
use std::collections::HashMap;
use std::str::FromStr;

/// An environment of these variables only, with `HOME` an empty folder unless
/// given (so that no file of the machine's own `~/.postgresql` counts).
struct Env {
    vars: HashMap<String, String>,
    _home: tempfile::TempDir,
}

impl Env {
    fn new(vars: &[(&str, &str)]) -> Env {
        let home = tempfile::tempdir().unwrap();
        let mut map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        map.entry("HOME".into())
            .or_insert_with(|| home.path().to_str().unwrap().to_owned());
        Env {
            vars: map,
            _home: home,
        }
    }

    fn home(&self) -> PathBuf {
        PathBuf::from(&self.vars["HOME"])
    }

    fn read(&self, params: &[(&str, &str)]) -> Result<PgTls, String> {
        PgTls::from_params(params.iter().copied(), &|name| self.vars.get(name).cloned())
    }
}

fn check(tls: &PgTls) -> Option<Check> {
    tls.client.as_ref().map(|c| c.check)
}

fn roots(tls: &PgTls) -> Option<Roots> {
    tls.client.as_ref().map(|c| c.roots.clone())
}

#[test]
fn every_sslmode_without_a_root_file() {
    let env = Env::new(&[]);
    let read = |mode: &str| env.read(&[("sslmode", mode)]);
    assert_eq!(read("disable").unwrap().client, None);
    for mode in ["allow", "prefer", "require"] {
        let tls = read(mode).unwrap();
        assert_eq!(tls.mode.as_str(), mode);
        assert_eq!(check(&tls), Some(Check::Nothing), "{mode}");
        assert_eq!(tls.client.unwrap().identity, None);
    }
    // Nothing given: libpq's default, prefer.
    let tls = env.read(&[]).unwrap();
    assert_eq!(
        (tls.mode, check(&tls)),
        (SslMode::Prefer, Some(Check::Nothing))
    );
    // The modes that verify need roots, and say where they looked.
    for mode in ["verify-ca", "verify-full"] {
        let e = read(mode).unwrap_err();
        assert!(e.contains(&format!("sslmode={mode}")), "{e}");
        assert!(e.contains("sslrootcert"), "{e}");
        assert!(e.contains(".postgresql/root.crt"), "{e}");
        assert!(e.contains("does not exist"), "{e}");
    }
}

#[test]
fn a_root_file_decides_what_is_checked() {
    let env = Env::new(&[]);
    let root = ("sslrootcert", "/etc/allot/db-ca.pem");
    let file = Some(Roots::File("/etc/allot/db-ca.pem".into()));
    for (mode, expected) in [
        ("verify-full", Check::Full),
        ("verify-ca", Check::Chain),
        // libpq: with a root file, require (and the weaker modes) check the chain.
        ("require", Check::Chain),
        ("prefer", Check::Chain),
        ("allow", Check::Chain),
    ] {
        let tls = env.read(&[("sslmode", mode), root]).unwrap();
        assert_eq!(check(&tls), Some(expected), "{mode}");
        assert_eq!(roots(&tls), file, "{mode}");
    }
    assert_eq!(
        env.read(&[("sslmode", "disable"), root]).unwrap().client,
        None
    );
}

#[test]
fn the_default_root_file_counts_when_it_is_there() {
    let env = Env::new(&[]);
    let dir = env.home().join(".postgresql");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("root.crt"), "").unwrap();
    let default = Some(Roots::File(dir.join("root.crt")));
    let tls = env.read(&[("sslmode", "verify-ca")]).unwrap();
    assert_eq!(
        (check(&tls), roots(&tls)),
        (Some(Check::Chain), default.clone())
    );
    let tls = env.read(&[("sslmode", "require")]).unwrap();
    assert_eq!((check(&tls), roots(&tls)), (Some(Check::Chain), default));
}

#[test]
fn sslrootcert_system_means_verify_full() {
    let env = Env::new(&[]);
    let system = ("sslrootcert", "system");
    let tls = env.read(&[system]).unwrap();
    assert_eq!(tls.mode, SslMode::VerifyFull);
    assert_eq!(
        (check(&tls), roots(&tls)),
        (Some(Check::Full), Some(Roots::System))
    );
    let tls = env.read(&[("sslmode", "verify-full"), system]).unwrap();
    assert_eq!(roots(&tls), Some(Roots::System));
    for weaker in ["verify-ca", "require", "prefer", "allow"] {
        let e = env.read(&[("sslmode", weaker), system]).unwrap_err();
        assert!(e.contains("needs sslmode=verify-full"), "{weaker}: {e}");
    }
    // disable turns TLS off whatever the roots.
    assert_eq!(
        env.read(&[("sslmode", "disable"), system]).unwrap().client,
        None
    );
}

#[test]
fn bad_values_and_unsupported_keys_are_named() {
    let env = Env::new(&[]);
    for bad in ["verify", "VERIFY-FULL", "", "true"] {
        let e = env.read(&[("sslmode", bad)]).unwrap_err();
        assert!(e.contains(&format!("invalid sslmode {bad:?}")), "{e}");
        assert!(e.contains("verify-ca or verify-full"), "{e}");
    }
    let e = env.read(&[("sslnegotiation", "fast")]).unwrap_err();
    assert!(e.contains("invalid sslnegotiation \"fast\""), "{e}");
    for key in [
        "sslcrl",
        "sslpassword",
        "ssl_min_protocol_version",
        "requiressl",
    ] {
        let e = env.read(&[(key, "1")]).unwrap_err();
        assert!(
            e.contains(&format!("libpq setting {key} is not supported")),
            "{e}"
        );
    }
    // Ignored by libpq too; other arguments are not this module's business.
    let tls = env
        .read(&[
            ("sslcompression", "1"),
            ("application_name", "x"),
            ("host", "/run"),
        ])
        .unwrap();
    assert_eq!(tls.mode, SslMode::Prefer);
}

#[test]
fn libpq_variables_fill_what_the_url_does_not_say() {
    let env = Env::new(&[
        ("PGSSLMODE", "verify-ca"),
        ("PGSSLROOTCERT", "/env/ca.pem"),
        ("PGSSLNEGOTIATION", "direct"),
    ]);
    let tls = env.read(&[]).unwrap();
    assert_eq!(tls.mode, SslMode::VerifyCa);
    assert_eq!(roots(&tls), Some(Roots::File("/env/ca.pem".into())));
    assert!(tls.direct);
    // The URL wins.
    let tls = env
        .read(&[("sslmode", "verify-full"), ("sslrootcert", "/url/ca.pem")])
        .unwrap();
    assert_eq!(tls.mode, SslMode::VerifyFull);
    assert_eq!(roots(&tls), Some(Roots::File("/url/ca.pem".into())));
    let e = Env::new(&[("PGSSLMODE", "on")]).read(&[]).unwrap_err();
    assert!(e.contains("invalid sslmode \"on\""), "{e}");
}

#[test]
fn client_certificates() {
    let env = Env::new(&[]);
    let tls = env
        .read(&[
            ("sslmode", "require"),
            ("sslcert", "/c.pem"),
            ("sslkey", "/c.key"),
        ])
        .unwrap();
    let identity = tls.client.unwrap().identity.unwrap();
    assert_eq!(
        (identity.cert, identity.key),
        ("/c.pem".into(), "/c.key".into())
    );
    // The key defaults to libpq's file.
    let tls = env.read(&[("sslcert", "/c.pem")]).unwrap();
    assert_eq!(
        tls.client.unwrap().identity.unwrap().key,
        env.home().join(".postgresql/postgresql.key")
    );
    let e = env.read(&[("sslkey", "/c.key")]).unwrap_err();
    assert!(e.contains("sslkey without sslcert"), "{e}");
    // libpq's default certificate, when it is there.
    assert_eq!(env.read(&[]).unwrap().client.unwrap().identity, None);
    let dir = env.home().join(".postgresql");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("postgresql.crt"), "").unwrap();
    let identity = env.read(&[]).unwrap().client.unwrap().identity.unwrap();
    assert_eq!(identity.cert, dir.join("postgresql.crt"));
    assert_eq!(identity.key, dir.join("postgresql.key"));
}

#[test]
fn the_url_is_split_into_the_drivers_part_and_the_tls_settings() {
    let env = Env::new(&[]);
    let split = |url: &str| split_url(url, &|name| env.vars.get(name).cloned());
    let (rest, tls) = split(
        "postgres://me:p%3Fss@db.example:5433/allot?application_name=x&sslmode=verify-full\
         &sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem&connect_timeout=3",
    )
    .unwrap();
    assert_eq!(
        rest,
        "postgres://me:p%3Fss@db.example:5433/allot?application_name=x&connect_timeout=3"
    );
    assert_eq!(tls.mode, SslMode::VerifyFull);
    assert_eq!(roots(&tls), Some(Roots::File("/etc/ca dir/ca.pem".into())));
    // What is left is the driver's to read.
    let config = Config::from_str(&rest).unwrap();
    assert_eq!(config.get_password(), Some(&b"p?ss"[..]));
    assert_eq!(config.get_application_name(), Some("x"));
    // Only TLS arguments: no `?` left; none: the URL as it was.
    let (rest, tls) = split("postgresql://db/allot?sslmode=require").unwrap();
    assert_eq!(
        (rest.as_str(), tls.mode),
        ("postgresql://db/allot", SslMode::Require)
    );
    let (rest, tls) = split("postgres://u@db/allot").unwrap();
    assert_eq!(
        (rest.as_str(), tls.mode),
        ("postgres://u@db/allot", SslMode::Prefer)
    );
    // A `?` in the password is not the query (tokio-postgres reads it so too).
    let (rest, tls) = split("postgres://u:a?b@db/allot?sslmode=disable").unwrap();
    assert_eq!(
        (rest.as_str(), tls.mode),
        ("postgres://u:a?b@db/allot", SslMode::Disable)
    );
    let e = split("postgres://db/allot?sslmode=verify-ca").unwrap_err();
    assert!(e.contains("sslrootcert"), "{e}");
}

#[test]
fn the_driver_is_told_whether_to_ask_for_tls() {
    let env = Env::new(&[]);
    let root = ("sslrootcert", "/ca.pem");
    for (mode, driver) in [
        ("disable", DriverMode::Disable),
        ("allow", DriverMode::Prefer),
        ("prefer", DriverMode::Prefer),
        ("require", DriverMode::Require),
        ("verify-ca", DriverMode::Require),
        ("verify-full", DriverMode::Require),
    ] {
        let tls = env.read(&[("sslmode", mode), root]).unwrap();
        let mut config = Config::from_str("postgres://db/allot").unwrap();
        tls.apply(&mut config);
        assert_eq!(config.get_ssl_mode(), driver, "{mode}");
        // Over a Unix socket, never (libpq ignores sslmode there).
        let mut socket = Config::new();
        socket.host("/run/postgresql");
        tls.apply(&mut socket);
        assert_eq!(socket.get_ssl_mode(), DriverMode::Disable, "{mode}");
    }
}

#[test]
fn a_missing_file_is_named_by_its_argument() {
    let env = Env::new(&[]);
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere.pem");
    let missing = missing.to_str().unwrap();
    for (args, argument) in [
        (
            vec![("sslmode", "verify-full"), ("sslrootcert", missing)],
            "sslrootcert",
        ),
        (
            vec![
                ("sslmode", "require"),
                ("sslcert", missing),
                ("sslkey", missing),
            ],
            "sslcert",
        ),
    ] {
        let e = env.read(&args).unwrap().connector().err().unwrap();
        assert!(e.starts_with(&format!("{argument} {missing}: ")), "{e}");
    }
    // Under disable nothing is read.
    assert!(env
        .read(&[("sslmode", "disable"), ("sslrootcert", missing)])
        .unwrap()
        .connector()
        .is_ok());
}
