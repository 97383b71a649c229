//! Where a node connects and how: a `mysql://`, `mariadb://` or SQLAlchemy-form
//! (`mysql+pymysql://user:pass@host/db?charset=utf8`, as `placement.conf` writes
//! it) URL read into the driver's settings, and the session every connection starts
//! with (a lost connection's retries are `crate::engine::reconnect`'s); and
//! [`beside`], the URL of another database on the same server, reached the same way
//! (allot's database beside Placement's, for `allot serve --placement-conf`).
//!
//! The URL is read as SQLAlchemy reads it (the password runs from the first `:`
//! of the credentials to the `@`, so it may hold `/`, `?` and `#` unescaped), not
//! by the driver's own parser, which refuses the Python drivers' arguments
//! (`charset=utf8`) that every `placement.conf` carries. Those are ignored: the
//! connection is always `utf8mb4`. `unix_socket=` names a socket.
//!
//! TLS: the URL's `ssl_*` arguments (PyMySQL's `ssl_ca`, `ssl_cert`, `ssl_key`,
//! `ssl_verify_cert`, `ssl_verify_identity`, ...) are read by [`crate::my_tls`], the
//! one home of that reading, shared with the Placement importer. Every connection of
//! the engine (the writer's, the lease's) uses the driver options it makes, their
//! files read once, when the engine opens; a handshake that fails is [`StoreError::MariaDbTls`],
//! with the cause in the URL's terms. The options are mysql_async's `SslOpts`, not a
//! rustls configuration of allot-tls's: mysql_async 0.37 builds its configuration
//! itself and takes none (no `ClientConfig`, verifier or root store), so allot-tls
//! hands it the roots and the client certificate it reads, and the checks are the
//! driver's two switches; where that differs (a name checked under
//! `ssl_verify_identity=false`, the driver's bug), `my_tls`'s doc says how.

use std::time::Duration;

use mysql_async::{Opts, OptsBuilder};
use tokio::runtime::Runtime;

use crate::engine::postgres::redact;
use crate::my_tls::{self, MyTls};
use crate::StoreError;

/// How long connecting may take before the server is called unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection sets first. Read committed: a write's reads after the
/// log's lock see every commit before it (under MariaDB's default, repeatable
/// read, a snapshot could be older than the lock); the load asks for its own
/// snapshot. Strict: a value that does not fit is an error, never cut short. No
/// backslash escapes: a quote is the only character a string literal escapes
/// (`super::script`).
/// Found rows: an update counts the rows it matched, as on the other engines, not
/// only those whose values changed.
const SESSION: &[&str] = &[
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION,\
     ERROR_FOR_DIVISION_BY_ZERO,NO_BACKSLASH_ESCAPES'",
    "SET NAMES utf8mb4 COLLATE utf8mb4_nopad_bin",
];

/// Whether `url` names a MariaDB (or MySQL) database: `mysql://`, `mariadb://`,
/// or SQLAlchemy's `mysql+DRIVER://` and `mariadb+DRIVER://`.
pub(crate) fn is_mariadb(url: &str) -> bool {
    let Some((scheme, _)) = url.split_once("://") else {
        return false;
    };
    matches!(scheme.split('+').next(), Some("mysql" | "mariadb"))
}

/// Where a node connects: the driver's settings (TLS's among them: the files are read
/// when the engine opens and first connects, and the driver keeps what it built from
/// them in these settings, so that a reconnect does not fail on a file being
/// rotated), the TLS settings they were made from, and the URL without its password
/// for messages.
#[derive(Clone)]
pub(super) struct Target {
    pub(super) opts: Opts,
    pub(super) tls: MyTls,
    pub(super) shown: String,
}

impl Target {
    /// A connection, its session set up.
    pub(super) fn connect(&self, runtime: &Runtime) -> Result<mysql_async::Conn, StoreError> {
        let attempt = async {
            tokio::time::timeout(CONNECT_TIMEOUT, mysql_async::Conn::new(self.opts.clone())).await
        };
        match runtime.block_on(attempt) {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(match self.tls.explain(&e) {
                Some(why) => StoreError::MariaDbTls(format!("connecting to {}: {why}", self.shown)),
                None => StoreError::MariaDb(format!("connecting to {}: {e}", self.shown)),
            }),
            Err(_) => Err(StoreError::MariaDb(format!(
                "connecting to {}: no answer in {}s",
                self.shown,
                CONNECT_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// Reads a MariaDB URL (see the module's doc).
pub(super) fn target(text: &str) -> Result<Target, StoreError> {
    let shown = redact(text);
    let bad = |reason: &str| StoreError::BadUrl {
        url: shown.clone(),
        reason: reason.into(),
    };
    let (rest, password) = split_password(text);
    // `user@/db?unix_socket=...` names no host, which SQLAlchemy allows and the URL
    // parser does not.
    let no_host = rest.contains("@/");
    let rest = rest.replacen("@/", "@localhost/", 1);
    let url = url::Url::parse(&rest).map_err(|e| bad(&e.to_string()))?;
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| bad("a percent-escape in it is not UTF-8"))
    };
    let database = decode(url.path().trim_start_matches('/'))?;
    if database.is_empty() || database.contains('/') {
        return Err(bad(
            "it names no database: mysql://USER:PASSWORD@HOST:PORT/DATABASE",
        ));
    }
    let mut socket = None;
    let mut tls_args = Vec::new();
    for (key, value) in url.query_pairs() {
        match key.as_ref() {
            "unix_socket" => socket = Some(value.into_owned()),
            key if my_tls::is_tls_key(key) => tls_args.push((key.to_owned(), value.into_owned())),
            // The Python drivers' (charset, plugins): the connection is utf8mb4.
            _ => {}
        }
    }
    let tls = MyTls::from_params(
        tls_args.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        socket.is_some(),
    )
    .map_err(|why| bad(&why))?;
    let host = url.host_str().unwrap_or("");
    if (no_host || host.is_empty()) && socket.is_none() {
        return Err(bad("it names no host"));
    }
    let ssl_opts = tls.ssl_opts().map_err(StoreError::MariaDbTls)?;
    let user = Some(decode(url.username())?).filter(|u| !u.is_empty());
    let password = password.as_deref().map(decode).transpose()?;
    let opts = OptsBuilder::default()
        .ip_or_hostname(if host.is_empty() { "localhost" } else { host })
        .tcp_port(url.port().unwrap_or(3306))
        .socket(socket)
        .prefer_socket(false)
        .user(user)
        .pass(password)
        .db_name(Some(database))
        .client_found_rows(true)
        .stmt_cache_size(256)
        .ssl_opts(ssl_opts)
        .init(SESSION.to_vec());
    Ok(Target {
        opts: opts.into(),
        tls,
        shown,
    })
}

/// The URL of database `name` on the server `url` names, reached as `url` reaches
/// its own: the same user, password, host and port (or socket) and arguments, in
/// the form `url` was written in (SQLAlchemy's `mysql+pymysql://` stays so). This is
/// how `allot serve --placement-conf` finds its database beside Placement's. `name`
/// must be a plain identifier (`[A-Za-z0-9_]`, at most 64), which needs no escape in
/// a URL or in SQL, and must not be the database `url` names already.
pub(crate) fn beside(url: &str, name: &str) -> Result<String, StoreError> {
    let bad = |reason: String| StoreError::BadUrl {
        url: redact(url),
        reason,
    };
    check_database_name(name).map_err(bad)?;
    let own = target(url)?;
    if own.opts.db_name() == Some(name) {
        return Err(bad(format!(
            "it names database {name} already, and allot's must be another"
        )));
    }
    let unread = || bad("its database cannot be told apart from its host".into());
    let (scheme, rest) = url.split_once("://").ok_or_else(unread)?;
    // The credentials as `split_password` reads them (SQLAlchemy's reading: a user
    // without `:` or `/`, then perhaps a password, up to the first `@`); the
    // database is the path after the host that follows them.
    let (_, password) = split_password(url);
    let credentials = rest
        .find('@')
        .filter(|&at| password.is_some() || !rest[..at].contains([':', '/']))
        .map_or(0, |at| at + 1);
    let (credentials, location) = rest.split_at(credentials);
    let slash = location.find('/').ok_or_else(unread)?;
    let path = &location[slash + 1..];
    let query = path.find(['?', '#']).map_or("", |at| &path[at..]);
    let derived = format!(
        "{scheme}://{credentials}{}/{name}{query}",
        &location[..slash]
    );
    // The same server and user, the other database, as the one reading finds it.
    let read = target(&derived)?;
    fn same(t: &Target) -> (Option<&str>, Option<&str>, &str, u16, Option<&str>) {
        let o = &t.opts;
        (
            o.user(),
            o.pass(),
            o.ip_or_hostname(),
            o.tcp_port(),
            o.socket(),
        )
    }
    if read.opts.db_name() != Some(name) || same(&read) != same(&own) {
        return Err(unread());
    }
    Ok(derived)
}

/// A database name [`beside`] accepts.
pub fn check_database_name(name: &str) -> Result<(), String> {
    let plain = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if name.is_empty() || name.len() > 64 || !plain {
        return Err(format!(
            "invalid database name {name:?} (expected letters, digits and _, at most 64)"
        ));
    }
    Ok(())
}

/// SQLAlchemy's reading of a URL's credentials: after `://`, a user name without `:`
/// or `/`, then optionally `:` and a password without `@`, then `@`. Returns the URL
/// without the password, and the password as written (still percent-escaped).
pub fn split_password(text: &str) -> (String, Option<String>) {
    let Some((scheme, rest)) = text.split_once("://") else {
        return (text.to_owned(), None);
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return (text.to_owned(), None);
    };
    match credentials.split_once(':') {
        Some((user, password)) if !user.contains('/') => (
            format!("{scheme}://{user}@{host}"),
            Some(password.to_owned()),
        ),
        _ => (text.to_owned(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_placement_conf_writes_them() {
        assert!(is_mariadb(
            "mysql+pymysql://placement:pw@db/placement?charset=utf8"
        ));
        assert!(is_mariadb("mariadb://u@db/allot"));
        assert!(!is_mariadb("postgres://u@db/allot"));
        assert!(!is_mariadb("sqlite:/x"));
        let t = target("mysql+pymysql://placement:pa#s/s?w:d@db:3307/allot?charset=utf8").unwrap();
        assert_eq!(t.opts.db_name(), Some("allot"));
        assert_eq!(t.opts.pass(), Some("pa#s/s?w:d"));
        assert_eq!(t.opts.user(), Some("placement"));
        assert_eq!(t.opts.tcp_port(), 3307);
        assert_eq!(t.opts.ip_or_hostname(), "db");
        assert_eq!(
            t.shown,
            "mysql+pymysql://placement:***@db:3307/allot?charset=utf8"
        );
        assert!(t.opts.client_found_rows());
        let t = target("mysql://u@/allot?unix_socket=/run/mysqld/mysqld.sock").unwrap();
        assert_eq!(t.opts.socket(), Some("/run/mysqld/mysqld.sock"));
    }

    #[test]
    fn tls_arguments_become_the_drivers_options() {
        // None asked for: none given to the driver (charset is the Python driver's).
        let t = target("mysql+pymysql://u@db/allot?charset=utf8").unwrap();
        assert_eq!(t.opts.ssl_opts(), None);
        assert_eq!(t.tls.client, None);
        // Encrypted, nothing checked: no roots read, the driver's switch on.
        let t = target("mysql+pymysql://u@db/allot?ssl_verify_cert=false").unwrap();
        let ssl = t.opts.ssl_opts().unwrap();
        assert!(ssl.accept_invalid_certs());
        assert!(ssl.root_certs().is_empty());
        // A CA file is read at open, and a missing one is named by its argument.
        match target("mysql://u:secret@db/allot?ssl_ca=/nonexistent/ca.pem") {
            Err(StoreError::MariaDbTls(m)) => {
                assert!(m.starts_with("ssl_ca /nonexistent/ca.pem: "), "{m}")
            }
            other => panic!("{:?}", other.map(|t| t.shown)),
        }
    }

    #[test]
    fn a_database_beside_placement_s_keeps_everything_but_the_name() {
        for (url, derived) in [
            (
                "mysql+pymysql://placement:pa#s/s?w:d@db:3307/placement?charset=utf8",
                "mysql+pymysql://placement:pa#s/s?w:d@db:3307/allot?charset=utf8",
            ),
            (
                "mysql://root@127.0.0.1:4000/placement",
                "mysql://root@127.0.0.1:4000/allot",
            ),
            ("mariadb://u@[::1]/placement#x", "mariadb://u@[::1]/allot#x"),
            (
                "mysql+pymysql://placement:pw@/placement?unix_socket=/run/mysqld/s.sock",
                "mysql+pymysql://placement:pw@/allot?unix_socket=/run/mysqld/s.sock",
            ),
            ("mysql://db:3306/placement", "mysql://db:3306/allot"),
            // TLS arguments too: allot's database is reached as Placement's is.
            (
                "mysql+pymysql://p:pw@db/placement?ssl_verify_cert=false&charset=utf8",
                "mysql+pymysql://p:pw@db/allot?ssl_verify_cert=false&charset=utf8",
            ),
        ] {
            assert_eq!(beside(url, "allot").unwrap(), derived, "{url}");
        }
        for (url, name, why) in [
            (
                "mysql://u:secret@db/placement",
                "placement",
                "names database placement already",
            ),
            (
                "mysql://u:secret@db/placement",
                "all-ot",
                "invalid database name",
            ),
            ("mysql://u:secret@db/placement", "", "invalid database name"),
            ("mysql://u:secret@db/", "allot", "names no database"),
        ] {
            let e = beside(url, name).unwrap_err().to_string();
            assert!(e.contains(why), "{url} {name}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
        assert!(check_database_name(&"a".repeat(64)).is_ok());
        assert!(check_database_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn what_cannot_be_served_is_refused_with_the_reason() {
        for (url, why) in [
            ("mysql://u:secret@db/", "names no database"),
            ("mysql://u:secret@/allot", "names no host"),
            (
                "mysql://u:secret@db/allot?ssl_capath=/etc/ssl/certs",
                "ssl_capath is not supported",
            ),
            (
                "mysql://u:secret@/allot?unix_socket=/run/mysqld.sock&ssl_ca=/ca.pem",
                "ssl_ca asks for TLS over a Unix socket",
            ),
        ] {
            let e = target(url).err().unwrap().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
