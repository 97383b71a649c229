//! Certificates made at test time (feature `testing`): a certificate authority and
//! the certificates it signs, written as PEM files, for the tests of every crate
//! that speaks TLS. Never in a release build of `allot`.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A certificate authority whose files live in one folder.
pub struct TestCa {
    dir: PathBuf,
    name: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    /// A new authority called `name`, its certificate written to `DIR/NAME.pem`.
    pub fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("allot test CA {name}"));
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("the CA's certificate");
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).expect("writing the CA");
        TestCa {
            dir: dir.to_owned(),
            name: name.to_owned(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The authority's certificate (PEM): what a client trusts.
    pub fn cert(&self) -> PathBuf {
        self.dir.join(format!("{}.pem", self.name))
    }

    /// A certificate for `names` (DNS names or IP addresses) signed by this
    /// authority: `(certificate, key)`, written to `DIR/FILE.pem` and `DIR/FILE.key`.
    pub fn issue(&self, file: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("leaf parameters");
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("signing");
        let (cert_path, key_path) = (
            self.dir.join(format!("{file}.pem")),
            self.dir.join(format!("{file}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).expect("writing a certificate");
        std::fs::write(&key_path, key.serialize_pem()).expect("writing a key");
        (cert_path, key_path)
    }
}
