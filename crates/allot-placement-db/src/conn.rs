//! One connection to a Placement database, through either driver: MySQL/MariaDB's
//! `mysql_async` or PostgreSQL's `tokio-postgres`. The connection speaks text only
//! (MySQL's text protocol, PostgreSQL's simple queries), so that one parser serves
//! both databases and no column type can be read differently by the two drivers;
//! the few places where the two dialects spell SQL differently (a time read or
//! written) are here too.

use anyhow::{anyhow, bail, Context};

use crate::placement_url::{Dialect, PlacementUrl};

/// Rows of text (NULL as `None`), as both drivers hand them over.
pub(crate) type Rows = Vec<Vec<Option<String>>>;

/// One connection to a Placement database, through either driver.
pub(crate) enum Conn {
    /// MariaDB/MySQL.
    My(mysql_async::Conn),
    /// PostgreSQL (the connection's task runs beside it on the runtime).
    Pg(tokio_postgres::Client),
}

impl Conn {
    /// Connects, naming the database and the cause when it cannot.
    pub(crate) async fn connect(db: &PlacementUrl) -> anyhow::Result<Conn> {
        let attempt = async {
            match db.dialect {
                Dialect::MySql => connect_mysql(db).await,
                Dialect::Postgres => connect_postgres(db).await,
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
    pub(crate) async fn rows(&mut self, sql: &str) -> anyhow::Result<Rows> {
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
    pub(crate) async fn execute(&mut self, sql: &str) -> anyhow::Result<()> {
        match self {
            Conn::My(conn) => {
                use mysql_async::prelude::Queryable;
                conn.query_drop(sql).await.map_err(my_error)
            }
            Conn::Pg(client) => client.batch_execute(sql).await.map(drop).map_err(pg_error),
        }
    }

    /// Several statements separated by `;` (MySQL's text protocol takes them one by
    /// one unless the client allows more).
    pub(crate) async fn execute_many(&mut self, sql: &str) -> anyhow::Result<()> {
        for statement in sql.split(';').filter(|s| !s.trim().is_empty()) {
            self.execute(statement).await?;
        }
        Ok(())
    }

    /// Closes the connection politely (MySQL logs an aborted one otherwise).
    pub(crate) async fn close(self) {
        if let Conn::My(conn) = self {
            let _ = conn.disconnect().await;
        }
    }

    /// The database on the other end.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::My(_) => Dialect::MySql,
            Conn::Pg(_) => Dialect::Postgres,
        }
    }

    /// A column's DATETIME as whole seconds since the Unix epoch (UTC: Placement
    /// writes naive UTC times, and the MySQL session's zone is set to UTC).
    pub(crate) fn epoch(&self, column: &str) -> String {
        match self.dialect() {
            Dialect::MySql => format!("UNIX_TIMESTAMP({column})"),
            Dialect::Postgres => format!("CAST(EXTRACT(EPOCH FROM {column}) AS BIGINT)"),
        }
    }

    /// Seconds since the epoch as a DATETIME literal (UTC).
    pub(crate) fn datetime_of(&self, seconds: i64) -> String {
        match self.dialect() {
            Dialect::MySql => format!("FROM_UNIXTIME({seconds})"),
            Dialect::Postgres => format!("(to_timestamp({seconds}) AT TIME ZONE 'UTC')"),
        }
    }
}

/// Connects to MariaDB/MySQL, over TCP or the URL's Unix socket, with the URL's TLS
/// settings (`allot_store::my_tls`: their files read now, a failed handshake
/// explained in the URL's terms).
async fn connect_mysql(db: &PlacementUrl) -> anyhow::Result<Conn> {
    let tls = db.my_tls.as_ref().expect("a MySQL URL has TLS settings");
    let ssl_opts = tls.ssl_opts().map_err(|e| anyhow!(e))?;
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
        .socket(db.socket.clone())
        .ssl_opts(ssl_opts);
    if let Some(port) = db.port {
        opts = opts.tcp_port(port);
    }
    let conn = mysql_async::Conn::new(opts)
        .await
        .map_err(|e| match tls.explain(&e) {
            Some(why) => anyhow!(why),
            None => my_error(e),
        })?;
    Ok(Conn::My(conn))
}

/// Connects to PostgreSQL with the URL's TLS settings, and starts the connection's
/// task on the runtime.
async fn connect_postgres(db: &PlacementUrl) -> anyhow::Result<Conn> {
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

#[cfg(test)]
mod tests {
    //! The connection to MariaDB over real TLS, with the URL's arguments as
    //! `allot_store::my_tls` reads them (tested in full there and in allot-store's
    //! tests/tls.rs): the server of `ALLOT_TEST_MARIADB_URL` and its authority,
    //! `ALLOT_TEST_MARIADB_CA` (`scripts/mariadb env` prints both).

    use super::*;
    use crate::test_skip as skip;

    /// The test server's `mysql` database, by a URL as `placement.conf` writes one,
    /// with `args`.
    fn placement_url(server: &str, args: &str) -> PlacementUrl {
        let host = server.split_once("://").unwrap().1.trim_end_matches('/');
        PlacementUrl::parse(&format!("mysql+pymysql://{host}/mysql?charset=utf8&{args}")).unwrap()
    }

    #[test]
    fn mariadb_over_tls_as_the_store_connects() {
        let (Ok(server), Ok(ca)) = (
            std::env::var("ALLOT_TEST_MARIADB_URL"),
            std::env::var("ALLOT_TEST_MARIADB_CA"),
        ) else {
            skip::skip(
                "ALLOT_TEST_MARIADB_URL and ALLOT_TEST_MARIADB_CA are not set, so the \
                 importer's TLS to MariaDB was not tried (scripts/mariadb env prints both)",
            );
            return;
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let version = |db: PlacementUrl| {
            runtime.block_on(async {
                let mut conn = Conn::connect(&db).await?;
                let rows = conn
                    .rows(
                        "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
                         WHERE VARIABLE_NAME = 'SSL_VERSION'",
                    )
                    .await?;
                conn.close().await;
                anyhow::Ok(rows[0][0].clone().unwrap_or_default())
            })
        };
        let tls = version(placement_url(&server, &format!("ssl_ca={ca}"))).unwrap();
        assert!(tls.starts_with("TLSv1."), "{tls:?}");
        assert_eq!(version(placement_url(&server, "")).unwrap(), "");
        let dir = tempfile::tempdir().unwrap();
        let other = allot_tls::testing::TestCa::new(dir.path(), "other");
        let e = version(placement_url(
            &server,
            &format!("ssl_ca={}", other.cert().display()),
        ))
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.ends_with(&format!(
                "TLS: the server's certificate is not signed by a certificate authority \
                 of ssl_ca {}",
                other.cert().display()
            )),
            "{e}"
        );
    }
}
