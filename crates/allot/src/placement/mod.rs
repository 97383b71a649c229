//! A live OpenStack Placement database, read and written directly (issue 22):
//! `allot import --from-placement URL` takes a whole deployment from it, and
//! `allot export --to-placement URL` writes one into an empty one made by
//! `placement-manage db sync`. Both go through the dump of `allot_store::dump`: the
//! reader builds a [`Dump`](allot_store::dump::Dump) from Placement's tables and hands
//! it to the same checked import as a dump file (one home for the checks); the writer
//! takes the dump of an allot database and turns it into Placement's rows.
//!
//! This module holds what both directions share: the URL as `placement.conf` writes
//! it, the two drivers behind one small connection type, and the schema revisions
//! this build understands. The connection speaks text only (MySQL's text protocol,
//! PostgreSQL's simple queries), so that one parser serves both databases and no
//! column type can be read differently by the two drivers.
//!
//! TLS: a PostgreSQL URL's libpq arguments (`sslmode`, `sslrootcert`, `sslcert`,
//! `sslkey`) and variables (`PGSSLMODE`, ...) are read by `allot_store::pg_tls`, the
//! one reading of them that the store's engine uses too, so a Placement database and
//! an allot database are reached alike. MySQL's TLS arguments are still refused (the
//! MySQL driver is built without a TLS stack): never a silent plain-text connection.

mod read;
mod write;

use std::time::Duration;

use allot_store::pg_tls::{self, PgTls};
use anyhow::{anyhow, bail, Context};

pub use read::{read_placement, Placeholders};
pub use write::write_placement;

/// Placement 16.0.0's schema revision (the head of its alembic history).
pub const HEAD_REVISION: &str = "a082b8bb98d0";

/// The revisions this build reads, newest first, and whether the schema has the
/// `consumer_types` table (added by 422ece571366; older consumers have no type).
/// The revisions between the initial schema and the head change indexes and add
/// checks, not the tables read here.
pub const READABLE_REVISIONS: &[(&str, bool)] = &[
    (HEAD_REVISION, true),
    ("422ece571366", true),
    ("b5c396305c25", false),
    ("611cd6dffd7b", false),
    ("b4ed3a175331", false),
];

/// How long a connection may take before the host is called unreachable, unless
/// `--connect-timeout` says otherwise: a database on the same network answers in
/// well under a second, and an operator should not wait minutes for a typo'd host.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which database a Placement URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// MariaDB or MySQL.
    MySql,
    /// PostgreSQL.
    Postgres,
}

/// A Placement database, as `[placement_database] connection` names it.
#[derive(Debug, Clone)]
pub struct PlacementUrl {
    dialect: Dialect,
    host: String,
    port: Option<u16>,
    /// A Unix socket (MySQL: `?unix_socket=`; PostgreSQL: `?host=/dir`).
    socket: Option<String>,
    user: Option<String>,
    password: Option<String>,
    database: String,
    /// The URL with the password hidden, for messages.
    shown: String,
    /// How long connecting (TCP, handshake, authentication) may take.
    connect_timeout: Duration,
    /// PostgreSQL's TLS settings, as libpq reads them (`None` for MySQL).
    tls: Option<PgTls>,
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
    /// (and anything percent-escaped). Query arguments other than the socket and
    /// PostgreSQL's TLS settings (libpq's `sslmode`, `sslrootcert`, `sslcert`,
    /// `sslkey`: `allot_store::pg_tls`) are the Python driver's (charset, plugins) and
    /// are ignored, except that asking MySQL for TLS is refused: this build speaks TLS
    /// to PostgreSQL only (issue 27). No message shows the password.
    pub fn parse(text: &str) -> anyhow::Result<PlacementUrl> {
        let (rest, password) = split_password(text);
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
        let mut pg_args = Vec::new();
        for (key, value) in url.query_pairs() {
            match (dialect, key.as_ref()) {
                (Dialect::MySql, "unix_socket") | (Dialect::Postgres, "host") => {
                    socket = Some(value.into_owned())
                }
                // libpq's, read (and checked) below, all together.
                (Dialect::Postgres, _) => pg_args.push((key, value)),
                (Dialect::MySql, key) if key.starts_with("ssl") || key.starts_with("tls") => {
                    return Err(bad(&format!(
                        "it asks for TLS ({key}), which allot does not speak to MySQL or \
                         MariaDB yet: connect over a trusted network or a local socket, \
                         without the TLS arguments (TLS to a PostgreSQL database is \
                         supported: sslmode, sslrootcert)"
                    )))
                }
                _ => {}
            }
        }
        let tls = match dialect {
            Dialect::MySql => None,
            Dialect::Postgres => Some(
                PgTls::from_params(
                    pg_args.iter().map(|(k, v)| (k.as_ref(), v.as_ref())),
                    &pg_tls::process_env,
                )
                .map_err(|why| bad(&why))?,
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

/// SQLAlchemy's reading of a URL's credentials: after `://`, a user name without `:`
/// or `/`, then optionally `:` and a password without `@`, then `@`. Returns the URL
/// without the password, and the password as written (still percent-escaped).
fn split_password(text: &str) -> (String, Option<String>) {
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

/// The URL with its password replaced by `***` (`allot_store::redacted`, which reads
/// the credentials as [`split_password`] does), whether or not the rest parses.
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

/// Rows of text (NULL as `None`), as both drivers hand them over.
pub type Rows = Vec<Vec<Option<String>>>;

/// One connection to a Placement database, through either driver.
pub enum Conn {
    /// MariaDB/MySQL.
    My(mysql_async::Conn),
    /// PostgreSQL (the connection's task runs beside it on the runtime).
    Pg(tokio_postgres::Client),
}

impl Conn {
    /// Connects, naming the database and the cause when it cannot.
    pub async fn connect(db: &PlacementUrl) -> anyhow::Result<Conn> {
        let attempt = async {
            match db.dialect {
                Dialect::MySql => {
                    let mut opts = mysql_async::OptsBuilder::default()
                        .ip_or_hostname(if db.host.is_empty() {
                            "localhost"
                        } else {
                            &db.host
                        })
                        .user(db.user.clone())
                        .pass(db.password.clone())
                        .db_name(Some(db.database.clone()))
                        .prefer_socket(false)
                        .socket(db.socket.clone());
                    if let Some(port) = db.port {
                        opts = opts.tcp_port(port);
                    }
                    let conn = mysql_async::Conn::new(opts).await.map_err(my_error)?;
                    anyhow::Ok(Conn::My(conn))
                }
                Dialect::Postgres => {
                    let mut config = tokio_postgres::Config::new();
                    config.host(db.socket.as_deref().unwrap_or(&db.host));
                    config.dbname(&db.database);
                    if let Some(port) = db.port {
                        config.port(port);
                    }
                    if let Some(user) = &db.user {
                        config.user(user);
                    }
                    if let Some(password) = &db.password {
                        config.password(password);
                    }
                    let tls = db.tls.as_ref().expect("a PostgreSQL URL has TLS settings");
                    tls.apply(&mut config);
                    let connector = tls.connector().map_err(|e| anyhow!(e))?;
                    let (client, connection) =
                        config
                            .connect(connector)
                            .await
                            .map_err(|e| match tls.explain(&e) {
                                Some(why) => anyhow!(why),
                                None => pg_error(e),
                            })?;
                    tokio::spawn(connection);
                    Ok(Conn::Pg(client))
                }
            }
        };
        match tokio::time::timeout(db.connect_timeout, attempt).await {
            Ok(result) => result.with_context(|| format!("connecting to {db}")),
            Err(_) => bail!(
                "connecting to {db}: no answer in {}s (is the host reachable, and is it a \
                 database server? --connect-timeout waits longer)",
                db.connect_timeout.as_secs()
            ),
        }
    }

    /// Runs one query and returns its rows as text.
    pub async fn rows(&mut self, sql: &str) -> anyhow::Result<Rows> {
        match self {
            Conn::My(conn) => {
                use mysql_async::prelude::Queryable;
                let rows: Vec<mysql_async::Row> = conn.query(sql).await.map_err(my_error)?;
                Ok(rows
                    .into_iter()
                    .map(|row| row.unwrap().into_iter().map(my_text).collect())
                    .collect())
            }
            Conn::Pg(client) => {
                let messages = client.simple_query(sql).await.map_err(pg_error)?;
                Ok(messages
                    .into_iter()
                    .filter_map(|m| match m {
                        tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                            (0..row.len())
                                .map(|i| row.get(i).map(str::to_owned))
                                .collect(),
                        ),
                        _ => None,
                    })
                    .collect())
            }
        }
    }

    /// Runs statements that return no rows.
    pub async fn execute(&mut self, sql: &str) -> anyhow::Result<()> {
        match self {
            Conn::My(conn) => {
                use mysql_async::prelude::Queryable;
                conn.query_drop(sql).await.map_err(my_error)
            }
            Conn::Pg(client) => client.batch_execute(sql).await.map(drop).map_err(pg_error),
        }
    }

    /// Closes the connection politely (MySQL logs an aborted one otherwise).
    pub async fn close(self) {
        if let Conn::My(conn) = self {
            let _ = conn.disconnect().await;
        }
    }

    /// The database on the other end.
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::My(_) => Dialect::MySql,
            Conn::Pg(_) => Dialect::Postgres,
        }
    }

    /// A column's DATETIME as whole seconds since the Unix epoch (UTC: Placement
    /// writes naive UTC times, and the MySQL session's zone is set to UTC).
    fn epoch(&self, column: &str) -> String {
        match self.dialect() {
            Dialect::MySql => format!("UNIX_TIMESTAMP({column})"),
            Dialect::Postgres => format!("CAST(EXTRACT(EPOCH FROM {column}) AS BIGINT)"),
        }
    }

    /// The schema revision, checked against those this build understands; returns
    /// whether the schema has consumer types.
    async fn revision(&mut self) -> anyhow::Result<(String, bool)> {
        let rows = self
            .rows("SELECT version_num FROM alembic_version")
            .await
            .context(
                "reading alembic_version (is this a Placement database, made by \
             `placement-manage db sync`?)",
            )?;
        let found: Vec<String> = rows.into_iter().flatten().flatten().collect();
        let supported = READABLE_REVISIONS
            .iter()
            .map(|(r, _)| *r)
            .collect::<Vec<_>>()
            .join(", ");
        match found.as_slice() {
            [one] => match READABLE_REVISIONS.iter().find(|(r, _)| r == one) {
                Some(&(_, types)) => Ok((one.clone(), types)),
                None => bail!(
                    "unsupported Placement schema revision {one}: this build reads {supported} \
                     (Placement 16.0.0 is {HEAD_REVISION})"
                ),
            },
            [] => bail!(
                "alembic_version is empty: the Placement schema was never made \
                 (run `placement-manage db sync`); this build reads {supported}"
            ),
            many => bail!(
                "alembic_version holds several revisions ({}); this build reads one of {supported}",
                many.join(", ")
            ),
        }
    }
}

/// A MySQL value of the text protocol as text.
fn my_text(value: mysql_async::Value) -> Option<String> {
    use mysql_async::Value;
    match value {
        Value::NULL => None,
        Value::Bytes(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Value::Int(i) => Some(i.to_string()),
        Value::UInt(u) => Some(u.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Double(d) => Some(d.to_string()),
        other => Some(other.as_sql(true)),
    }
}

fn my_error(e: mysql_async::Error) -> anyhow::Error {
    anyhow!("{e}")
}

/// tokio-postgres says only "db error" at the top; the server's words are below.
fn pg_error(e: tokio_postgres::Error) -> anyhow::Error {
    match e.as_db_error() {
        Some(db) => anyhow!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(&e) {
            Some(cause) => anyhow!("{e}: {cause}"),
            None => anyhow!("{e}"),
        },
    }
}

/// A single-threaded runtime for one command's database work.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
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
    fn mysql_tls_is_refused_rather_than_dropped() {
        for url in [
            "mysql+pymysql://u:secret@db/placement?ssl_ca=/etc/ca.pem",
            "mysql://u:secret@db/placement?tls=true",
        ] {
            let e = PlacementUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains("does not speak to MySQL or MariaDB"), "{e}");
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
