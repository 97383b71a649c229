//! What the nodes of a cluster prove to each other (issue 46), with the key they
//! share ([`allot_store::ClusterKey`], kept in the cluster's database).
//!
//! Two keys are derived from it (HMAC-SHA256 of a label under the cluster key),
//! so that neither use can stand in for the other:
//! - **Forwarded writes** ([`Trust::prove`], [`Trust::verify`]): the node that
//!   forwards a write to the cluster's writer has authenticated the caller; it
//!   sends the identity it found, with an HMAC over that identity, the method,
//!   the path and query, a hash of the body, the time and a nonce. The writer
//!   takes that identity instead of authenticating the request's headers again
//!   (Keystone is asked once per write, not twice). A proof older or newer than
//!   [`SKEW_SECONDS`], or seen before (each nonce is taken once), proves nothing,
//!   and neither does a forged one: the request is then any client's.
//! - **Sealed values** ([`Trust::seal`], [`Trust::open`]): ChaCha20-Poly1305 under
//!   a key of their own, for what a node hands a client to bring back to any node
//!   (the web UI's session cookie).
//!
//! A process with no database key (tests, `Config::default`) makes a random one,
//! which only it knows: then nothing it forwards or seals is taken elsewhere.

use std::collections::HashMap;
use std::sync::Mutex;

use allot_store::ClusterKey;
use ring::{aead, hmac};
use sha2::Digest;

use crate::auth::{hex, now_unix, Identity};

/// How far a forwarded write's time may be from the writer's clock, either way:
/// the forward itself takes milliseconds, and nodes' clocks are kept by NTP.
pub const SKEW_SECONDS: i64 = 10;

/// The most nonces remembered at once (a node forwards far fewer writes within
/// twice the skew): past it, the oldest are forgotten first.
const MAX_NONCES: usize = 200_000;

/// The proof's version, the first field of its header.
const VERSION: &str = "v1";

/// The keys derived from the cluster key, and the nonces of the proofs taken
/// lately.
pub struct Trust {
    forward: hmac::Key,
    seal: aead::LessSafeKey,
    /// Nonce → the time after which its proof is too old anyway.
    seen: Mutex<HashMap<String, i64>>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a key.
        f.write_str("Trust(..)")
    }
}

impl Trust {
    /// The keys of a cluster.
    pub fn new(key: &ClusterKey) -> Trust {
        let root = hmac::Key::new(hmac::HMAC_SHA256, &key.0);
        let derive = |label: &[u8]| hmac::sign(&root, label);
        let forward = hmac::Key::new(
            hmac::HMAC_SHA256,
            derive(b"allot forwarded write v1").as_ref(),
        );
        let seal = aead::UnboundKey::new(
            &aead::CHACHA20_POLY1305,
            derive(b"allot sealed value v1").as_ref(),
        )
        .expect("an HMAC-SHA256 tag is a ChaCha20 key's 32 bytes");
        Trust {
            forward,
            seal: aead::LessSafeKey::new(seal),
            seen: Mutex::default(),
        }
    }

    /// The keys of a cluster of one process: a random key nobody else has.
    pub fn random() -> Trust {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source");
        Trust::new(&ClusterKey(key))
    }

    /// The value of [`crate::forward::FORWARDED`] for a write this node forwards
    /// for `identity`.
    pub fn prove(&self, identity: &Identity, method: &str, target: &str, body: &[u8]) -> String {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).expect("the OS random source");
        let nonce = hex(&nonce);
        let who = hex(&serde_json::to_vec(identity).expect("an identity is JSON"));
        let now = now_unix().to_string();
        let tag = hmac::sign(
            &self.forward,
            signed(method, target, body, &now, &nonce, &who).as_bytes(),
        );
        format!("{VERSION}.{now}.{nonce}.{who}.{}", hex(tag.as_ref()))
    }

    /// The identity a forwarded write's proof carries, if the proof is valid for
    /// this request (method, path and query, body), fresh, and not seen before.
    pub fn verify(&self, proof: &str, method: &str, target: &str, body: &[u8]) -> Option<Identity> {
        let mut fields = proof.split('.');
        let (Some(VERSION), Some(time), Some(nonce), Some(who), Some(tag), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return None;
        };
        let tag = unhex(tag)?;
        hmac::verify(
            &self.forward,
            signed(method, target, body, time, nonce, who).as_bytes(),
            &tag,
        )
        .ok()?;
        let at: i64 = time.parse().ok()?;
        let now = now_unix();
        if (now - at).abs() > SKEW_SECONDS || !self.first_time(nonce, now) {
            return None;
        }
        serde_json::from_slice(&unhex(who)?).ok()
    }

    /// Whether `nonce` is new; remembers it until its proof is too old anyway.
    fn first_time(&self, nonce: &str, now: i64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_NONCES {
            seen.retain(|_, until| *until >= now);
        }
        if seen.len() >= MAX_NONCES {
            // Every one still young: forget them (a replay in this moment is the
            // price, not a refusal of the nodes' writes).
            seen.clear();
        }
        seen.insert(nonce.to_owned(), now + 2 * SKEW_SECONDS)
            .is_none()
    }

    /// `plain` sealed under the cluster's sealing key: nonce and ciphertext, in
    /// URL-safe text (hex).
    pub fn seal(&self, plain: &[u8]) -> String {
        let mut nonce = [0u8; aead::NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the OS random source");
        let mut sealed = plain.to_vec();
        self.seal
            .seal_in_place_append_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::empty(),
                &mut sealed,
            )
            .expect("a value under 4 GiB seals");
        format!("{}{}", hex(&nonce), hex(&sealed))
    }

    /// What [`Trust::seal`] sealed, if `text` is a value sealed under this key and
    /// unchanged.
    pub fn open(&self, text: &str) -> Option<Vec<u8>> {
        let bytes = unhex(text)?;
        if bytes.len() < aead::NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(aead::NONCE_LEN);
        let nonce = aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .seal
            .open_in_place(nonce, aead::Aad::empty(), &mut sealed)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// What a proof's HMAC is over: every field on a line of its own (none can hold
/// a line break), the body by its SHA-256.
fn signed(method: &str, target: &str, body: &[u8], time: &str, nonce: &str, who: &str) -> String {
    let body = hex(&sha2::Sha256::digest(body));
    format!("allot forwarded write\n{method}\n{target}\n{body}\n{time}\n{nonce}\n{who}")
}

/// Lower-case or upper-case hex as bytes; `None` if it is not hex.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> Identity {
        Identity {
            user_id: "u".into(),
            project_id: Some("p".into()),
            roles: vec!["reader".into()],
            ..Identity::default()
        }
    }

    #[test]
    fn a_proof_holds_for_its_request_once_and_under_its_key_only() {
        let trust = Trust::random();
        let proof = trust.prove(&reader(), "PUT", "/x?y=1", b"{}");
        fn verify(t: &Trust, p: &str, m: &str, path: &str, body: &[u8]) -> Option<Identity> {
            t.verify(p, m, path, body)
        }
        // Another method, path, body or key: nothing.
        assert!(verify(&trust, &proof, "POST", "/x?y=1", b"{}").is_none());
        assert!(verify(&trust, &proof, "PUT", "/x?y=2", b"{}").is_none());
        assert!(verify(&trust, &proof, "PUT", "/x?y=1", b"{ }").is_none());
        assert!(verify(&Trust::random(), &proof, "PUT", "/x?y=1", b"{}").is_none());
        // Its own request: the identity, once.
        let identity = verify(&trust, &proof, "PUT", "/x?y=1", b"{}").unwrap();
        assert_eq!(identity.roles, ["reader"]);
        assert_eq!(identity.project_id.as_deref(), Some("p"));
        assert!(verify(&trust, &proof, "PUT", "/x?y=1", b"{}").is_none());
        // An identity swapped in under the same tag: nothing.
        let mut admin = reader();
        admin.roles = vec!["admin".into()];
        let fields: Vec<&str> = proof.split('.').collect();
        let who = hex(&serde_json::to_vec(&admin).unwrap());
        let forged = format!("v1.{}.{}.{who}.{}", fields[1], "0".repeat(32), fields[4]);
        assert!(verify(&trust, &forged, "PUT", "/x?y=1", b"{}").is_none());
        for junk in ["", "1", "v1....", "v1.x.y.z.w"] {
            assert!(verify(&trust, junk, "PUT", "/x?y=1", b"{}").is_none());
        }
    }

    #[test]
    fn a_stale_proof_proves_nothing() {
        let trust = Trust::random();
        let who = hex(&serde_json::to_vec(&reader()).unwrap());
        let then = (now_unix() - SKEW_SECONDS - 1).to_string();
        let tag = hmac::sign(
            &trust.forward,
            signed("PUT", "/x", b"", &then, "00", &who).as_bytes(),
        );
        let proof = format!("v1.{then}.00.{who}.{}", hex(tag.as_ref()));
        assert!(trust.verify(&proof, "PUT", "/x", b"").is_none());
    }

    #[test]
    fn sealed_values_open_under_their_key_only() {
        let trust = Trust::random();
        let sealed = trust.seal(b"secret");
        assert!(!sealed.contains(&hex(b"secret")));
        assert_eq!(trust.open(&sealed).unwrap(), b"secret");
        assert!(Trust::random().open(&sealed).is_none());
        let mut tampered = sealed.clone().into_bytes();
        let last = tampered.len() - 1;
        tampered[last] = if tampered[last] == b'0' { b'1' } else { b'0' };
        assert!(trust
            .open(std::str::from_utf8(&tampered).unwrap())
            .is_none());
        assert!(trust.open("zz").is_none());
    }
}
