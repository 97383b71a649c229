//! A Placement database's URL, as `[placement_database] connection` in
//! `placement.conf` writes it (SQLAlchemy's form, or the plain one), read once for
//! both drivers: the dialect, where to connect, the credentials (the password never
//! shown), and the TLS settings: PostgreSQL's as libpq reads them
//! (`allot_store::pg_tls`), MariaDB's as PyMySQL's arguments ask (`ssl_ca`,
//! `ssl_verify_cert`, ...: `allot_store::my_tls`), the readings allot's own engines
//! use.

use std::time::Duration;

use allot_store::my_tls::{self, MyTls};
use allot_store::pg_tls::{self, PgTls};
use anyhow::anyhow;

/// How long a connection may take before the host is called unreachable, unless
/// `--connect-timeout` says otherwise: a database on the same network answers in
/// well under a second, and an operator should not wait minutes for a typo'd host.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which database a Placement URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// MariaDB or MySQL.
    MySql,
    /// PostgreSQL.
    Postgres,
}

/// A Placement database, as `[placement_database] connection` names it.
#[derive(Debug, Clone)]
pub struct PlacementUrl {
    pub(crate) dialect: Dialect,
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
    /// A Unix socket (MySQL: `?unix_socket=`; PostgreSQL: `?host=/dir`).
    pub(crate) socket: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) database: String,
    /// The URL with the password hidden, for messages.
    shown: String,
    /// How long connecting (TCP, handshake, authentication) may take.
    pub(crate) connect_timeout: Duration,
    /// PostgreSQL's TLS settings, as libpq reads them (`None` for MySQL).
    pub(crate) tls: Option<PgTls>,
    /// MariaDB's TLS settings (`None` for PostgreSQL).
    pub(crate) my_tls: Option<MyTls>,
}

impl std::fmt::Display for PlacementUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PlacementUrl {
    /// Reads a URL in SQLAlchemy's form (`mysql+pymysql://user:pass@host:port/db?charset=utf8`,
    /// `postgresql+psycopg2://...`) or the plain one (`mysql://`, `postgres://`,
    /// `postgresql://`). As in SQLAlchemy, the password runs from the first `:` of
    /// the credentials to the `@`, so it may hold `/`, `?`, `#` and `:` unescaped
    /// (and anything percent-escaped). Query arguments other than the socket and the
    /// TLS settings (libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`:
    /// `allot_store::pg_tls`; PyMySQL's `ssl_ca`, `ssl_cert`, `ssl_key`,
    /// `ssl_verify_cert`, `ssl_verify_identity`, ...: `allot_store::my_tls`) are the
    /// Python driver's (charset, plugins) and are ignored; a TLS argument that cannot
    /// be honoured is refused by name, never dropped. No message shows the password.
    pub fn parse(text: &str) -> anyhow::Result<PlacementUrl> {
        let (rest, password) = allot_store::split_password(text);
        let shown = hide(text);
        let bad = |why: &str| anyhow!("bad Placement database URL {shown:?}: {why}");
        let url = url::Url::parse(&rest).map_err(|e| bad(&e.to_string()))?;
        let scheme = url.scheme();
        let base = scheme.split('+').next().unwrap_or(scheme);
        let dialect = match base {
            "mysql" | "mariadb" => Dialect::MySql,
            "postgresql" | "postgres" => Dialect::Postgres,
            _ => {
                return Err(bad(&format!(
                    "scheme {scheme:?} is neither MySQL/MariaDB (mysql://, mysql+pymysql://) \
                     nor PostgreSQL (postgresql://, postgresql+psycopg2://, postgres://)"
                )))
            }
        };
        let decode =
            |s: &str| percent_decode(s).ok_or_else(|| bad("a percent-escape in it is not UTF-8"));
        let database = decode(url.path().trim_start_matches('/'))?;
        if database.is_empty() || database.contains('/') {
            return Err(bad("it names no database (…/placement at its end)"));
        }
        let mut socket = None;
        let mut tls_args = Vec::new();
        for (key, value) in url.query_pairs() {
            match (dialect, key.as_ref()) {
                (Dialect::MySql, "unix_socket") | (Dialect::Postgres, "host") => {
                    socket = Some(value.into_owned())
                }
                // libpq's, read (and checked) below, all together.
                (Dialect::Postgres, key) => tls_args.push((key.to_owned(), value.into_owned())),
                // PyMySQL's, the same way.
                (Dialect::MySql, key) if my_tls::is_tls_key(key) => {
                    tls_args.push((key.to_owned(), value.into_owned()))
                }
                _ => {}
            }
        }
        let args = || tls_args.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let (tls, my_tls) = match dialect {
            Dialect::MySql => (
                None,
                Some(MyTls::from_params(args(), socket.is_some()).map_err(|why| bad(&why))?),
            ),
            Dialect::Postgres => (
                Some(PgTls::from_params(args(), &pg_tls::process_env).map_err(|why| bad(&why))?),
                None,
            ),
        };
        let host = url.host_str().unwrap_or("").to_owned();
        if host.is_empty() && socket.is_none() {
            return Err(bad("it names no host"));
        }
        let user = Some(decode(url.username())?).filter(|u| !u.is_empty());
        let password = password.as_deref().map(decode).transpose()?;
        Ok(PlacementUrl {
            dialect,
            host,
            port: url.port(),
            socket,
            user,
            password,
            database,
            shown,
            connect_timeout: CONNECT_TIMEOUT,
            tls,
            my_tls,
        })
    }

    /// The same database, connected to with another timeout.
    pub fn with_connect_timeout(self, connect_timeout: Duration) -> PlacementUrl {
        PlacementUrl {
            connect_timeout,
            ..self
        }
    }
}

/// The URL with its password replaced by `***` (`allot_store::redacted`, which reads
/// the credentials as `allot_store::split_password` does), whether or not the rest parses.
fn hide(text: &str) -> String {
    allot_store::redacted(text)
}

/// A percent-escaped part of a URL, decoded ('+' stays '+': a user name may hold it).
fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_placement_conf_writes_them() {
        let u = PlacementUrl::parse(
            "mysql+pymysql://placement:s%40cret@db.example:3307/placement?charset=utf8",
        )
        .unwrap();
        assert_eq!(u.dialect, Dialect::MySql);
        assert_eq!(u.host, "db.example");
        assert_eq!(u.port, Some(3307));
        assert_eq!(u.user.as_deref(), Some("placement"));
        assert_eq!(u.password.as_deref(), Some("s@cret"));
        assert_eq!(u.database, "placement");
        assert!(!u.to_string().contains("cret"), "{u}");
        let u = PlacementUrl::parse("mysql://root@localhost/placement?unix_socket=/tmp/my.sock")
            .unwrap();
        assert_eq!(u.socket.as_deref(), Some("/tmp/my.sock"));
        for pg in [
            "postgresql+psycopg2://p:x@h/placement",
            "postgres://p@h:5433/placement",
            "postgresql://p@localhost/placement?host=/run/pg",
        ] {
            assert_eq!(
                PlacementUrl::parse(pg).unwrap().dialect,
                Dialect::Postgres,
                "{pg}"
            );
        }
    }

    #[test]
    fn a_password_may_hold_what_sqlalchemy_lets_it() {
        // SQLAlchemy reads the password up to the `@`: `/`, `?`, `#` and `:` need no
        // escape there.
        for (url, password) in [
            (
                "mysql+pymysql://placement:pa#s/s?w:d@db/placement",
                "pa#s/s?w:d",
            ),
            ("postgresql://p:a%40b@db:5432/placement", "a@b"),
        ] {
            let u = PlacementUrl::parse(url).unwrap();
            assert_eq!(u.password.as_deref(), Some(password), "{url}");
            assert_eq!(u.host, "db");
            assert_eq!(u.database, "placement");
            assert!(!u.to_string().contains(password), "{u}");
            assert!(u.to_string().contains(":***@db"), "{u}");
        }
    }

    #[test]
    fn mysql_tls_is_read_as_the_store_reads_it() {
        use allot_tls::{Check, Roots};
        let tls = |url: &str| PlacementUrl::parse(url).map(|u| u.my_tls.unwrap());
        // The store's reading (allot_store::my_tls, tested there in full): what is
        // trusted and checked.
        let client = tls("mysql+pymysql://u:secret@db/placement?charset=utf8\
                          &ssl_ca=/etc/placement/ca.pem&ssl_verify_cert=true")
        .unwrap()
        .client
        .unwrap();
        assert_eq!(client.check, Check::Full);
        assert_eq!(client.roots, Roots::File("/etc/placement/ca.pem".into()));
        let t = tls("mysql+pymysql://u@db/placement?ssl_verify_cert=false").unwrap();
        assert_eq!(t.client.unwrap().check, Check::Nothing);
        assert_eq!(
            tls("mysql+pymysql://u@db/placement?charset=utf8")
                .unwrap()
                .client,
            None
        );
        // What cannot be honoured is refused rather than dropped, the password hidden.
        for (url, why) in [
            (
                "mysql://u:secret@db/placement?tls=true",
                "the TLS argument tls is not one allot reads",
            ),
            (
                "mysql+pymysql://u:secret@db/placement?ssl_capath=/etc/ssl/certs",
                "ssl_capath is not supported",
            ),
            (
                "mysql://u:secret@localhost/placement?unix_socket=/run/my.sock&ssl_ca=/ca.pem",
                "over a Unix socket",
            ),
        ] {
            let e = PlacementUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }

    #[test]
    fn postgres_tls_is_read_as_libpq_reads_it() {
        use allot_store::pg_tls::SslMode;
        use allot_tls::{Check, Roots};
        let tls = |url: &str| PlacementUrl::parse(url).map(|u| u.tls.unwrap());
        // The store's reading (allot_store::pg_tls, tested there in full): the mode
        // and what is checked.
        let t = tls(
            "postgresql+psycopg2://u:secret@db/placement?sslmode=verify-full\
                     &sslrootcert=/etc/placement/ca.pem&charset=utf8",
        )
        .unwrap();
        assert_eq!(t.mode, SslMode::VerifyFull);
        let client = t.client.unwrap();
        assert_eq!(client.check, Check::Full);
        assert_eq!(client.roots, Roots::File("/etc/placement/ca.pem".into()));
        let t = tls("postgresql://u@db/placement?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert_eq!(t.client.unwrap().check, Check::Chain);
        assert_eq!(
            tls("postgresql://u@db/placement?sslmode=disable")
                .unwrap()
                .client,
            None
        );
        // What libpq refuses, and what allot does not implement, with the password hidden.
        for (url, why) in [
            (
                "postgresql://u:secret@db/placement?sslmode=verify",
                "invalid sslmode",
            ),
            (
                "postgresql://u:secret@db/placement?sslcrl=/crl.pem",
                "sslcrl is not supported",
            ),
            (
                "postgresql://u:secret@db/placement?sslmode=require&sslrootcert=system",
                "needs sslmode=verify-full",
            ),
        ] {
            let e = tls(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }

    #[test]
    fn bad_urls_are_named() {
        for (url, why) in [
            ("sqlite:///placement.db", "scheme \"sqlite\""),
            ("mysql://u:secret@host/", "names no database"),
            ("not a url", "bad Placement database URL"),
            ("mysql:///placement", "names no host"),
            // Unparseable after the password: the message still hides it.
            (
                "mysql://u:secret@ho st/placement",
                "bad Placement database URL",
            ),
            (
                "mysql://u:secret@host:port/placement",
                "bad Placement database URL",
            ),
        ] {
            let e = PlacementUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
