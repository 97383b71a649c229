//! Where a node connects and how: the URL read into the driver's settings, the TLS
//! connector, and the retries of a connection that was lost. Every connection of
//! this engine (the writer's, the listener's, the lease's) is made from a
//! [`Target`].
//!
//! TLS: the URL's libpq arguments (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`)
//! are read by [`crate::pg_tls`], the one home of that reading; every connection
//! uses the rustls connector it makes (its files read once, at open), and a
//! handshake that fails is [`StoreError::PostgresTls`] with the cause in libpq's
//! terms.
//!
//! Connection loss: a call that finds its connection closed reconnects
//! (`crate::engine::reconnect`), retrying for a few seconds before it gives up
//! with an error.

use std::str::FromStr;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::pg_tls::{self, PgTls};
use crate::StoreError;

/// Where a node connects and how: the driver's settings, the TLS settings they were
/// read with, and the TLS connector made from them (its files read once, at open, so
/// a reconnect does not fail on a file being rotated).
#[derive(Clone)]
pub(super) struct Target {
    pub(super) config: Config,
    pub(super) tls: PgTls,
    connector: MakeRustlsConnect,
}

impl Target {
    /// A connection of the writer's kind (tokio-postgres), its task on `runtime`.
    pub(super) fn connect(&self, runtime: &Runtime) -> Result<Client, StoreError> {
        let (client, connection) = runtime
            .block_on(self.config.connect(self.connector.clone()))
            .map_err(|e| self.error(e))?;
        runtime.spawn(async move {
            // Its end shows at the next call (`is_closed`), which reconnects.
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection ended: {e}");
            }
        });
        Ok(client)
    }

    /// A connection of the listener's kind (the blocking `postgres` crate).
    pub(super) fn connect_blocking(&self) -> Result<postgres::Client, StoreError> {
        postgres::Config::from(self.config.clone())
            .connect(self.connector.clone())
            .map_err(|e| self.error(e))
    }

    /// A failed connect, explained in libpq's terms when TLS is why.
    fn error(&self, e: postgres::Error) -> StoreError {
        match self.tls.explain(&e) {
            Some(why) => StoreError::PostgresTls(why),
            None => e.into(),
        }
    }
}

/// Parses a `postgres://` or `postgresql://` URL into a connection target: libpq's
/// TLS arguments by [`pg_tls::split_url`] (with libpq's variables), the rest by the
/// driver, with a connect timeout unless the URL sets one (an unreachable host must
/// be an error, not a hang).
pub(super) fn target(url: &str) -> Result<Target, StoreError> {
    let bad = |reason: String| StoreError::BadUrl {
        url: redact(url),
        reason,
    };
    let (rest, tls) = pg_tls::split_url(url, &pg_tls::process_env).map_err(bad)?;
    let mut config = Config::from_str(&rest).map_err(|e| bad(e.to_string()))?;
    if config.get_hosts().is_empty() {
        return Err(StoreError::BadUrl {
            url: redact(url),
            reason: "no host: postgres://USER@HOST:PORT/DATABASE".into(),
        });
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("allot");
    // No JIT: allot's statements are small and keyed, but the planner's guesses for
    // the one-row log head made it compile the log's read (120 ms a time, measured
    // under a three-node storm, where the reads themselves take well under 1 ms).
    let options = match config.get_options() {
        Some(given) => format!("{given} -c jit=off"),
        None => "-c jit=off".to_owned(),
    };
    config.options(&options);
    tls.apply(&mut config);
    let connector = tls.connector().map_err(StoreError::PostgresTls)?;
    Ok(Target {
        config,
        tls,
        connector,
    })
}

/// The URL without its password (in the user part or as a `password=` parameter),
/// for logs and messages.
pub fn redact(url: &str) -> String {
    // The credentials as SQLAlchemy reads them (placement.conf's URLs): after `://`, a
    // user without `:` or `/`, then `:` and a password up to the first `@`, which may
    // hold `/`, `?` and `#` as they are.
    let (head, rest) = match url.split_once("://") {
        Some((scheme, after)) => match after.split_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) if !user.contains('/') => (format!("{scheme}://{user}:***@"), host),
                _ => (format!("{scheme}://"), after),
            },
            None => (format!("{scheme}://"), after),
        },
        None => (String::new(), url),
    };
    let Some((base, query)) = rest.split_once('?') else {
        return format!("{head}{rest}");
    };
    let parameters: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some(("password", _)) => "password=***".to_string(),
            _ => p.to_string(),
        })
        .collect();
    format!("{head}{base}?{}", parameters.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_urls_hide_the_password() {
        assert_eq!(
            redact("postgres://me:secret@db:5432/allot"),
            "postgres://me:***@db:5432/allot"
        );
        assert_eq!(redact("postgres://me@db/allot"), "postgres://me@db/allot");
        assert_eq!(
            redact("postgresql://db/allot?user=me&password=secret&sslmode=disable"),
            "postgresql://db/allot?user=me&password=***&sslmode=disable"
        );
        assert_eq!(redact("sqlite:/var/lib/a@b.db"), "sqlite:/var/lib/a@b.db");
        // A password holding what SQLAlchemy lets it hold unescaped.
        assert_eq!(
            redact("mysql+pymysql://placement:pa#s/s?w:d@db/placement?charset=utf8"),
            "mysql+pymysql://placement:***@db/placement?charset=utf8"
        );
        // libpq's TLS arguments stay as they are (a path is no secret).
        assert_eq!(
            redact(
                "postgres://me:pw@db/allot?sslmode=verify-full&sslrootcert=/etc/ca.pem&password=x"
            ),
            "postgres://me:***@db/allot?sslmode=verify-full&sslrootcert=/etc/ca.pem&password=***"
        );
        // An `@` past the path is no credentials.
        assert_eq!(
            redact("postgresql://db/allot?options=a@b"),
            "postgresql://db/allot?options=a@b"
        );
    }
}
