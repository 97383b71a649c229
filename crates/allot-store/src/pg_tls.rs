//! TLS to PostgreSQL, as libpq does it (issue 27): the one reading of libpq's TLS
//! settings for every PostgreSQL connection allot makes, the store's engine (`allot
//! serve`, `allot db migrate`, `allot import`/`export` with a `postgres://` database:
//! [`split_url`]) and the Placement importer and exporter of the
//! `allot-placement-db` crate ([`PgTls::from_params`] on the arguments of its
//! SQLAlchemy URL).
//!
//! tokio-postgres knows only `sslmode=disable|prefer|require`, leaves every check of
//! the server's certificate to its TLS connector, and its URL parser refuses keys it
//! does not know (`sslrootcert`). So the TLS keys are taken out of the URL here and
//! the rest is handed to tokio-postgres; the settings become the driver's mode
//! (whether to ask for TLS, and whether a server that says no is accepted:
//! [`PgTls::apply`]) and allot-tls's [`ClientTls`] (what the rustls connector checks:
//! [`PgTls::connector`]). Read, in this order of precedence: the URL's arguments,
//! libpq's variables (`PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`,
//! `PGSSLNEGOTIATION`), libpq's defaults (`~/.postgresql/root.crt`,
//! `~/.postgresql/postgresql.crt` and `.key`):
//!
//! | `sslmode`                 | TLS                     | the server's certificate        |
//! |---------------------------|-------------------------|---------------------------------|
//! | `disable`                 | never                   | -                               |
//! | `allow`, `prefer` (default) | if the server offers it | not checked (but see below)   |
//! | `require`                 | always                  | not checked (but see below)     |
//! | `verify-ca`               | always                  | signed by `sslrootcert`         |
//! | `verify-full`             | always                  | signed, and names the host      |
//!
//! libpq's rule for the modes that do not verify: when a root file is there (an
//! `sslrootcert` given, or `~/.postgresql/root.crt` present), the chain is checked
//! against it, as `verify-ca` does. `sslrootcert=system` trusts the system's roots;
//! as in libpq 16, it makes `verify-full` the default and refuses any weaker mode (a
//! public CA signs certificates for anyone, so only the name makes it mean anything).
//! Over a Unix socket there is no TLS whatever the mode (libpq ignores `sslmode`
//! there, and the server never offers it).
//!
//! Where allot departs from libpq, it is stricter, never weaker:
//! - `allow` is `prefer` (libpq tries plain text first): the same servers are reached,
//!   with TLS whenever they offer it;
//! - `prefer` never retries in plain text after a failed handshake (libpq does): a
//!   certificate that does not verify is an error, not a reason to drop TLS;
//! - an `sslcert`, `sslkey` or `sslrootcert` named but missing is an error (libpq
//!   silently skips a missing `sslcert`);
//! - the libpq TLS keys allot does not implement (`sslcrl`, `sslpassword`,
//!   `ssl_min_protocol_version`, ...) are refused by name rather than ignored.

use std::path::PathBuf;

use allot_tls::rustls::{self, CertificateError};
use allot_tls::{Check, ClientTls, Identity, Roots, TlsError};
use tokio_postgres::config::{Host, SslMode as DriverMode, SslNegotiation};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// libpq: plain text, TLS if the server insists. Here: as [`SslMode::Prefer`].
    Allow,
    /// TLS if the server offers it, plain text if it does not (libpq's default).
    Prefer,
    /// TLS, or no connection.
    Require,
    /// TLS, with a certificate signed by a trusted root.
    VerifyCa,
    /// TLS, with a certificate signed by a trusted root for the host connected to.
    VerifyFull,
}

impl SslMode {
    /// Every mode, weakest first, as libpq spells them.
    pub const ALL: [SslMode; 6] = [
        SslMode::Disable,
        SslMode::Allow,
        SslMode::Prefer,
        SslMode::Require,
        SslMode::VerifyCa,
        SslMode::VerifyFull,
    ];

    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn parse(text: &str) -> Result<SslMode, String> {
        SslMode::ALL
            .into_iter()
            .find(|m| m.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "invalid sslmode {text:?}: expected disable, allow, prefer, require, \
                     verify-ca or verify-full"
                )
            })
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The TLS settings of one PostgreSQL connection, as libpq would read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgTls {
    /// The mode asked for (or libpq's default).
    pub mode: SslMode,
    /// What the TLS connector trusts and checks; `None` under `disable`.
    pub client: Option<ClientTls>,
    /// `sslnegotiation=direct` (PostgreSQL 17): TLS from the first byte, without the
    /// `SSLRequest` round trip.
    pub direct: bool,
}

/// The libpq keys read here; any other key that starts with `ssl` is refused.
const KEYS: [&str; 5] = [
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslnegotiation",
];

/// Whether a connection argument is one of libpq's TLS keys: `ssl*`, and
/// `requiressl` (`sslmode=require`'s old spelling, refused like the unknown ones).
fn is_tls_key(key: &str) -> bool {
    key.starts_with("ssl") || key == "requiressl"
}

/// The process's environment, as [`PgTls::from_params`] reads it: a variable that is
/// set but empty counts as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl PgTls {
    /// Reads the TLS settings from a connection's arguments (`params`: every
    /// argument, or only the TLS ones; the others are passed over), then `env`
    /// (libpq's `PGSSL*` variables and `HOME`; [`process_env`] for the process's
    /// own) and libpq's default files. Files are not read yet, only looked for
    /// where a default depends on whether one is there. The error says what is
    /// wrong, naming the argument.
    pub fn from_params<'a>(
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<PgTls, String> {
        let [mode, root, cert, key, negotiation] = tls_arguments(params)?;
        let setting = |given: Option<String>, var: &str| given.or_else(|| env(var));
        let mode = setting(mode, "PGSSLMODE");
        let root = setting(root, "PGSSLROOTCERT");
        let cert = setting(cert, "PGSSLCERT");
        let key = setting(key, "PGSSLKEY");
        let direct = direct_negotiation(setting(negotiation, "PGSSLNEGOTIATION").as_deref())?;
        let home = HomeFiles(env("HOME").map(PathBuf::from));
        let system = root.as_deref() == Some("system");
        let mode = ssl_mode(mode.as_deref(), system)?;
        if mode == SslMode::Disable {
            return Ok(PgTls {
                mode,
                client: None,
                direct,
            });
        }
        let roots = roots(mode, root, &home)?;
        let check = match (mode, &roots) {
            (SslMode::VerifyFull, _) => Check::Full,
            (SslMode::VerifyCa, _) => Check::Chain,
            // libpq: a root file makes the weaker modes check the chain too.
            (_, Some(_)) => Check::Chain,
            (_, None) => Check::Nothing,
        };
        Ok(PgTls {
            mode,
            client: Some(ClientTls {
                roots: roots.unwrap_or(Roots::System),
                check,
                identity: identity(cert, key, &home)?,
            }),
            direct,
        })
    }

    /// Sets the driver's side of these settings on `config`: whether it asks for
    /// TLS (`disable`: never; `allow` and `prefer`: and accepts a server that says
    /// no; the others: or fails) and how it negotiates. A connection over Unix
    /// sockets only never asks (libpq ignores `sslmode` there).
    pub fn apply(&self, config: &mut Config) {
        let hosts = config.get_hosts();
        let sockets_only = !hosts.is_empty() && hosts.iter().all(is_socket);
        config.ssl_mode(match self.mode {
            _ if sockets_only => DriverMode::Disable,
            SslMode::Disable => DriverMode::Disable,
            SslMode::Allow | SslMode::Prefer => DriverMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverMode::Require,
        });
        config.ssl_negotiation(if self.direct {
            SslNegotiation::Direct
        } else {
            SslNegotiation::Postgres
        });
    }

    /// The TLS connector these settings describe, for tokio-postgres's `connect`
    /// (and the `postgres` crate's): the files are read now, and an error names the
    /// argument whose file is wrong. Under `disable` the connector is never used (the
    /// driver does not ask for TLS), but the driver's type wants one.
    pub fn connector(&self) -> Result<MakeRustlsConnect, String> {
        let client = self.client.clone().unwrap_or(ClientTls {
            roots: Roots::System,
            check: Check::Nothing,
            identity: None,
        });
        let mut config = client.config().map_err(|e| self.file_error(e))?;
        // What libpq 17 sends, and what a server's direct TLS negotiation requires.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(MakeRustlsConnect::new(config))
    }

    /// An error of reading the files, with the argument that named the file.
    fn file_error(&self, e: TlsError) -> String {
        file_error(self.client.as_ref(), e, &WORDS)
    }

    /// What a connection error means, in the words of these settings, when TLS is
    /// why it failed (a certificate that does not verify, a server without TLS under
    /// a mode that requires it); `None` for any other error.
    pub fn explain(&self, e: &tokio_postgres::Error) -> Option<String> {
        let why = match allot_tls::rustls_cause(e) {
            Some(tls) => self.describe(tls),
            None => {
                let cause = std::error::Error::source(e)?.to_string();
                if cause != "server does not support TLS" {
                    return None;
                }
                "the server does not offer TLS (ssl = on in its postgresql.conf), which \
                 this sslmode requires"
                    .to_owned()
            }
        };
        Some(format!("TLS (sslmode={}): {why}", self.mode))
    }

    /// A rustls error, with the settings that led to it.
    fn describe(&self, e: &rustls::Error) -> String {
        handshake_error(self.client.as_ref(), e, &WORDS)
    }
}

/// The TLS arguments among a connection's, in the order of [`KEYS`] (the last of
/// each wins, as in libpq and tokio-postgres); a libpq TLS key that allot does not
/// read is an error that names it.
fn tls_arguments<'a>(
    params: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<[Option<String>; KEYS.len()], String> {
    let mut given: [Option<String>; KEYS.len()] = Default::default();
    for (key, value) in params {
        if let Some(i) = KEYS.iter().position(|k| *k == key) {
            // The last one wins, as in libpq and tokio-postgres.
            given[i] = Some(value.to_owned());
        } else if key == "sslcompression" {
            // Ignored by libpq since PostgreSQL 14: TLS compression is never used.
        } else if is_tls_key(key) {
            return Err(format!(
                "the libpq setting {key} is not supported by allot (it reads {})",
                KEYS.join(", ")
            ));
        }
    }
    Ok(given)
}

/// `sslnegotiation`: whether TLS starts with the first byte (`direct`) rather than
/// after the `SSLRequest` round trip (`postgres`, the default).
fn direct_negotiation(setting: Option<&str>) -> Result<bool, String> {
    match setting {
        None | Some("postgres") => Ok(false),
        Some("direct") => Ok(true),
        Some(other) => Err(format!(
            "invalid sslnegotiation {other:?}: expected postgres or direct"
        )),
    }
}

/// `sslmode`, or its default: `verify-full` with the system's roots
/// (`sslrootcert=system`), `prefer` otherwise.
fn ssl_mode(setting: Option<&str>, system: bool) -> Result<SslMode, String> {
    match setting {
        Some(text) => SslMode::parse(text),
        None if system => Ok(SslMode::VerifyFull),
        None => Ok(SslMode::Prefer),
    }
}

/// libpq's files in the home directory (`~/.postgresql/`), for what was not given;
/// `None` where `HOME` is not set.
struct HomeFiles(Option<PathBuf>);

impl HomeFiles {
    /// The default file `name`, where there is a home directory to look in.
    fn file(&self, name: &str) -> Option<PathBuf> {
        self.0.as_ref().map(|h| h.join(".postgresql").join(name))
    }
}

/// `sslrootcert` (under a mode other than `disable`): the certificate authorities
/// the server's certificate is checked against, or `None` where there are none and
/// `mode` does not verify. `system` only with `verify-full`; a verifying mode
/// without a root file, given or default, is an error.
fn roots(mode: SslMode, root: Option<String>, home: &HomeFiles) -> Result<Option<Roots>, String> {
    let system = root.as_deref() == Some("system");
    if system && mode != SslMode::VerifyFull {
        return Err(format!(
            "sslrootcert=system needs sslmode=verify-full, not {mode}: the system's \
             certificate authorities sign certificates for anyone, so only the host \
             name makes the check mean something"
        ));
    }
    let verifies = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
    Ok(match root {
        Some(_) if system => Some(Roots::System),
        Some(file) => Some(Roots::File(PathBuf::from(file))),
        None => match home.file("root.crt") {
            Some(file) if file.exists() => Some(Roots::File(file)),
            file if verifies => {
                let looked = match file {
                    Some(file) => format!("the default, {}, does not exist", file.display()),
                    None => "HOME is not set, so there is no default".to_owned(),
                };
                return Err(format!(
                    "sslmode={mode} checks the server's certificate against the \
                     certificate authorities of sslrootcert, and none was given \
                     ({looked}): name a PEM file with sslrootcert=FILE, use the \
                     system's with sslrootcert=system, or choose an sslmode that \
                     does not verify (require)"
                ));
            }
            _ => None,
        },
    })
}

/// `sslcert` and `sslkey`: the client certificate and its key, if any (a key
/// without a certificate is an error; a certificate without a key takes the
/// default key file). Neither given: libpq's default certificate, when there is
/// one.
fn identity(
    cert: Option<String>,
    key: Option<String>,
    home: &HomeFiles,
) -> Result<Option<Identity>, String> {
    match (cert, key) {
        (Some(cert), key) => {
            let key = key
                .map(PathBuf::from)
                .or_else(|| home.file("postgresql.key"));
            let Some(key) = key else {
                return Err(
                    "sslcert needs its private key: sslkey=FILE (HOME is not set, so \
                     there is no default)"
                        .into(),
                );
            };
            Ok(Some(Identity {
                cert: PathBuf::from(cert),
                key,
            }))
        }
        (None, Some(_)) => Err("sslkey without sslcert: name the certificate too".into()),
        // libpq's default client certificate, when there is one.
        (None, None) => Ok(match home.file("postgresql.crt") {
            Some(cert) if cert.exists() => Some(Identity {
                key: cert.with_extension("key"),
                cert,
            }),
            _ => None,
        }),
    }
}

#[cfg(unix)]
fn is_socket(host: &Host) -> bool {
    matches!(host, Host::Unix(_))
}

#[cfg(not(unix))]
fn is_socket(_: &Host) -> bool {
    false
}

/// Takes libpq's TLS arguments out of a `postgres://` (or `postgresql://`) URL:
/// returns the URL tokio-postgres can parse (every other argument kept as written)
/// and the TLS settings ([`PgTls::from_params`] on the arguments taken, with `env`).
/// The query starts at the first `?` after the credentials, as tokio-postgres reads
/// it; the arguments taken are percent-decoded.
pub fn split_url(
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, PgTls), String> {
    let scheme = ["postgres://", "postgresql://"]
        .into_iter()
        .find(|p| url.starts_with(p))
        .map_or(0, str::len);
    let after = &url[scheme..];
    let credentials = after.find('@').map_or(0, |at| at + 1);
    let Some(question) = after[credentials..].find('?') else {
        return Ok((url.to_owned(), PgTls::from_params([], env)?));
    };
    let (base, query) = url.split_at(scheme + credentials + question);
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for part in query[1..].split('&').filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        let key = decode(key)?;
        if is_tls_key(&key) {
            taken.push((key, decode(value)?));
        } else {
            kept.push(part);
        }
    }
    let tls = PgTls::from_params(taken.iter().map(|(k, v)| (k.as_str(), v.as_str())), env)?;
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, tls))
}

fn decode(text: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("{text:?}: a percent-escape in it is not UTF-8"))
}

/// How libpq's arguments name the TLS settings.
const WORDS: Words<'static> = Words {
    engine: "PostgreSQL",
    names: ["sslrootcert", "sslcert", "sslkey"],
    system_roots: "sslrootcert=system",
    name_hint: "sslmode=verify-full checks the name: connect by a name the certificate has",
};

/// An error of reading a TLS setting's file, named by the URL argument that gave
/// the file, for either server engine; a TLS error of another kind says the
/// engine's name.
pub(crate) fn file_error(client: Option<&ClientTls>, e: TlsError, words: &Words<'_>) -> String {
    let names = words.names;
    let TlsError::File { path, what } = &e else {
        return format!("TLS to {}: {e}", words.engine);
    };
    let argument = if client.is_some_and(|c| c.roots == Roots::File(path.clone())) {
        names[0]
    } else if client
        .and_then(|c| c.identity.as_ref())
        .is_some_and(|i| &i.cert == path)
    {
        names[1]
    } else {
        names[2]
    };
    format!("{argument} {}: {what}", path.display())
}

/// How a server engine's URL spells its TLS settings, for the errors both engines
/// explain alike ([`file_error`], [`handshake_error`]).
pub(crate) struct Words<'a> {
    /// The engine, as an error names it.
    pub engine: &'a str,
    /// The arguments of the roots, the client certificate and its key.
    pub names: [&'a str; 3],
    /// What the roots are when no file is named.
    pub system_roots: &'a str,
    /// What to do about a certificate that is not for the host name.
    pub name_hint: &'a str,
}

/// A failed TLS handshake (a rustls error) in the words of the URL's settings, for
/// either server engine.
pub(crate) fn handshake_error(
    client: Option<&ClientTls>,
    e: &rustls::Error,
    words: &Words<'_>,
) -> String {
    let [roots_name, cert_name, key_name] = words.names;
    match e {
        rustls::Error::InvalidCertificate(why) => match why {
            CertificateError::UnknownIssuer => {
                let roots = match client.map(|c| &c.roots) {
                    Some(Roots::File(path)) => {
                        format!("a certificate authority of {roots_name} {}", path.display())
                    }
                    _ => format!(
                        "any of the system's certificate authorities ({})",
                        words.system_roots
                    ),
                };
                format!("the server's certificate is not signed by {roots}")
            }
            CertificateError::NotValidForNameContext {
                expected,
                presented,
            } => {
                let names = if presented.is_empty() {
                    "none".to_owned()
                } else {
                    presented
                        .iter()
                        .map(|n| allot_tls::presented_name(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(
                    "the server's certificate is not for the host name {} (it names \
                     {names}); {}",
                    expected.to_str(),
                    words.name_hint
                )
            }
            CertificateError::NotValidForName => format!(
                "the server's certificate is not for the host name connected to; {}",
                words.name_hint
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the server's certificate has expired".to_owned()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet (is the clock right?)".to_owned()
            }
            other => format!("the server's certificate was refused: {other:?}"),
        },
        rustls::Error::AlertReceived(alert) => {
            let hint = match client.and_then(|c| c.identity.as_ref()) {
                Some(identity) => format!(
                    " (does it accept the client certificate of {cert_name} {}?)",
                    identity.cert.display()
                ),
                None => format!(" (does it require a client certificate? {cert_name}, {key_name})"),
            };
            format!("the server refused the TLS handshake: {alert:?}{hint}")
        }
        other => format!("the TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests;
