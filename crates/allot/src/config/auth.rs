//! How callers are authenticated, as the settings say: the mode, and what each mode
//! needs (the token file; Keystone's endpoint, service credentials and TLS). The
//! rule that keeps `noauth2` on loopback lives here.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::anyhow;

use super::layers::{self, Merged};
use super::tls::cert_and_key;
use super::validate::declared;
use super::{default_token_file, AuthMode};

/// How callers are authenticated, with what each mode needs.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Placement's `noauth2`.
    NoAuth2,
    /// The static token file.
    Tokens(PathBuf),
    /// Keystone.
    Keystone(Box<allot_server::auth::keystone::KeystoneConfig>),
}

/// The Keystone service password: `keystone_password`, or the first line of
/// `keystone_password_file`, whichever comes from the source of higher precedence
/// (both from one source: an error).
fn keystone_password(merged: &Merged) -> anyhow::Result<String> {
    let s = &merged.layer;
    let given = s.keystone_password.clone().filter(|p| !p.is_empty());
    let (from_value, from_file) = (
        merged.source("keystone_password"),
        merged.source("keystone_password_file"),
    );
    match (given, &s.keystone_password_file) {
        (Some(_), Some(_)) if from_value.rank() == from_file.rank() => {
            anyhow::bail!("{from_value} and {from_file} both give the Keystone password: keep one")
        }
        (Some(password), Some(_)) if from_value.rank() < from_file.rank() => Ok(password),
        (_, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| anyhow!("{from_file}: reading {}: {e}", file.display()))?;
            let password = text.lines().next().unwrap_or("").to_owned();
            if password.is_empty() {
                anyhow::bail!("{from_file}: {} holds no password", file.display());
            }
            Ok(password)
        }
        (password, None) => Ok(password.unwrap_or_default()),
    }
}

/// TLS to Keystone, from `keystone_cafile`, `keystone_certfile`/`keystone_keyfile`
/// and `keystone_insecure` (read by `Keystone::new`, for an https:// URL only).
fn keystone_tls(merged: &Merged) -> anyhow::Result<allot_tls::ClientTls> {
    let s = &merged.layer;
    let identity = cert_and_key(
        merged,
        ("keystone_certfile", &s.keystone_certfile),
        ("keystone_keyfile", &s.keystone_keyfile),
    )?
    .map(|(cert, key)| allot_tls::Identity { cert, key });
    Ok(allot_tls::ClientTls {
        roots: match &s.keystone_cafile {
            Some(file) => allot_tls::Roots::File(file.clone()),
            None => allot_tls::Roots::System,
        },
        check: if declared(s.keystone_insecure) {
            allot_tls::Check::Nothing
        } else {
            allot_tls::Check::Full
        },
        identity,
    })
}

/// The authentication mode and what it needs; refuses `noauth2` on an address other
/// than loopback unless `insecure_noauth` says so.
pub(super) fn auth(
    merged: &Merged,
    bind: SocketAddr,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Auth> {
    let s = &merged.layer;
    match declared(s.auth) {
        AuthMode::Noauth2 => {
            if !bind.ip().is_loopback() && !declared(s.insecure_noauth) {
                let how = match merged.source("auth") {
                    layers::Source::Default => "noauth2 (the default)".to_owned(),
                    source => format!("noauth2 (from {source})"),
                };
                anyhow::bail!(
                    "refusing to listen on {bind} with authentication mode {how}: in \
                     noauth2 every caller is whoever its X-Auth-Token says (`admin` is \
                     the admin), so anyone who can reach {bind} could read and change \
                     everything. Use --auth tokens or --auth keystone, listen on \
                     loopback (127.0.0.1 or ::1), or, on a network you trust \
                     completely, pass --insecure-noauth."
                );
            }
            Ok(Auth::NoAuth2)
        }
        AuthMode::Tokens => Ok(Auth::Tokens(
            s.token_file
                .clone()
                .unwrap_or_else(|| default_token_file(env)),
        )),
        AuthMode::Keystone => {
            let url = s.keystone_url.clone().unwrap_or_default();
            if url.trim().is_empty() {
                anyhow::bail!(
                    "--auth keystone needs the Identity endpoint: --keystone-url, \
                     ALLOT_KEYSTONE_URL or keystone_url in the config file"
                );
            }
            let password = keystone_password(merged)?;
            if password.is_empty() {
                anyhow::bail!(
                    "--auth keystone needs allot's service password: \
                     ALLOT_KEYSTONE_PASSWORD, keystone_password in the config file or \
                     --keystone-password-file"
                );
            }
            let domain = declared(s.keystone_domain.clone());
            let mut config = allot_server::auth::keystone::KeystoneConfig::new(
                &url,
                &declared(s.keystone_user.clone()),
                &password,
                &declared(s.keystone_project.clone()),
            );
            config.user_domain_name = domain.clone();
            config.project_domain_name = domain;
            config.cache_ttl = std::time::Duration::from_secs(declared(s.token_cache_ttl));
            config.tls = keystone_tls(merged)?;
            // Checked here, so that a bad URL stops the start with its reason.
            allot_server::auth::keystone::Keystone::new(config.clone())
                .map_err(|e| anyhow!("--auth keystone: {e}"))?;
            Ok(Auth::Keystone(Box::new(config)))
        }
    }
}
