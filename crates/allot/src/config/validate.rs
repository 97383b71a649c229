//! The merged settings checked and typed: [`settings`] turns the one [`super::Layer`] the
//! merge gives into [`Settings`], with the checks that span a value and its meaning
//! (bounds, a database that allot cannot serve, warnings about the settings
//! themselves), each error naming the source of the value it refuses.

use std::net::SocketAddr;

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

/// The checks that span a setting's value and its meaning, each error naming the
/// source of the value it refuses.
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
    // A blank policy file means none, so that a wrapper can clear it.
    let policy_file = s
        .policy_file
        .clone()
        .filter(|p| !p.to_string_lossy().trim().is_empty());
    let max_allocation_candidates = declared(s.max_allocation_candidates);
    if max_allocation_candidates == 0 {
        anyhow::bail!(
            "{}: max_allocation_candidates must be at least 1",
            from("max_allocation_candidates")
        );
    }
    // The bounds a request's own `expires_in` has.
    let max_expiry = allot_server::schemas::MAX_CLAIM_EXPIRES_IN as u64;
    let claim_expires_in = declared(s.claim_expires_in);
    if !(1..=max_expiry).contains(&claim_expires_in) {
        anyhow::bail!(
            "{}: claim_expires_in must be from 1 to {max_expiry} seconds",
            from("claim_expires_in")
        );
    }
    let claim_retention = declared(s.claim_retention);
    if claim_retention > max_expiry {
        anyhow::bail!(
            "{}: claim_retention must be at most {max_expiry} seconds",
            from("claim_retention")
        );
    }
    let claim_sweep_interval = declared(s.claim_sweep_interval);
    if !(1..=max_expiry).contains(&claim_sweep_interval) {
        anyhow::bail!(
            "{}: claim_sweep_interval must be from 1 to {max_expiry} seconds",
            from("claim_sweep_interval")
        );
    }
    let origins = clean(s.cors_allowed_origins.clone());
    Ok(Settings {
        bind,
        database,
        log,
        policy: declared(s.policy).into(),
        policy_file,
        auth: auth(&merged, bind, env)?,
        cors: (!origins.is_empty()).then(|| allot_server::Cors {
            allowed_origins: origins,
            allow_headers: clean(s.cors_allow_headers.clone()),
        }),
        randomize_allocation_candidates: declared(s.randomize_allocation_candidates),
        max_allocation_candidates,
        claim_expires_in: claim_expires_in as i64,
        claim_retention: claim_retention as i64,
        claim_sweep_interval: std::time::Duration::from_secs(claim_sweep_interval),
        placement_conf: merged.placement.clone(),
        // A blank path means none, as for the policy file.
        healthcheck_disable_file: s
            .healthcheck_disable_file
            .clone()
            .filter(|p| !p.to_string_lossy().trim().is_empty()),
        log_format: declared(s.log_format),
        slow_request: Some(declared(s.slow_request_ms) as u64)
            .filter(|&ms| ms > 0)
            .map(std::time::Duration::from_millis),
        shutdown_grace: std::time::Duration::from_secs(declared(s.shutdown_grace)),
        save_view_every: Some(declared(s.save_view_every))
            .filter(|&seconds| seconds > 0)
            .map(std::time::Duration::from_secs),
        metrics_bind: s.metrics_bind,
        metrics_providers: declared(s.metrics_providers),
        // Flags and variables were checked as they were read; a file's value is
        // checked here.
        advertise_url: s
            .advertise_url
            .as_deref()
            .map(parse_advertise_url)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{}: {e}", from("advertise_url")))?,
        tls: server_tls(&merged)?,
        warnings: warnings(&merged, bind),
    })
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
