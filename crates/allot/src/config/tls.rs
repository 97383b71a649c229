//! The certificates the settings name: the one `allot serve` serves HTTPS with, and
//! the client certificate it shows Keystone; each given as a certificate and its key,
//! both or neither.

use std::path::PathBuf;

use super::layers::Merged;

/// The files `allot serve` serves HTTPS with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// The certificate, its chain after it.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// `tls_cert` and `tls_key`, the certificate `allot serve` serves HTTPS with.
pub(super) fn server_tls(merged: &Merged) -> anyhow::Result<Option<ServerTlsFiles>> {
    let s = &merged.layer;
    let files = cert_and_key(merged, ("tls_cert", &s.tls_cert), ("tls_key", &s.tls_key))?;
    Ok(files.map(|(cert, key)| ServerTlsFiles { cert, key }))
}

/// A certificate and its key, given by the settings named: both or neither (a blank
/// path is none, so that a wrapper can clear one).
pub(super) fn cert_and_key(
    merged: &Merged,
    (cert_id, cert): (&str, &Option<PathBuf>),
    (key_id, key): (&str, &Option<PathBuf>),
) -> anyhow::Result<Option<(PathBuf, PathBuf)>> {
    let given = |p: &Option<PathBuf>| p.clone().filter(|p| !p.to_string_lossy().trim().is_empty());
    let flag = |id: &str| format!("--{}", id.replace('_', "-"));
    match (given(cert), given(key)) {
        (Some(cert), Some(key)) => Ok(Some((cert, key))),
        (None, None) => Ok(None),
        (Some(_), None) => anyhow::bail!(
            "{} gives a certificate but no key: add {}",
            merged.source(cert_id),
            flag(key_id)
        ),
        (None, Some(_)) => anyhow::bail!(
            "{} gives a key but no certificate: add {}",
            merged.source(key_id),
            flag(cert_id)
        ),
    }
}
