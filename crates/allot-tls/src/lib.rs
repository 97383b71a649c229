//! allot's TLS settings turned into rustls configurations, in one place for every
//! connection that uses TLS (issue 27):
//!
//! - the client side ([`ClientTls`]), for Keystone (`[keystone_authtoken]`'s `cafile`,
//!   `certfile`/`keyfile`, `insecure`), PostgreSQL (libpq's `sslmode` and
//!   `sslrootcert`) and MariaDB (PyMySQL's `ssl_ca`, `ssl_verify_cert`, ...; see
//!   below): which roots are trusted, how much of the server's certificate is
//!   checked ([`Check`]: libpq's `verify-full`, `verify-ca` and `require` are
//!   [`Check::Full`], [`Check::Chain`] and [`Check::Nothing`]), and an optional client
//!   certificate;
//! - the server side ([`ServerTls`]): the certificate and key allot serves HTTPS with,
//!   read from PEM files and read again by [`ServerTls::reload`] (SIGHUP), so that a
//!   certificate can rotate without a restart; a file that does not load keeps the old
//!   certificate in use.
//!
//! The cryptography is rustls's `ring` provider (see the workspace manifest for why
//! not its default). A certificate that does not verify is an error the caller shows;
//! nothing here ever falls back to plain text.
//!
//! # A driver that makes its own configuration: MariaDB
//!
//! TLS to MariaDB (issue 45; the URL's `ssl_*` arguments, read by allot-store's
//! `my_tls`) goes through mysql_async, which builds its rustls configuration itself
//! and takes no [`rustls::ClientConfig`], verifier or root store: its `SslOpts` holds
//! root certificates and a client identity (files or bytes) and two switches,
//! "accept invalid certificates" and "skip domain validation", which it applies with
//! a verifier of its own around webpki's. So for it this crate hands out the
//! material of a [`ClientTls`] rather than a configuration: the trusted roots, read
//! as for every other client ([`ClientTls::root_certificates`]: the system's or a
//! file's, never the driver's built-in Mozilla list), and the client certificate,
//! checked against its key ([`Identity::check`]) so that a bad file is named before
//! the driver reads it; [`Check`] becomes the two switches. The driver's
//! configuration takes the process's default provider, which
//! [`install_default_provider`] makes this crate's. One difference remains, and
//! the caller explains it: mysql_async 0.37.1 recognises a name mismatch by the text
//! of rustls's error, which no longer holds the word it looks for, so under
//! [`Check::Chain`] the name is checked all the same (blackbeam/mysql_async#404,
//! fixed upstream but not in a release yet): stricter than asked, never weaker.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

pub use rustls;

/// What went wrong turning TLS settings into a configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file that cannot be read or holds nothing usable.
    #[error("{path}: {what}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// The platform's CA certificates could not be read.
    #[error("the system's CA certificates: {0}")]
    Platform(String),
    /// rustls refused the material (a key that does not match its certificate).
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
}

/// The cryptography every configuration here uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes [`provider`] the process's default, for a driver that builds its own
/// configuration with rustls's defaults (mysql_async): without one, rustls picks it
/// from its crate features, and panics when both `ring` and `aws-lc-rs` are compiled
/// in. A default installed before (by this or anyone) is left as it is.
pub fn install_default_provider() {
    // An error means a default is there already; it is not this call's to replace.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Which certificate authorities a client trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system's (the files OpenSSL reads: `/etc/ssl/certs`, or `SSL_CERT_FILE`).
    System,
    /// Those of one PEM file (Keystone's `cafile`, libpq's `sslrootcert`).
    File(PathBuf),
}

/// How much of the server's certificate a client checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The chain up to a trusted root, and the host name (libpq's `verify-full`; the
    /// only check Keystone's client makes unless `insecure`).
    Full,
    /// The chain only (libpq's `verify-ca`: any certificate the roots signed).
    Chain,
    /// Nothing but the handshake's own signatures (libpq's `require`, Keystone's
    /// `insecure`): encrypted, open to a man in the middle.
    Nothing,
}

/// A client certificate and its key, PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The certificate, with its chain after it.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The TLS settings of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// Who is trusted.
    pub roots: Roots,
    /// How much is checked.
    pub check: Check,
    /// The certificate shown to a server that asks for one.
    pub identity: Option<Identity>,
}

impl Default for ClientTls {
    /// The system's roots, everything checked, no client certificate.
    fn default() -> Self {
        ClientTls {
            roots: Roots::System,
            check: Check::Full,
            identity: None,
        }
    }
}

impl ClientTls {
    /// The rustls configuration these settings describe (the files are read now).
    pub fn config(&self) -> Result<rustls::ClientConfig, TlsError> {
        let provider = provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let webpki = match self.check {
            Check::Nothing => None,
            Check::Full | Check::Chain => Some(
                WebPkiServerVerifier::builder_with_provider(
                    Arc::new(self.root_store()?),
                    provider.clone(),
                )
                .build()
                .map_err(|e| TlsError::Platform(e.to_string()))?,
            ),
        };
        let builder = match (self.check, webpki) {
            (Check::Full, Some(webpki)) => builder.with_webpki_verifier(webpki),
            (check, webpki) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Lenient {
                    chain: webpki.filter(|_| check == Check::Chain),
                    provider,
                })),
        };
        Ok(match &self.identity {
            Some(identity) => {
                let (certs, key) = identity_files(&identity.cert, &identity.key)?;
                builder.with_client_auth_cert(certs, key)?
            }
            None => builder.with_no_client_auth(),
        })
    }

    fn root_store(&self) -> Result<RootCertStore, TlsError> {
        let mut store = RootCertStore::empty();
        // Each was added to a store once already, so none is passed over here.
        store.add_parsable_certificates(self.root_certificates()?);
        Ok(store)
    }

    /// The certificates of the trusted authorities (the files are read now), each
    /// one a store takes: a file's, every one or an error that names the file; the
    /// system's, those that parse, at least one. For a driver that builds its own
    /// configuration (see the module's doc).
    pub fn root_certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        match &self.roots {
            Roots::File(path) => {
                let certs = certificates(path)?;
                for cert in &certs {
                    RootCertStore::empty()
                        .add(cert.clone())
                        .map_err(|e| TlsError::File {
                            path: path.clone(),
                            what: format!("not a CA certificate: {e}"),
                        })?;
                }
                Ok(certs)
            }
            Roots::System => {
                let found = rustls_native_certs::load_native_certs();
                let usable: Vec<_> = found
                    .certs
                    .into_iter()
                    .filter(|cert| RootCertStore::empty().add(cert.clone()).is_ok())
                    .collect();
                if usable.is_empty() {
                    let why = found
                        .errors
                        .first()
                        .map_or_else(|| "none found".to_owned(), ToString::to_string);
                    return Err(TlsError::Platform(why));
                }
                Ok(usable)
            }
        }
    }
}

impl Identity {
    /// Reads the certificate and its key and checks that they belong together: an
    /// error names the file at fault. For a driver that reads the files itself (see
    /// the module's doc), so that a bad file is named in these words first.
    pub fn check(&self) -> Result<(), TlsError> {
        certified_key(&self.cert, &self.key).map(drop)
    }
}

/// The rustls error under a driver's error, if a TLS handshake is why it failed:
/// tokio-rustls hands it over inside an `io::Error`, whose own `source` skips it, so
/// each level of the chain is looked into.
pub fn rustls_cause<'e>(e: &'e (dyn std::error::Error + 'static)) -> Option<&'e rustls::Error> {
    let mut next = Some(e);
    while let Some(error) = next {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(tls) = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(tls);
        }
        next = error.source();
    }
    None
}

/// A name of a certificate as rustls lists it in a name mismatch
/// (`DnsName("db")`, `IpAddress(10.0.0.1)`), as a person writes it.
pub fn presented_name(presented: &str) -> &str {
    ["DnsName(\"", "IpAddress("]
        .into_iter()
        .find_map(|prefix| presented.strip_prefix(prefix))
        .map_or(presented, |rest| {
            rest.trim_end_matches(')').trim_end_matches('"')
        })
}

/// A client configuration that trusts no certificate: for a connector that can
/// reach `https://` URLs but is only ever given `http://` ones.
pub fn trusting_no_one() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring offers the default protocol versions")
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth()
}

/// Every certificate of a PEM file, in order; at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |what: String| TlsError::File {
        path: path.to_owned(),
        what,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_error(e)))?;
    if certs.is_empty() {
        return Err(bad("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// A certificate chain and its key.
fn identity_files(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let certs = certificates(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
        path: key.to_owned(),
        what: match e {
            rustls::pki_types::pem::Error::NoItemsFound => "holds no PEM private key".into(),
            e => pem_error(e),
        },
    })?;
    Ok((certs, key))
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        e => format!("not PEM: {e:?}"),
    }
}

/// The checks short of [`Check::Full`]. With `chain` (libpq's `verify-ca`), the chain
/// must lead to a trusted root and the name is not looked at: webpki checks the chain
/// before the name, so a name mismatch is the one error forgiven. Without it (libpq's
/// `require`, Keystone's `insecure`), any certificate. Either way the handshake's
/// signatures are checked, so the connection is encrypted to whoever holds the key of
/// the certificate shown.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The certificate allot serves HTTPS with, and the files it came from.
#[derive(Debug)]
pub struct ServerTls {
    cert: PathBuf,
    key: PathBuf,
    current: ArcSwap<CertifiedKey>,
}

impl ServerTls {
    /// Reads the certificate chain and its key (PEM files); the key must match the
    /// certificate.
    pub fn open(cert: &Path, key: &Path) -> Result<Arc<Self>, TlsError> {
        let current = ArcSwap::from_pointee(certified_key(cert, key)?);
        Ok(Arc::new(ServerTls {
            cert: cert.to_owned(),
            key: key.to_owned(),
            current,
        }))
    }

    /// Reads the files again; the next handshake uses what they hold. A file that
    /// does not load (half written, a key for another certificate) leaves the
    /// certificate in use as it was.
    pub fn reload(&self) -> Result<(), TlsError> {
        self.current
            .store(Arc::new(certified_key(&self.cert, &self.key)?));
        Ok(())
    }

    /// The certificate file.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// A server configuration that offers `alpn` (most preferred first) and shows
    /// whatever certificate was loaded last.
    pub fn config(self: &Arc<Self>, alpn: &[&[u8]]) -> Result<rustls::ServerConfig, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }
}

impl ResolvesServerCert for ServerTls {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let (certs, key_der) = identity_files(cert, key)?;
    let signing = provider()
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| TlsError::File {
            path: key.to_owned(),
            what: format!("not a usable private key: {e}"),
        })?;
    let certified = CertifiedKey::new(certs, signing);
    certified.keys_match().map_err(|e| TlsError::File {
        path: key.to_owned(),
        what: format!("not the key of {}: {e}", cert.display()),
    })?;
    Ok(certified)
}

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(test)]
mod tests;
