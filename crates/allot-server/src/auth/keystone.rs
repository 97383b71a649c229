//! `keystone` mode: the caller's `X-Auth-Token` is validated against an OpenStack
//! Identity v3 endpoint, as keystonemiddleware's `auth_token` does.
//!
//! - allot first gets a token of its own (the *service token*) with the configured
//!   password credentials (`POST {auth_url}/v3/auth/tokens`, project-scoped), and
//!   gets a new one a minute before it expires (half-way through the life of a
//!   token that lives under two minutes), or at once if Keystone stops accepting it
//!   (401 on a validation: retried once with a fresh one).
//! - Each caller token is checked with `GET {auth_url}/v3/auth/tokens`
//!   (`X-Auth-Token`: the service token, `X-Subject-Token`: the caller's). 200 gives
//!   the user, the project and its domain (or the domain of a domain-scoped token),
//!   the role names and `system: {all: true}`; 404 (unknown, expired, revoked) or a
//!   401 that a fresh service token does not cure is a 401 to the caller. Keystone
//!   unreachable, slow (past the timeout), answering 5xx or something unreadable is a
//!   503 with `Retry-After`: never a 500, never an open door.
//! - Validations are cached, keyed by the token's SHA-256 (the cache holds no usable
//!   token), for the configured time (default 5 minutes) and never past the token's
//!   `expires_at`; the cache holds a bounded number of entries (when full, expired
//!   entries go first, then everything: a refill costs one validation per caller). As
//!   with keystonemiddleware's cache, a token revoked in Keystone may keep working
//!   here until its entry's time is up.
//! - `X-Service-Token`, as keystonemiddleware honours it: when a request carries one
//!   (a service such as Nova acting for a user), it is validated too, and an invalid
//!   one is a 401. When it is valid and carries one of the service roles (`service`
//!   by default), the user's token is validated with `allow_expired=1`, so that a
//!   long operation a service started for a user does not fail when the user's token
//!   expires half-way (Keystone still refuses tokens past its expired-token window,
//!   and revoked ones). The identity is always the user's: the service token's roles
//!   are not added to it.
//!
//! - An `https://` endpoint is reached over TLS (rustls, through `allot_tls`): the
//!   system's roots or `cafile`, a client certificate if given, and no check at all
//!   only with `insecure` (keystonemiddleware's options of the same names). A
//!   certificate that does not verify stops the start ([`Keystone::check_tls`]) and,
//!   at run time, is a 503 whose logged reason says so; never a retry in plain text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::HeaderMap;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::{
    now_unix, parse_utc, text_header, token_hash, token_header, AuthError, AuthFuture,
    Authenticator, Identity, PasswordLogin, TokenFuture,
};

/// The default time a validation is cached.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(300);
/// The default bound on cached validations.
pub const DEFAULT_CACHE_ENTRIES: usize = 10_000;
/// How long one call to Keystone may take before the caller gets a 503.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest Keystone answer read (a token body with a large catalog stays far
/// below this; the validation asks for no catalog).
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// A service token is renewed this long before it expires (or half-way through its
/// life, if it lives less than twice this: see [`renew_at`]).
const RENEW_BEFORE_SECONDS: i64 = 60;

/// When a service token issued at `now` and expiring at `expires_at` is renewed: a
/// minute before it expires, or half-way for a short-lived one. A fixed minute
/// would renew a token that lives under a minute before every validation.
fn renew_at(now: i64, expires_at: i64) -> i64 {
    expires_at - RENEW_BEFORE_SECONDS.min((expires_at - now) / 2)
}

/// Where Keystone is and who allot is to it.
#[derive(Clone)]
pub struct KeystoneConfig {
    /// The identity endpoint, `http://HOST[:PORT][/PATH]` (a trailing `/v3` is
    /// allowed and ignored).
    pub auth_url: String,
    /// allot's service user.
    pub username: String,
    /// Its password.
    pub password: String,
    /// The project its token is scoped to.
    pub project_name: String,
    /// The user's domain (by name).
    pub user_domain_name: String,
    /// The project's domain (by name).
    pub project_domain_name: String,
    /// How long a validation is cached (never past the token's expiry); zero turns
    /// the cache off.
    pub cache_ttl: Duration,
    /// The most validations cached.
    pub cache_entries: usize,
    /// How long one call to Keystone may take.
    pub timeout: Duration,
    /// Roles a service token must carry for `allow_expired` (keystonemiddleware's
    /// `service_token_roles`).
    pub service_roles: Vec<String>,
    /// TLS to an `https://` endpoint (`cafile`, `certfile`/`keyfile`, `insecure`).
    pub tls: allot_tls::ClientTls,
}

impl std::fmt::Debug for KeystoneConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password stays out of logs and error messages.
        f.debug_struct("KeystoneConfig")
            .field("auth_url", &self.auth_url)
            .field("username", &self.username)
            .field("project_name", &self.project_name)
            .field("cache_ttl", &self.cache_ttl)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl KeystoneConfig {
    /// The defaults, for an endpoint and allot's credentials.
    pub fn new(auth_url: &str, username: &str, password: &str, project_name: &str) -> Self {
        KeystoneConfig {
            auth_url: auth_url.to_owned(),
            username: username.to_owned(),
            password: password.to_owned(),
            project_name: project_name.to_owned(),
            user_domain_name: "Default".to_owned(),
            project_domain_name: "Default".to_owned(),
            cache_ttl: DEFAULT_CACHE_TTL,
            cache_entries: DEFAULT_CACHE_ENTRIES,
            timeout: DEFAULT_TIMEOUT,
            service_roles: vec!["service".to_owned()],
            tls: allot_tls::ClientTls::default(),
        }
    }
}

/// A validated token, as cached.
#[derive(Debug, Clone)]
struct Validated {
    identity: Identity,
    expires_at: i64,
}

/// The `keystone` authenticator.
pub struct Keystone {
    config: KeystoneConfig,
    /// `{auth_url}/v3/auth/tokens`.
    tokens_url: Uri,
    /// The same with `?allow_expired=1`, for a user's token behind a service token.
    tokens_url_allow_expired: Uri,
    challenge: String,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// allot's own token and when to renew it ([`renew_at`]). A tokio mutex:
    /// renewing it awaits Keystone, and the requests that need it meanwhile wait for
    /// that one renewal.
    service_token: tokio::sync::Mutex<Option<(String, i64)>>,
    /// Token hash → (validation, cached until).
    cache: Mutex<HashMap<String, (Validated, i64)>>,
}

impl std::fmt::Debug for Keystone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password or a token.
        write!(f, "Keystone({})", self.config.auth_url)
    }
}

impl Keystone {
    /// Checks the configuration (an `http://` or `https://` URL, credentials present,
    /// the TLS files readable); makes no call yet, so that allot starts while Keystone
    /// is down (requests get 503 until it is back).
    pub fn new(config: KeystoneConfig) -> Result<Keystone, String> {
        let base = config.auth_url.trim().trim_end_matches('/');
        let base = base.strip_suffix("/v3").unwrap_or(base);
        let https = base.starts_with("https://");
        if !https && !base.starts_with("http://") {
            return Err(format!(
                "the Keystone URL {base:?} must start with http:// or https://"
            ));
        }
        let url = |suffix: &str| -> Result<Uri, String> {
            format!("{base}/v3/auth/tokens{suffix}")
                .parse()
                .map_err(|e| format!("the Keystone URL {base:?} is not a URL: {e}"))
        };
        let tokens_url = url("")?;
        let tokens_url_allow_expired = url("?allow_expired=1")?;
        for (what, value) in [
            ("user", &config.username),
            ("password", &config.password),
            ("project", &config.project_name),
        ] {
            if value.is_empty() {
                return Err(format!("keystone mode needs allot's service {what}"));
            }
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.timeout));
        connector.enforce_http(false);
        // An http:// endpoint never reaches the TLS configuration: it is built (and
        // its files read) only for https://.
        let tls = match https {
            true => config
                .tls
                .config()
                .map_err(|e| format!("TLS to Keystone: {e}"))?,
            false => allot_tls::trusting_no_one(),
        };
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let http = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Keystone {
            challenge: format!("Keystone uri=\"{base}\""),
            tokens_url,
            tokens_url_allow_expired,
            http,
            service_token: tokio::sync::Mutex::new(None),
            cache: Mutex::new(HashMap::new()),
            config,
        })
    }

    /// At start, for an `https://` endpoint: one request to it, so that a certificate
    /// that does not verify (the wrong `cafile`, a name it does not carry) stops the
    /// start with its reason. Keystone being down or slow is not an error here (the
    /// requests get 503 until it answers): the call's outcome other than a TLS
    /// failure is given back for the log.
    pub async fn check_tls(&self) -> Result<Option<String>, String> {
        if self.tokens_url.scheme_str() != Some("https") {
            return Ok(None);
        }
        let request = Request::get(self.tokens_url.clone())
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(self.config.timeout, self.http.request(request)).await {
            Ok(Ok(_)) => Ok(None),
            Ok(Err(e)) if is_tls_failure(&e) => Err(format!(
                "TLS to Keystone at {}: {}",
                self.tokens_url,
                causes(&e)
            )),
            Ok(Err(e)) => Ok(Some(format!("cannot reach Keystone yet: {}", causes(&e)))),
            Err(_) => Ok(Some("Keystone did not answer in time yet".to_owned())),
        }
    }

    /// One call to Keystone within the timeout: status, headers and body (JSON or
    /// `Null`). Transport failures and timeouts are [`AuthError::Unavailable`].
    async fn call(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, HeaderMap, Value), AuthError> {
        let work = async {
            let response = self.http.request(request).await.map_err(|e| {
                AuthError::Unavailable(format!("cannot reach Keystone: {}", causes(&e)))
            })?;
            let (parts, body) = response.into_parts();
            let bytes = Limited::new(body, MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| AuthError::Unavailable(format!("reading Keystone's answer: {e}")))?
                .to_bytes();
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            Ok((parts.status, parts.headers, value))
        };
        tokio::time::timeout(self.config.timeout, work)
            .await
            .map_err(|_| {
                AuthError::Unavailable(format!(
                    "Keystone did not answer within {} s",
                    self.config.timeout.as_secs_f64()
                ))
            })?
    }

    /// `POST /v3/auth/tokens` for a project-scoped token by password: how allot gets
    /// its own service token and how the web UI logs a person in.
    fn password_request(&self, login: &PasswordLogin) -> Result<Request<Full<Bytes>>, AuthError> {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": login.username, "domain": {"name": login.user_domain},
                "password": login.password}}},
            "scope": {"project": {"name": login.project,
                "domain": {"name": login.project_domain}}}}});
        Request::builder()
            .method(Method::POST)
            .uri(self.tokens_url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| AuthError::Unavailable(e.to_string()))
    }

    /// allot's service token, renewed if it is about to expire or `stale` is the one
    /// Keystone just refused.
    async fn service_token(&self, stale: Option<&str>) -> Result<String, AuthError> {
        let mut held = self.service_token.lock().await;
        if let Some((token, renew)) = held.as_ref() {
            let refused = stale.is_some_and(|s| s == token);
            if !refused && *renew > now_unix() {
                return Ok(token.clone());
            }
        }
        let c = &self.config;
        let request = self.password_request(&PasswordLogin {
            username: c.username.clone(),
            password: c.password.clone(),
            user_domain: c.user_domain_name.clone(),
            project: c.project_name.clone(),
            project_domain: c.project_domain_name.clone(),
        })?;
        let (status, headers, value) = self.call(request).await?;
        if !status.is_success() {
            tracing::error!(%status, "Keystone refused allot's service credentials");
            return Err(AuthError::Unavailable(format!(
                "Keystone refused allot's own credentials ({status})"
            )));
        }
        let token = headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| AuthError::Unavailable("Keystone issued no X-Subject-Token".into()))?
            .to_owned();
        let expires_at = value["token"]["expires_at"]
            .as_str()
            .and_then(parse_utc)
            .ok_or_else(|| AuthError::Unavailable("Keystone's token has no expires_at".into()))?;
        *held = Some((token.clone(), renew_at(now_unix(), expires_at)));
        Ok(token)
    }

    /// Validates a token with Keystone (not the cache).
    async fn validate(&self, token: &str, allow_expired: bool) -> Result<Validated, AuthError> {
        let uri = if allow_expired {
            &self.tokens_url_allow_expired
        } else {
            &self.tokens_url
        };
        let mut refused: Option<String> = None;
        for _attempt in 0..2 {
            let service = self.service_token(refused.as_deref()).await?;
            let request = Request::builder()
                .method(Method::GET)
                .uri(uri.clone())
                .header("x-auth-token", &service)
                .header("x-subject-token", token)
                .header("accept", "application/json")
                .body(Full::new(Bytes::new()))
                .map_err(|e| AuthError::Unavailable(e.to_string()))?;
            let (status, _, value) = self.call(request).await?;
            match status {
                StatusCode::OK => return parse_token(&value, allow_expired),
                StatusCode::NOT_FOUND => {
                    return Err(AuthError::Invalid(
                        "the token is unknown, expired or revoked".into(),
                    ))
                }
                // Keystone no longer takes our token (revoked, restarted with new
                // keys): once more with a fresh one.
                StatusCode::UNAUTHORIZED => refused = Some(service),
                s if s.is_server_error() => {
                    return Err(AuthError::Unavailable(format!("Keystone answered {s}")))
                }
                s => {
                    tracing::warn!(status = %s, "unexpected answer from Keystone");
                    return Err(AuthError::Invalid(format!(
                        "Keystone did not accept the token ({s})"
                    )));
                }
            }
        }
        tracing::error!("Keystone refuses allot's service token even fresh");
        Err(AuthError::Invalid(
            "the identity service refused to validate the token".into(),
        ))
    }

    /// The cached validation of a token, if any and still good.
    fn cached(&self, key: &str, now: i64) -> Option<Validated> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|(v, until)| *until > now && v.expires_at > now)
            .map(|(v, _)| v.clone())
    }

    fn remember(&self, key: String, v: &Validated, now: i64) {
        if self.config.cache_ttl.is_zero() || self.config.cache_entries == 0 {
            return;
        }
        let until = (now + self.config.cache_ttl.as_secs() as i64).min(v.expires_at);
        if until <= now {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= self.config.cache_entries {
            cache.retain(|_, (_, u)| *u > now);
            if cache.len() >= self.config.cache_entries {
                cache.clear();
            }
        }
        cache.insert(key, (v.clone(), until));
    }

    /// A token's validation, from the cache or from Keystone.
    async fn check(&self, token: &str, allow_expired: bool) -> Result<Validated, AuthError> {
        let now = now_unix();
        // Validations with allow_expired are kept apart: they admit what the plain
        // one refuses.
        let key = format!(
            "{}{}",
            token_hash(token),
            if allow_expired { "+x" } else { "" }
        );
        if let Some(v) = self.cached(&key, now) {
            return Ok(v);
        }
        let v = self.validate(token, allow_expired).await?;
        self.remember(key, &v, now);
        Ok(v)
    }

    /// A project-scoped token for a person's password (the web UI's login):
    /// `POST /v3/auth/tokens` as for allot's own token. Keystone's 401 (a wrong name,
    /// password or project) is [`AuthError::Invalid`], with no more detail than
    /// Keystone gives; the new token is not cached here, since the first page that
    /// uses it validates it like any other.
    async fn issue(&self, login: &PasswordLogin) -> Result<String, AuthError> {
        let request = self.password_request(login)?;
        let (status, headers, _) = self.call(request).await?;
        if status == StatusCode::UNAUTHORIZED
            || status == StatusCode::BAD_REQUEST
            || status == StatusCode::NOT_FOUND
            || status == StatusCode::FORBIDDEN
        {
            return Err(AuthError::Invalid(
                "Keystone refused the user, password or project".into(),
            ));
        }
        if !status.is_success() {
            return Err(AuthError::Unavailable(format!(
                "Keystone answered {status} to a login"
            )));
        }
        headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| AuthError::Unavailable("Keystone issued no X-Subject-Token".into()))
    }

    async fn authenticate_headers(&self, headers: &HeaderMap) -> Result<Identity, AuthError> {
        let token = token_header(headers)?;
        let service = text_header(headers, "x-service-token")?.map(str::trim);
        let allow_expired = match service.filter(|s| !s.is_empty()) {
            None => false,
            Some(service) => {
                let v = self.check(service, false).await.map_err(|e| match e {
                    AuthError::Invalid(_) | AuthError::Missing => {
                        AuthError::Invalid("the service token is not valid".into())
                    }
                    other => other,
                })?;
                self.config
                    .service_roles
                    .iter()
                    .any(|r| v.identity.has_role(r))
            }
        };
        Ok(self.check(token, allow_expired).await?.identity)
    }
}

/// Reads Keystone's token body (`{"token": {...}}`) into an identity.
fn parse_token(body: &Value, allow_expired: bool) -> Result<Validated, AuthError> {
    let bad = |what: &str| AuthError::Unavailable(format!("Keystone's token body has no {what}"));
    let token = body.get("token").ok_or_else(|| bad("token"))?;
    let expires_at = token["expires_at"]
        .as_str()
        .and_then(parse_utc)
        .ok_or_else(|| bad("expires_at"))?;
    // Keystone answers 404 for an expired token itself; this guards against a clock
    // or a proxy that says otherwise.
    if !allow_expired && expires_at <= now_unix() {
        return Err(AuthError::Invalid("the token has expired".into()));
    }
    let user_id = token["user"]["id"]
        .as_str()
        .ok_or_else(|| bad("user id"))?
        .to_owned();
    let project_id = token["project"]["id"].as_str().map(str::to_owned);
    let domain_id = token["project"]["domain"]["id"]
        .as_str()
        .or_else(|| token["domain"]["id"].as_str())
        .map(str::to_owned);
    let roles = token["roles"]
        .as_array()
        .map(|roles| {
            roles
                .iter()
                .filter_map(|r| r["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let system_scope = token["system"]["all"].as_bool() == Some(true);
    Ok(Validated {
        identity: Identity {
            user_id,
            project_id: if system_scope { None } else { project_id },
            roles,
            system_scope,
            domain_id,
        },
        expires_at,
    })
}

/// An error and its causes, outermost first (hyper's own message says only "client
/// error (Connect)"; the certificate's problem is a few causes down).
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

/// Whether a failed call failed in the TLS handshake (rustls refused the certificate,
/// or the server refused ours).
fn is_tls_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(cause) = source {
        if cause.is::<allot_tls::rustls::Error>() {
            return true;
        }
        // An io::Error's `source` skips the error it wraps (hyper-rustls wraps
        // tokio-rustls's io::Error, which wraps rustls's, in another): look inside.
        source = match cause.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as _),
            None => cause.source(),
        };
    }
    false
}

impl Authenticator for Keystone {
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> AuthFuture<'a> {
        Box::pin(self.authenticate_headers(headers))
    }

    fn challenge(&self) -> &str {
        &self.challenge
    }

    fn mode(&self) -> &'static str {
        "keystone"
    }

    fn password_login<'a>(&'a self, login: &'a PasswordLogin) -> Option<TokenFuture<'a>> {
        Some(Box::pin(self.issue(login)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_tokens_are_renewed_a_minute_early_or_half_way() {
        // Keystone's default hour: a minute before it expires.
        assert_eq!(renew_at(1000, 1000 + 3600), 1000 + 3540);
        // A 20 s token is used for 10 s, not renewed at every validation.
        assert_eq!(renew_at(1000, 1020), 1010);
        assert_eq!(renew_at(1000, 1000 + 120), 1000 + 60);
        // Already expired (a clock ahead of Keystone's): renewed at once.
        assert!(renew_at(1000, 990) <= 1000);
    }

    #[test]
    fn token_bodies() {
        let future = super::super::format_utc(now_unix() + 3600);
        let body = json!({"token": {"expires_at": future, "user": {"id": "u1"},
            "project": {"id": "p1", "domain": {"id": "default"}},
            "roles": [{"id": "r", "name": "member"}, {"id": "s", "name": "reader"}]}});
        let v = parse_token(&body, false).unwrap();
        assert_eq!(v.identity.user_id, "u1");
        assert_eq!(v.identity.project_id.as_deref(), Some("p1"));
        assert_eq!(v.identity.domain_id.as_deref(), Some("default"));
        assert_eq!(v.identity.roles, ["member", "reader"]);
        assert!(!v.identity.system_scope);

        let body = json!({"token": {"expires_at": future, "user": {"id": "u1"},
            "system": {"all": true}, "roles": [{"name": "admin"}]}});
        let v = parse_token(&body, false).unwrap();
        assert!(v.identity.system_scope);
        assert_eq!(v.identity.project_id, None);

        let past = json!({"token": {"expires_at": "2000-01-01T00:00:00Z", "user": {"id": "u"}}});
        assert!(matches!(
            parse_token(&past, false),
            Err(AuthError::Invalid(_))
        ));
        assert!(parse_token(&past, true).is_ok());
        assert!(matches!(
            parse_token(&json!({}), false),
            Err(AuthError::Unavailable(_))
        ));
    }

    #[test]
    fn urls_and_credentials_are_checked() {
        let e = Keystone::new(KeystoneConfig::new("ftp://k", "u", "p", "service")).unwrap_err();
        assert!(e.contains("http:// or https://"), "{e}");
        assert!(Keystone::new(KeystoneConfig::new("http://k:5000/v3", "u", "p", "s")).is_ok());
        assert!(Keystone::new(KeystoneConfig::new("http://k", "u", "", "s")).is_err());
        // https:// reads its CA file at once: a missing one is named.
        let mut config = KeystoneConfig::new("https://k", "u", "p", "service");
        config.tls.roots = allot_tls::Roots::File("/nonexistent/ca.pem".into());
        let e = Keystone::new(config).unwrap_err();
        assert!(
            e.contains("TLS to Keystone") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
    }
}
