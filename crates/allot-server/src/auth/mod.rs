//! Who is calling: the [`Authenticator`] chosen at start-up turns a request's headers
//! into an [`Identity`], or into an [`AuthError`] that the request middleware answers
//! with (401 with a `WWW-Authenticate` challenge, 400, or 503 with `Retry-After`).
//!
//! Three authenticators exist, one per `--auth` mode:
//! - [`NoAuth2`]: Placement's test mode, which believes what the caller says
//!   (`X-Auth-Token: USER[:PROJECT]`, `X-Roles`, `OpenStack-System-Scope`).
//! - [`tokens::StaticTokens`]: a file of hashed tokens, for small sites without
//!   Keystone; reloaded on SIGHUP.
//! - [`keystone::Keystone`]: tokens validated against an OpenStack Identity v3
//!   endpoint, as keystonemiddleware does, with a bounded cache.
//!
//! `context::around` knows only the trait: it asks once per request (discovery, `/`,
//! is never asked about, as in Placement) and renders the error if there is one.
//!
//! Whatever the mode, the token header is checked the same way first
//! ([`token_header`]): present, at most [`MAX_TOKEN_BYTES`], visible ASCII. A token
//! that fails this cannot be valid in any mode, so it is refused before any lookup,
//! hash or call to Keystone.

pub mod keystone;
pub mod noauth2;
pub mod tokens;

use std::future::Future;
use std::pin::Pin;

use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

pub use crate::context::Identity;
use crate::error::ApiError;
pub use noauth2::NoAuth2;

/// The longest token (and the longest identity header in `noauth2`) we look at.
/// Keystone's Fernet tokens are under 300 bytes and even PKI tokens stayed under
/// 8 KiB; anything longer is refused without being hashed or sent anywhere.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// What [`Authenticator::authenticate`] returns.
pub type AuthFuture<'a> = Pin<Box<dyn Future<Output = Result<Identity, AuthError>> + Send + 'a>>;

/// What [`Authenticator::password_login`] returns: a new token.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<String, AuthError>> + Send + 'a>>;

/// A person's password credentials, scoped to a project (the web UI's login form in
/// keystone mode).
#[derive(Clone, Default)]
pub struct PasswordLogin {
    /// The user's name.
    pub username: String,
    /// The user's password.
    pub password: String,
    /// The user's domain, by name.
    pub user_domain: String,
    /// The project the token is scoped to, by name.
    pub project: String,
    /// The project's domain, by name.
    pub project_domain: String,
}

impl std::fmt::Debug for PasswordLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        write!(f, "PasswordLogin({}@{})", self.username, self.project)
    }
}

/// Turns a request's headers into the caller's identity. One is chosen at start-up
/// and shared by every request.
pub trait Authenticator: Send + Sync + 'static {
    /// The caller, or why not.
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> AuthFuture<'a>;

    /// The `WWW-Authenticate` value sent with a 401 (RFC 9110 §11.6.1): where to get
    /// a token.
    fn challenge(&self) -> &str;

    /// The mode's name, for logs (`noauth2`, `tokens`, `keystone`).
    fn mode(&self) -> &'static str;

    /// Issues a token for a person's password, where the mode has an identity
    /// service that does (Keystone); None in the modes that have none. The web UI's
    /// login uses it; the token it gives is then checked like any other, by
    /// [`Authenticator::authenticate`], on every page.
    fn password_login<'a>(&'a self, _login: &'a PasswordLogin) -> Option<TokenFuture<'a>> {
        None
    }
}

impl std::fmt::Debug for dyn Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Authenticator({})", self.mode())
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No token at all: 401.
    Missing,
    /// A token that is malformed, unknown, expired or revoked: 401. The message says
    /// which only as far as it tells nothing about other tokens.
    Invalid(String),
    /// A header other than the token that cannot be read (non-ASCII, too long): 400.
    BadHeader(String),
    /// The identity service could not answer (unreachable, 5xx, bad reply): 503
    /// with `Retry-After`. Never an open door.
    Unavailable(String),
}

/// Seconds a client is told to wait after a 503 from an unreachable identity
/// service: long enough not to hammer it, short enough to recover fast.
pub const RETRY_AFTER_SECONDS: &str = "5";

impl AuthError {
    /// The response, before the middleware puts it in the envelope.
    pub fn into_response(self, challenge: &str) -> Response {
        // The status and wording are decided with every other error's, in
        // `crate::error`; the headers that go with them are decided here.
        let mut response = ApiError::from(&self).into_response();
        let headers = response.headers_mut();
        match self {
            AuthError::Missing | AuthError::Invalid(_) => {
                if let Ok(v) = HeaderValue::from_str(challenge) {
                    headers.insert("www-authenticate", v);
                }
            }
            AuthError::Unavailable(why) => {
                // The caller sees the reason too, but the operator reads the log (a
                // certificate that stopped verifying, Keystone down).
                tracing::warn!(reason = %why, "identity service unavailable: 503");
                headers.insert("retry-after", HeaderValue::from_static(RETRY_AFTER_SECONDS));
            }
            AuthError::BadHeader(_) => {}
        }
        response
    }
}

/// Reads an optional header that must be short visible ASCII; `Err` (400) if it is
/// there but unreadable.
pub fn text_header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, AuthError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    if value.len() > MAX_TOKEN_BYTES {
        return Err(AuthError::BadHeader(format!(
            "The {name} header is longer than {MAX_TOKEN_BYTES} bytes."
        )));
    }
    value.to_str().map(Some).map_err(|_| {
        AuthError::BadHeader(format!(
            "The {name} header must be visible ASCII characters."
        ))
    })
}

/// The caller's token (`X-Auth-Token`), checked the same way in every mode: absent
/// is [`AuthError::Missing`]; empty, longer than [`MAX_TOKEN_BYTES`] or not visible
/// ASCII is [`AuthError::Invalid`] (it cannot be anyone's token).
pub fn token_header(headers: &HeaderMap) -> Result<&str, AuthError> {
    let Some(value) = headers.get("x-auth-token") else {
        return Err(AuthError::Missing);
    };
    if value.len() > MAX_TOKEN_BYTES {
        return Err(AuthError::Invalid(format!(
            "the token is longer than {MAX_TOKEN_BYTES} bytes"
        )));
    }
    let token = value
        .to_str()
        .map_err(|_| AuthError::Invalid("the token is not visible ASCII".to_owned()))?
        .trim();
    if token.is_empty() {
        return Err(AuthError::Missing);
    }
    Ok(token)
}

/// Compares two byte strings in time that depends only on their lengths, so that
/// how long a comparison took tells nothing about how much of a secret matched.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // `black_box` keeps the optimiser from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// SHA-256 of a token, in lower-case hex: how static tokens are stored and how the
/// Keystone cache is keyed (so that neither holds a usable secret).
pub fn token_hash(token: &str) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(token.as_bytes()))
}

/// Bytes in lower-case hex (token hashes here, new tokens and ids in `allot token`).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Seconds since the Unix epoch, now.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Parses an RFC 3339 / ISO 8601 UTC time as Keystone writes it
/// (`2026-11-23T06:52:55.000000Z`, also without fraction, or with `+00:00`) into
/// seconds since the epoch. Offsets other than UTC are refused: Keystone writes none.
pub fn parse_utc(text: &str) -> Option<i64> {
    let t = text.trim();
    let t = t
        .strip_suffix('Z')
        .or_else(|| t.strip_suffix("+00:00"))
        .unwrap_or(t);
    let (date, time) = t.split_once('T')?;
    let mut d = date.split('-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    if d.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let time = time.split('.').next()?;
    let mut tm = time.split(':');
    let hour: i64 = tm.next()?.parse().ok()?;
    let minute: i64 = tm.next()?.parse().ok()?;
    let second: i64 = tm.next().unwrap_or("0").parse().ok()?;
    if tm.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Formats seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

// Howard Hinnant's algorithms for the proleptic Gregorian calendar.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        assert_eq!(parse_utc("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_utc("2026-11-23T06:52:55.000000Z"),
            Some(1_795_416_775)
        );
        assert_eq!(parse_utc("2026-11-23T06:52:55+00:00"), Some(1_795_416_775));
        assert_eq!(format_utc(1_795_416_775), "2026-11-23T06:52:55Z");
        for s in [0, 951_782_400, 4_102_444_799, 1_795_416_775] {
            assert_eq!(parse_utc(&format_utc(s)), Some(s));
        }
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "yesterday",
            "2026-11-23",
            "2026-11-23T25:00:00Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }

    #[test]
    fn comparison_and_hash() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn token_header_bounds() {
        let mut h = HeaderMap::new();
        assert_eq!(token_header(&h), Err(AuthError::Missing));
        h.insert("x-auth-token", HeaderValue::from_static("  "));
        assert_eq!(token_header(&h), Err(AuthError::Missing));
        h.insert(
            "x-auth-token",
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        assert!(matches!(token_header(&h), Err(AuthError::Invalid(_))));
        h.insert(
            "x-auth-token",
            HeaderValue::from_str(&"a".repeat(MAX_TOKEN_BYTES + 1)).unwrap(),
        );
        assert!(matches!(token_header(&h), Err(AuthError::Invalid(_))));
        h.insert("x-auth-token", HeaderValue::from_static("tok"));
        assert_eq!(token_header(&h), Ok("tok"));
    }
}
