//! TLS to MariaDB (issue 45), as `placement.conf`'s URLs ask for it: the one reading
//! of a MariaDB URL's TLS arguments for every MariaDB connection allot makes, the
//! store's engine (`allot serve`, `allot db migrate`, `allot import`/`export` with a
//! `mysql://` database) and the Placement importer and exporter of the
//! `allot-placement-db` crate ([`MyTls::from_params`] on the arguments of its URL).
//!
//! The arguments are those deployment tools write for PyMySQL through SQLAlchemy:
//!
//! | argument                    | meaning                                          |
//! |-----------------------------|--------------------------------------------------|
//! | `ssl_ca=FILE`               | the certificate authorities trusted (PEM)        |
//! | `ssl_cert=FILE`, `ssl_key=FILE` | a client certificate and its key (PEM; without `ssl_key`, the key is looked for in `ssl_cert`'s file, as Python's `ssl` does) |
//! | `ssl_verify_cert=BOOL`      | whether the certificate's chain is checked       |
//! | `ssl_verify_identity=BOOL`, `ssl_check_hostname=BOOL` | whether it must name the host (PyMySQL's, SQLAlchemy's) |
//! | `ssl=BOOL`                  | TLS with the checks by default                   |
//! | `ssl_disabled=BOOL`         | PyMySQL's switch off                              |
//! | `ssl_mode=MODE`             | mysqlclient's and MySQL's: `DISABLED`, `REQUIRED`, `VERIFY_CA`, `VERIFY_IDENTITY` |
//!
//! BOOL is `true`/`false` in any case (or `1`/`0`, `yes`/`no`, `on`/`off`, as
//! SQLAlchemy reads them). Any of these but the switches off asks for TLS, as it does
//! through SQLAlchemy and PyMySQL, where every `ssl_*` argument of a URL reaches the
//! driver as a non-empty text. What is checked, when TLS is asked for, is everything
//! unless turned off: the chain up to `ssl_ca` (or the system's roots, without one)
//! and the host name ([`Check::Full`]); `ssl_verify_identity=false` (or
//! `ssl_check_hostname=false`, `ssl_mode=VERIFY_CA`) the chain only
//! ([`Check::Chain`]); `ssl_verify_cert=false` (or `ssl_mode=REQUIRED` without
//! `ssl_ca`) nothing ([`Check::Nothing`]: encrypted, open to a man in the middle).
//!
//! Where allot departs from PyMySQL, it is stricter, never weaker:
//! - PyMySQL checks nothing unless given a CA (or `ssl_verify_cert`); allot checks
//!   against the system's roots then, as `ssl_verify_cert=true` does in PyMySQL;
//! - PyMySQL connects in plain text to a server that does not offer TLS; allot
//!   refuses ([`MyTls::explain`] says why);
//! - `ssl_mode=REQUIRED` with an `ssl_ca` checks the chain (libpq's rule for
//!   `sslmode=require`, as `pg_tls` reads it);
//! - a contradiction (`ssl_disabled=true` beside `ssl_ca`, `ssl_verify_identity=true`
//!   beside `ssl_verify_cert=false`) is an error, not a guess;
//! - what allot cannot honour is refused by name, never dropped: `ssl_capath` (a
//!   directory of hashed certificates), `ssl_key_password` (an encrypted key),
//!   `ssl_cipher` (an OpenSSL cipher list), `ssl_mode=PREFERRED` (the driver cannot
//!   fall back to plain text), any other `ssl*` or `tls*` argument, and TLS over a
//!   Unix socket (mysql_async never encrypts a socket, and would drop the request).
//!
//! # Where the checks are made
//!
//! mysql_async builds its own rustls configuration and takes none from allot (see
//! allot-tls's module doc): [`MyTls::ssl_opts`] hands it the material allot-tls reads
//! (the roots, never the driver's built-in list; the client certificate, checked
//! against its key) and sets its two switches from the [`Check`]. mysql_async 0.37.1
//! recognises a name mismatch by the text of rustls's error, which no longer says
//! what it looks for (blackbeam/mysql_async#404, fixed upstream after 0.37.1), so
//! under [`Check::Chain`] the name is checked all the same, and a mismatch is refused
//! with that reason ([`MyTls::explain`]).

use std::path::PathBuf;

use allot_tls::rustls;
use allot_tls::{Check, ClientTls, Identity, Roots, TlsError};
use mysql_async::{ClientIdentity, DriverError, SslOpts};

/// The TLS settings of one MariaDB connection, as its URL's arguments ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MyTls {
    /// What is trusted and checked; `None` when no TLS is asked for.
    pub client: Option<ClientTls>,
}

/// The arguments read here; any other `ssl*` or `tls*` argument is refused.
const KEYS: [&str; 9] = [
    "ssl_ca",
    "ssl_cert",
    "ssl_key",
    "ssl_verify_cert",
    "ssl_verify_identity",
    "ssl_check_hostname",
    "ssl",
    "ssl_disabled",
    "ssl_mode",
];

/// Whether a URL argument is about TLS (and so read, or refused, here).
pub fn is_tls_key(key: &str) -> bool {
    key.starts_with("ssl") || key.starts_with("tls")
}

/// The TLS arguments of a URL, as given (the last of each wins).
#[derive(Default)]
struct Given {
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    /// `ssl_verify_cert`.
    verify_cert: Option<bool>,
    /// `ssl_verify_identity` or `ssl_check_hostname`, and which.
    verify_identity: Option<(bool, &'static str)>,
    /// `ssl`.
    ssl: Option<bool>,
    /// `ssl_disabled`.
    disabled: Option<bool>,
    /// `ssl_mode`, upper case.
    mode: Option<String>,
}

impl MyTls {
    /// Reads the TLS settings from a URL's arguments (`params`: every argument, or
    /// only the TLS ones; the others are passed over). `over_socket`: the connection
    /// is to a Unix socket, where TLS is refused. Files are not read yet. The error
    /// says what is wrong, naming the argument.
    pub fn from_params<'a>(
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
        over_socket: bool,
    ) -> Result<MyTls, String> {
        let given = tls_arguments(params)?;
        let Some(asked_by) = asked_for(&given)? else {
            return Ok(MyTls { client: None });
        };
        if over_socket {
            return Err(format!(
                "{asked_by} asks for TLS over a Unix socket (unix_socket), which allot's \
                 driver never encrypts: a local socket needs no TLS, so drop the ssl_* \
                 arguments, or connect over TCP"
            ));
        }
        let check = check(&given)?;
        let identity = match (given.cert, given.key) {
            (Some(cert), key) => Some(Identity {
                // Python's `ssl` reads the key from the certificate's file when no
                // other is named.
                key: PathBuf::from(key.as_deref().unwrap_or(&cert)),
                cert: PathBuf::from(cert),
            }),
            (None, Some(_)) => {
                return Err("ssl_key without ssl_cert: name the certificate too".into())
            }
            (None, None) => None,
        };
        Ok(MyTls {
            client: Some(ClientTls {
                roots: given.ca.map_or(Roots::System, |ca| Roots::File(ca.into())),
                check,
                identity,
            }),
        })
    }

    /// The driver's TLS options (`None` when no TLS is asked for): the files are read
    /// now by allot-tls, and an error names the argument whose file is wrong. See the
    /// module's doc for what the driver is given, and why not a configuration.
    pub fn ssl_opts(&self) -> Result<Option<SslOpts>, String> {
        let Some(client) = &self.client else {
            return Ok(None);
        };
        // The driver builds its configuration with the process's default provider.
        allot_tls::install_default_provider();
        let roots = match (client.check, &client.roots) {
            // Nothing is checked: the system's roots would be read for nothing. An
            // `ssl_ca` named is read all the same (below), as PyMySQL reads it, so
            // that a wrong path is found now rather than when checks are turned on.
            (Check::Nothing, Roots::System) => Vec::new(),
            _ => client.root_certificates().map_err(|e| self.file_error(e))?,
        };
        let mut opts = SslOpts::default()
            // Without roots of allot's (nothing checked), the driver's built-in ones
            // stay, unused: its verifier refuses to be built on none.
            .with_disable_built_in_roots(!roots.is_empty())
            .with_root_certs(roots.into_iter().map(|c| c.to_vec().into()).collect())
            .with_danger_accept_invalid_certs(client.check == Check::Nothing)
            .with_danger_skip_domain_validation(client.check == Check::Chain);
        if let Some(identity) = &client.identity {
            identity.check().map_err(|e| self.file_error(e))?;
            opts = opts.with_client_identity(Some(ClientIdentity::new(
                identity.cert.clone().into(),
                identity.key.clone().into(),
            )));
        }
        Ok(Some(opts))
    }

    /// An error of reading the files, with the argument that named the file.
    fn file_error(&self, e: TlsError) -> String {
        crate::pg_tls::file_error(self.client.as_ref(), e, &self.words())
    }

    /// What a connection error means in the words of these settings, when TLS is why
    /// it failed (a certificate that does not verify, a server without TLS); `None`
    /// for any other error.
    pub fn explain(&self, e: &mysql_async::Error) -> Option<String> {
        self.client.as_ref()?;
        if let mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer) = e {
            return Some(
                "TLS: the server does not offer TLS (ssl_cert and ssl_key in its \
                 configuration: have_ssl must be YES), which the URL's ssl_* arguments \
                 ask for"
                    .into(),
            );
        }
        if let Some(tls) = allot_tls::rustls_cause(e) {
            return Some(format!("TLS: {}", self.describe(tls)));
        }
        match e {
            mysql_async::Error::Io(mysql_async::IoError::Tls(tls)) => Some(format!("TLS: {tls}")),
            _ => None,
        }
    }

    /// A rustls error, with the settings that led to it.
    fn describe(&self, e: &rustls::Error) -> String {
        crate::pg_tls::handshake_error(self.client.as_ref(), e, &self.words())
    }

    /// How PyMySQL's arguments name these settings.
    fn words(&self) -> crate::pg_tls::Words<'static> {
        crate::pg_tls::Words {
            engine: "MariaDB",
            names: ["ssl_ca", "ssl_cert", "ssl_key"],
            system_roots: "no ssl_ca given",
            name_hint: self.name_hint(),
        }
    }

    /// What to do about a name the certificate does not have.
    fn name_hint(&self) -> &'static str {
        match self.client.as_ref().map(|c| c.check) {
            Some(Check::Chain) => {
                "ssl_verify_identity=false asks not to check the name, but allot's driver \
                 (mysql_async 0.37.1) checks it all the same: connect by a name the \
                 certificate has (or check nothing: ssl_verify_cert=false)"
            }
            _ => "the name is checked (ssl_verify_identity): connect by a name the certificate has",
        }
    }
}

/// The TLS arguments among a URL's (the last of each wins); an `ssl*` or `tls*`
/// argument allot does not read is an error that names it.
fn tls_arguments<'a>(
    params: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Given, String> {
    let mut given = Given::default();
    for (key, value) in params {
        match key {
            "ssl_ca" => given.ca = Some(path(key, value)?),
            "ssl_cert" => given.cert = Some(path(key, value)?),
            "ssl_key" => given.key = Some(path(key, value)?),
            "ssl_verify_cert" => given.verify_cert = Some(boolean(key, value)?),
            "ssl_verify_identity" => {
                given.verify_identity = Some((boolean(key, value)?, "ssl_verify_identity"))
            }
            "ssl_check_hostname" => {
                given.verify_identity = Some((boolean(key, value)?, "ssl_check_hostname"))
            }
            "ssl" => given.ssl = Some(boolean(key, value)?),
            "ssl_disabled" => given.disabled = Some(boolean(key, value)?),
            "ssl_mode" => given.mode = Some(mode(value)?),
            key if is_tls_key(key) => return Err(unsupported(key)),
            _ => {}
        }
    }
    Ok(given)
}

/// Why a TLS argument allot does not read is refused.
fn unsupported(key: &str) -> String {
    let why = match key {
        "ssl_capath" => {
            "a directory of hashed CA certificates; name one PEM file with ssl_ca (the \
             directory's certificates, concatenated)"
        }
        "ssl_key_password" => {
            "an encrypted private key, which allot does not read; decrypt it (openssl pkey \
             -in KEY -out PLAIN) and name that with ssl_key"
        }
        "ssl_cipher" => {
            "an OpenSSL cipher list; allot's TLS (rustls) offers only its own safe suites, \
             so drop it"
        }
        _ => "",
    };
    if why.is_empty() {
        format!(
            "the TLS argument {key} is not one allot reads (it reads {})",
            KEYS.join(", ")
        )
    } else {
        format!("{key} is not supported: {why}")
    }
}

/// A file's path; empty is an error.
fn path(key: &str, value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Err(format!("{key} is empty: name a PEM file"));
    }
    Ok(value.to_owned())
}

/// A yes or no, as SQLAlchemy reads one (and Jinja writes Python's `True`).
fn boolean(key: &str, value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Ok(true),
        "false" | "0" | "no" | "off" | "f" | "n" => Ok(false),
        _ => Err(format!("invalid {key} {value:?}: expected true or false")),
    }
}

/// `ssl_mode`, checked and upper case.
fn mode(value: &str) -> Result<String, String> {
    let upper = value.to_ascii_uppercase();
    match upper.as_str() {
        "DISABLED" | "REQUIRED" | "VERIFY_CA" | "VERIFY_IDENTITY" => Ok(upper),
        "PREFERRED" => Err(
            "ssl_mode=PREFERRED is not supported: it falls back to plain text where the \
             server has no TLS, which allot's driver cannot; say REQUIRED (or VERIFY_CA, \
             VERIFY_IDENTITY) or DISABLED"
                .into(),
        ),
        _ => Err(format!(
            "invalid ssl_mode {value:?}: expected DISABLED, REQUIRED, VERIFY_CA or \
             VERIFY_IDENTITY"
        )),
    }
}

/// Whether TLS is asked for, and by which argument (for messages); `None` when it is
/// not, or is turned off. Turned off and asked for at once is an error.
fn asked_for(given: &Given) -> Result<Option<String>, String> {
    let off = [
        (given.disabled == Some(true)).then_some("ssl_disabled=true"),
        (given.ssl == Some(false)).then_some("ssl=false"),
        (given.mode.as_deref() == Some("DISABLED")).then_some("ssl_mode=DISABLED"),
    ]
    .into_iter()
    .flatten()
    .next();
    let asking = [
        given.ca.as_ref().map(|_| "ssl_ca"),
        given.cert.as_ref().map(|_| "ssl_cert"),
        given.key.as_ref().map(|_| "ssl_key"),
        given.verify_cert.map(|_| "ssl_verify_cert"),
        given.verify_identity.map(|(_, key)| key),
        (given.ssl == Some(true)).then_some("ssl=true"),
        given
            .mode
            .as_deref()
            .filter(|m| *m != "DISABLED")
            .map(|_| "ssl_mode"),
    ]
    .into_iter()
    .flatten()
    .next();
    match (off, asking) {
        (Some(off), Some(asking)) => Err(format!(
            "{off} turns TLS off and {asking} asks for it: keep the one meant"
        )),
        (_, Some(asking)) => Ok(Some(asking.to_owned())),
        (_, None) => Ok(None),
    }
}

/// What is checked when TLS is asked for: everything unless an argument turns a
/// check off (see the module's doc). `ssl_mode` sets what is checked by default; an
/// argument may add a check to it, and one that takes away a check a `VERIFY_*` mode
/// makes is an error, as is a name checked on a certificate whose chain is not.
fn check(given: &Given) -> Result<Check, String> {
    let (mode_cert, mode_identity) = match given.mode.as_deref() {
        // libpq's rule for `require`: a CA given is used.
        Some("REQUIRED") => (Some(given.ca.is_some()), Some(false)),
        Some("VERIFY_CA") => (Some(true), Some(false)),
        Some("VERIFY_IDENTITY") => (Some(true), Some(true)),
        _ => (None, None),
    };
    let said_identity = given.verify_identity.map(|(said, _)| said);
    let identity_key = given
        .verify_identity
        .map_or("ssl_verify_identity", |(_, key)| key);
    for (key, said, by_mode) in [
        ("ssl_verify_cert", given.verify_cert, mode_cert),
        (identity_key, said_identity, mode_identity),
    ] {
        if said == Some(false) && by_mode == Some(true) {
            return Err(format!(
                "{key}=false turns off a check that ssl_mode={} makes: keep the one meant",
                given.mode.as_deref().unwrap_or_default()
            ));
        }
    }
    let cert = given.verify_cert.or(mode_cert).unwrap_or(true);
    match (cert, said_identity.or(mode_identity)) {
        (true, Some(false)) => Ok(Check::Chain),
        (true, _) => Ok(Check::Full),
        (false, Some(true)) if said_identity == Some(true) => Err(format!(
            "{identity_key}=true checks the name on a certificate whose chain is not \
             checked (ssl_verify_cert=false, or ssl_mode=REQUIRED without ssl_ca): keep \
             the one meant"
        )),
        (false, _) => Ok(Check::Nothing),
    }
}

#[cfg(test)]
mod tests;
