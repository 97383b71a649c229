//! The merged settings checked and typed: [`settings`] turns the one [`super::Layer`] the
//! merge gives into [`Settings`], with the checks that span a value and its meaning
//! (bounds, the database, found beside Placement's or refused, warnings about the
//! settings themselves), each error naming the source of the value it refuses.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;

use super::auth::auth;
use super::layers::{self, Merged};
use super::parse::{check_log_filter, parse_advertise_url, parse_database_name};
use super::placement_conf::Connection;
use super::tls::server_tls;
use super::{default_database, BesidePlacement, Settings};

/// A setting with a declared default, which the merge always fills.
pub(super) fn declared<T>(value: Option<T>) -> T {
    value.expect("the merge fills every setting that has a declared default")
}

/// A list's items, trimmed, without the empty ones.
pub(super) fn clean(list: Vec<String>) -> Vec<String> {
    list.into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The process's own settings, and the server's ([`server_settings`]), each error
/// naming the source of the value it refuses.
pub(super) fn settings(
    merged: Merged,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Settings> {
    let from = |id| merged.source(id);
    let s = &merged.layer;
    let bind = declared(s.bind);
    let database = database(&merged, env)?;
    let mut placement_conf = merged.placement.clone();
    if let (Some(conf), Some(_)) = (&mut placement_conf, &database.beside) {
        // Used after all: it names the server of allot's database.
        conf.unused
            .retain(|key| key != "[placement_database] connection");
    }
    let log = declared(s.log.clone());
    check_log_filter(&log).map_err(|e| anyhow!("{}: {e}", from("log")))?;
    let server = server_settings(&merged)?;
    Ok(Settings {
        bind,
        database: database.url,
        beside_placement: database.beside,
        log,
        log_format: declared(s.log_format),
        auth: auth(&merged, bind, env)?,
        policy_file: given_path(&s.policy_file),
        tls: server_tls(&merged)?,
        placement_conf,
        shutdown_grace: Duration::from_secs(declared(s.shutdown_grace)),
        save_view_every: Some(declared(s.save_view_every))
            .filter(|&seconds| seconds > 0)
            .map(Duration::from_secs),
        metrics_bind: s.metrics_bind,
        // Flags and variables were checked as they were read; a file's value is
        // checked here.
        advertise_url: s
            .advertise_url
            .as_deref()
            .map(parse_advertise_url)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{}: {e}", from("advertise_url")))?,
        warnings: warnings(&merged, bind),
        server,
    })
}

/// The settings the server reads, built from the merged ones directly: one field a
/// setting, so that a new one is its `Layer` field, its field of
/// [`allot_server::Settings`] and its field here (a compile error until it is given).
pub(super) fn server_settings(merged: &Merged) -> anyhow::Result<allot_server::Settings> {
    let s = &merged.layer;
    // The bounds a request's own `expires_in` has.
    let max_expiry = allot_server::schemas::MAX_CLAIM_EXPIRES_IN as u64;
    let seconds = |id, value, bounds| bounded(merged, id, value, bounds, " seconds");
    let origins = clean(s.cors_allowed_origins.clone());
    Ok(allot_server::Settings {
        cors: (!origins.is_empty()).then(|| allot_server::Cors {
            allowed_origins: origins,
            allow_headers: clean(s.cors_allow_headers.clone()),
        }),
        public_url: s.public_url.clone().filter(|u| !u.is_empty()),
        policy: declared(s.policy).into(),
        randomize_allocation_candidates: declared(s.randomize_allocation_candidates),
        max_allocation_candidates: bounded(
            merged,
            "max_allocation_candidates",
            declared(s.max_allocation_candidates) as u64,
            1..=u64::MAX,
            "",
        )? as usize,
        claim_expires_in: seconds(
            "claim_expires_in",
            declared(s.claim_expires_in),
            1..=max_expiry,
        )? as i64,
        claim_retention: seconds(
            "claim_retention",
            declared(s.claim_retention),
            0..=max_expiry,
        )? as i64,
        claim_sweep_interval: Duration::from_secs(seconds(
            "claim_sweep_interval",
            declared(s.claim_sweep_interval),
            1..=max_expiry,
        )?),
        // Not a setting of `allot serve`: the server's own bound.
        max_staleness: allot_server::DEFAULT_MAX_STALENESS,
        healthcheck_disable_file: given_path(&s.healthcheck_disable_file),
        slow_request: Some(declared(s.slow_request_ms) as u64)
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis),
        metrics_providers: declared(s.metrics_providers),
        shape_counts_interval: Duration::from_secs(seconds(
            "shape_counts_interval",
            declared(s.shape_counts_interval),
            1..=3600,
        )?),
        connections: allot_server::limits::ConnectionLimits {
            head_timeout: Duration::from_secs(seconds(
                "head_timeout",
                declared(s.head_timeout),
                1..=3600,
            )?),
            body_timeout: Duration::from_secs(seconds(
                "body_timeout",
                declared(s.body_timeout),
                1..=3600,
            )?),
            idle_timeout: Duration::from_secs(seconds(
                "idle_timeout",
                declared(s.idle_timeout),
                1..=86_400,
            )?),
            max_connections: bounded(
                merged,
                "max_connections",
                declared(s.max_connections) as u64,
                1..=1_000_000,
                "",
            )? as usize,
        },
    })
}

/// A number within its bounds, or an error naming the setting's source and the bounds
/// as the operator reads them (`unit` after each, when there is one).
fn bounded(
    merged: &Merged,
    id: &str,
    value: u64,
    bounds: RangeInclusive<u64>,
    unit: &str,
) -> anyhow::Result<u64> {
    if bounds.contains(&value) {
        return Ok(value);
    }
    let rule = match (*bounds.start(), *bounds.end()) {
        (low, u64::MAX) => format!("at least {low}"),
        (0, high) => format!("at most {high}{unit}"),
        (low, high) => format!("from {low} to {high}{unit}"),
    };
    anyhow::bail!("{}: {id} must be {rule}", merged.source(id))
}

/// A path given, or none for a blank one, so that a wrapper can clear it.
fn given_path(path: &Option<PathBuf>) -> Option<PathBuf> {
    path.clone()
        .filter(|p| !p.to_string_lossy().trim().is_empty())
}

/// The database the settings name, and, when it was found beside Placement's, what
/// `allot serve` checks before serving it.
pub(super) struct Database {
    pub url: String,
    pub beside: Option<BesidePlacement>,
}

/// The database URL: `--database` (or its variable or file key) when given, which
/// wins whatever placement.conf says; else, with a placement.conf that names
/// Placement's database (`[placement_database] connection`), allot's own database
/// beside it ([`beside_placement`]); else the default SQLite file.
pub(super) fn database(
    merged: &Merged,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Database> {
    let s = &merged.layer;
    let connection = merged
        .placement
        .as_ref()
        .and_then(|p| Some((&p.path, p.connection.as_ref()?)));
    if let (None, Some((path, connection))) = (&s.database, connection) {
        return beside_placement(merged, path, connection);
    }
    let url = s.database.clone().unwrap_or_else(|| default_database(env));
    if url.trim().is_empty() {
        anyhow::bail!("{}: the database URL is empty", merged.source("database"));
    }
    Ok(Database { url, beside: None })
}

/// allot's database beside Placement's: on the MariaDB server of placement.conf's
/// connection, with its credentials, under `database_name`. Never Placement's own
/// database: allot cannot serve Placement's tables. Whether it may be served (it
/// holds a commit, or Placement's holds no provider: an empty allot beside a
/// Placement with providers would show the cloud's schedulers and compute nodes a
/// Placement with none, which they would fill again from scratch and over-commit) is
/// `allot serve`'s to ask the databases (`serve::beside`). A PostgreSQL connection
/// is refused: SQLAlchemy's PostgreSQL URL (psycopg2's arguments, a password left
/// unescaped) is not the form allot's PostgreSQL engine reads, so allot's database
/// is named there with --database.
fn beside_placement(
    merged: &Merged,
    path: &std::path::Path,
    connection: &Connection,
) -> anyhow::Result<Database> {
    let name_source = merged.source("database_name");
    // Flags and variables were checked as they were read; a file's value is checked
    // here.
    let name = parse_database_name(&declared(merged.layer.database_name.clone()))
        .map_err(|e| anyhow!("{name_source}: {e}"))?;
    let conf = format!(
        "placement.conf {}: [placement_database] connection = {}",
        path.display(),
        connection.shown()
    );
    match allot_store::database_beside(connection.url(), &name) {
        Ok(Some(url)) => Ok(Database {
            url,
            beside: Some(BesidePlacement {
                conf: path.to_owned(),
                placement: connection.clone(),
                name,
            }),
        }),
        Ok(None) => anyhow::bail!(
            "{conf} is OpenStack Placement's database, which allot does not serve, and \
             allot finds a database of its own beside Placement's on MariaDB/MySQL only. \
             Import it into allot's own database first (`allot import --from-placement \
             URL --database URL`, see docs/migrate.md), then name that database with \
             --database, ALLOT_DATABASE or `database` in allot's config file."
        ),
        Err(e) => {
            let why = match e {
                allot_store::StoreError::BadUrl { reason, .. } => reason,
                other => other.to_string(),
            };
            anyhow::bail!(
                "{conf}: allot's database beside it, named {name} ({name_source}), \
                 cannot be found there: {why}"
            )
        }
    }
}

/// What a start should warn of in the settings themselves.
fn warnings(merged: &Merged, bind: SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let s = &merged.layer;
    if !bind.ip().is_loopback() && server_tls(merged).ok().flatten().is_none() {
        out.push(format!(
            "serving plain HTTP on {bind}: tokens cross the network in clear text; give \
             --tls-cert and --tls-key, or keep a TLS-terminating proxy in front"
        ));
    }
    if declared(s.keystone_insecure) {
        out.push(format!(
            "{}: Keystone's certificate is not checked, so whoever sits between can read \
             the service password and every token",
            merged.source("keystone_insecure")
        ));
    }
    if let layers::Source::Flag(flag) = merged.source("keystone_password") {
        out.push(format!(
            "{flag} shows the Keystone password to every local user (the process \
             list): use ALLOT_KEYSTONE_PASSWORD, keystone_password in the config file \
             or --keystone-password-file"
        ));
    }
    out
}
