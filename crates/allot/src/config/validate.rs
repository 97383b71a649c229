//! The merged settings checked and typed: [`settings`] turns the one [`super::Layer`] the
//! merge gives into [`Settings`], with the checks that span a value and its meaning
//! (bounds, a database that allot cannot serve, warnings about the settings
//! themselves), each error naming the source of the value it refuses.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;

use super::auth::auth;
use super::layers::{self, Merged};
use super::parse::{check_log_filter, parse_advertise_url};
use super::tls::server_tls;
use super::{default_database, Settings};

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
    let log = declared(s.log.clone());
    check_log_filter(&log).map_err(|e| anyhow!("{}: {e}", from("log")))?;
    let server = server_settings(&merged)?;
    Ok(Settings {
        bind,
        database,
        log,
        log_format: declared(s.log_format),
        auth: auth(&merged, bind, env)?,
        policy_file: given_path(&s.policy_file),
        tls: server_tls(&merged)?,
        placement_conf: merged.placement.clone(),
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

/// The database URL. A placement.conf that names Placement's own database
/// (`[placement_database] connection`) while allot's sources name none stops the
/// start: allot cannot serve that database, and starting on an empty one of its own
/// instead would show the cloud's schedulers and compute nodes a Placement with no
/// providers and no allocations, which they would fill again from scratch and
/// overcommit. With `--database` (or its variable or file key) given, the connection
/// is only listed among the keys not used.
pub(super) fn database(
    merged: &Merged,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<String> {
    let s = &merged.layer;
    let connection = merged
        .placement
        .as_ref()
        .and_then(|p| Some((&p.path, p.connection.as_ref()?)));
    if let (None, Some((path, url))) = (&s.database, connection) {
        anyhow::bail!(
            "placement.conf {}: [placement_database] connection = {url} is OpenStack \
             Placement's database, which allot cannot serve. Import it into allot's own \
             database first (`allot import --from-placement URL --database URL`, see \
             docs/migrate.md), then name that database with --database, \
             ALLOT_DATABASE or `database` in allot's config file.",
            path.display()
        );
    }
    let database = s.database.clone().unwrap_or_else(|| default_database(env));
    if database.trim().is_empty() {
        anyhow::bail!("{}: the database URL is empty", merged.source("database"));
    }
    Ok(database)
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
