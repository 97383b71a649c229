//! The web UI's sessions, and [`Viewer`], the logged-in caller of a page.
//!
//! A session lives in its cookie, sealed under the cluster's key
//! ([`crate::cluster::Trust::seal`], ChaCha20-Poly1305): a random id, the
//! credentials the API would take (the token, and in `noauth2` the roles), the
//! CSRF token, and when it was made and last used. Every node of the cluster
//! (they share the key, kept in the database) opens it, and so does a node
//! restarted; nothing of it is kept on the server, so no token is kept anywhere it
//! did not go before (the browser sent it in the login form; the cookie holds it
//! encrypted). The cookie is `HttpOnly` (no script reads it), `SameSite=Strict` (no
//! other site's page sends it), `Path=/ui` (the API's own routes never see it, so
//! they take no cookie at all and keep their behaviour), `Secure` over HTTPS.
//!
//! A session ends [`IDLE_SECONDS`] after it was last used or [`LIFETIME_SECONDS`]
//! after it was made. Its last use is written into the cookie again (a
//! `Set-Cookie`, by [`refresh`]) at most once every [`REFRESH_SECONDS`]: the idle
//! expiry costs no write anywhere per page view. A logout ends the session on every
//! node: it writes the hash of the session's id, until the session's end, through
//! the store (`Change::RevokeSession`, in the change log, so every node's view has
//! it, a restarted one too); a cookie whose id is revoked opens no page. Expired
//! revocations are forgotten with each new one.
//!
//! Every page re-checks the stored credentials through the server's one
//! [`crate::auth::Authenticator`] and judges each action with the API's own
//! [`crate::policy::authorize`], on a [`Ctx`] like the API's: a token revoked or
//! expired (static file reloaded, Keystone's answer) ends the session at the next
//! page, and a reader sees what the API shows a reader.
//!
//! State-changing forms (logout) carry the session's CSRF token, and every POST must
//! come from this origin ([`same_origin`]): a cross-origin form post is refused
//! before anything else is read.

use std::sync::{Arc, Mutex};

use axum::extract::{FromRequestParts, Request};
use axum::http::{header, request::Parts, HeaderMap, HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use sha2::Digest;

use crate::auth::{now_unix, AuthError, Identity};
use crate::cluster::Trust;
use crate::context::{Arrival, Ctx};
use crate::policy::{authorize, Action};
use crate::AppState;

use super::UiError;

/// The session cookie's name.
pub const COOKIE: &str = "allot_ui";
/// A session unused this long is over.
pub const IDLE_SECONDS: i64 = 3600;
/// A session older than this is over, however used.
pub const LIFETIME_SECONDS: i64 = 12 * 3600;
/// How stale a cookie's last use may be before a page view writes it again.
pub const REFRESH_SECONDS: i64 = 60;
/// The longest cookie value read (a sealed session with a token of at most
/// [`crate::auth::MAX_TOKEN_BYTES`] is shorter; browsers keep at most 4 KiB).
const MAX_COOKIE_BYTES: usize = 40 * 1024;

/// What a session cookie holds, sealed.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Session {
    /// 32 random bytes in hex; its hash names the session in a revocation.
    id: String,
    /// The request headers the API would authenticate (`x-auth-token`, and in
    /// `noauth2` `x-roles`), by name.
    credentials: Vec<(String, String)>,
    /// The token forms must send back.
    csrf: String,
    created: i64,
    last_seen: i64,
}

impl Session {
    fn live(&self, now: i64) -> bool {
        now - self.last_seen < IDLE_SECONDS && now - self.created < LIFETIME_SECONDS
    }

    /// The hash a revocation of this session names.
    fn hash(&self) -> String {
        crate::auth::hex(&sha2::Sha256::digest(self.id.as_bytes()))
    }

    fn credentials(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in &self.credentials {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.insert(name, value);
            }
        }
        headers
    }
}

/// Seals and opens sessions with the cluster's key (one per application, in
/// [`crate::Config::ui`]). Cloning shares it.
#[derive(Clone)]
pub struct Sessions(Arc<Trust>);

impl Default for Sessions {
    /// Under a key of this process only.
    fn default() -> Self {
        Sessions(Arc::new(Trust::random()))
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a key.
        f.write_str("Sessions(..)")
    }
}

/// 32 bytes of the OS's random source, in hex.
pub fn random_id() -> Result<String, UiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| UiError::Unavailable(format!("the OS random source: {e}")))?;
    Ok(crate::auth::hex(&bytes))
}

impl Sessions {
    /// Sessions sealed with the cluster's keys.
    pub fn new(trust: Arc<Trust>) -> Sessions {
        Sessions(trust)
    }

    fn seal(&self, session: &Session) -> String {
        self.0
            .seal(&serde_json::to_vec(session).expect("a session is JSON"))
    }

    /// The session a cookie value holds, if it was sealed with this key (live or
    /// not).
    fn read(&self, cookie: &str) -> Option<Session> {
        serde_json::from_slice(&self.0.open(cookie)?).ok()
    }

    /// Opens a session for `credentials`; the cookie's value.
    pub fn open(&self, credentials: HeaderMap) -> Result<String, UiError> {
        let now = now_unix();
        let credentials = credentials
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        Ok(self.seal(&Session {
            id: random_id()?,
            credentials,
            csrf: random_id()?,
            created: now,
            last_seen: now,
        }))
    }

    /// The live session `cookie` holds, unless it was logged out (on any node:
    /// `view` has every node's logouts).
    fn live(&self, cookie: &str, view: &allot_core::State, now: i64) -> Option<Session> {
        self.read(cookie)
            .filter(|s| s.live(now) && !view.session_revoked(&s.hash()))
    }

    /// Whether `sent` is the CSRF token of the session `cookie` holds (compared in
    /// constant time).
    pub fn csrf_matches(&self, cookie: &str, sent: &str) -> bool {
        self.read(cookie)
            .is_some_and(|s| crate::auth::constant_time_eq(s.csrf.as_bytes(), sent.as_bytes()))
    }

    /// Ends the session `cookie` holds on every node: its id's hash is revoked
    /// until the session's end, through the store. Nothing to do for a cookie that
    /// holds no live session.
    ///
    /// A node that may not write for itself (on MariaDB, one without the writer's
    /// lease) has the writer end it instead, through the writer's own logout form
    /// with the session's CSRF token ([`crate::forward::relay_form`]): a
    /// revocation written twice is kept once, so a write that failed after it was
    /// made is no harm either.
    pub async fn close(&self, app: &AppState, cookie: &str) -> Result<(), UiError> {
        let Some(session) = self.read(cookie).filter(|s| s.live(now_unix())) else {
            return Ok(());
        };
        let hash = session.hash();
        let until = session.created + LIFETIME_SECONDS;
        let written = app
            .write(allot_store::WriteKind::Other, move |_, now| {
                Ok((
                    (),
                    vec![allot_core::Change::RevokeSession { hash, until, now }],
                ))
            })
            .await;
        let Err(e) = written else { return Ok(()) };
        let form = format!("csrf={}", session.csrf);
        let cookie = format!("{COOKIE}={cookie}");
        match crate::forward::relay_form(app, "/ui/logout", &cookie, form).await {
            // The writer's logout answers with the way to the login page.
            Some(status) if status == axum::http::StatusCode::SEE_OTHER => Ok(()),
            _ => Err(UiError::Unavailable(format!(
                "the logout could not be written: {e:?}"
            ))),
        }
    }
}

/// The session cookie's value a request carries, if any.
pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| {
            !v.is_empty() && v.len() <= MAX_COOKIE_BYTES && v.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// The `Set-Cookie` value that carries a session (an empty value with `Max-Age=0`
/// clears it).
pub fn cookie(id: &str, https: bool) -> HeaderValue {
    let max_age = if id.is_empty() { 0 } else { LIFETIME_SECONDS };
    let secure = if https { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("allot_ui=; Path=/ui; Max-Age=0"))
}

/// Where [`Viewer`] leaves a session's cookie written again with its new last use,
/// for [`refresh`] to send.
#[derive(Clone, Default)]
struct Refreshed(Arc<Mutex<Option<HeaderValue>>>);

/// Middleware of the UI's routes: sends the cookie a page's [`Viewer`] wrote again
/// (its last use moved on, at most once every [`REFRESH_SECONDS`]), unless the
/// answer sets the cookie itself (a login, a logout).
pub async fn refresh(mut req: Request, next: Next) -> Response {
    let slot = Refreshed::default();
    req.extensions_mut().insert(slot.clone());
    let mut response = next.run(req).await;
    let value = slot.0.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(value) = value {
        if !response.headers().contains_key(header::SET_COOKIE) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
    }
    response
}

/// Whether a state-changing request was sent by a page of this site (issue 46):
/// - a browser's `Sec-Fetch-Site` decides when there is one: `same-origin` is
///   enough, anything else (`cross-site`, `same-site`, `none`) is refused;
/// - else `Origin` must name this service: `public_url` (`--public-url`) when the
///   operator set one, else the address the connection came in on (`http://` or
///   `https://` as served, then `IP:PORT` as the server's socket has it);
/// - a request with neither header is refused: every browser of the last years
///   sends one of them with a form, so only a client that is no browser sends
///   neither, and it can use the API instead.
///
/// Never the request's own `Host`: a DNS-rebinding page makes the browser send its
/// own name there, and `Origin` then matches it.
pub fn same_origin(parts: &Parts, public_url: Option<&str>) -> bool {
    let headers = &parts.headers;
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    match public_url {
        Some(public) => origin.eq_ignore_ascii_case(public),
        None => parts.extensions.get::<Arrival>().is_some_and(|a| {
            let scheme = if a.https { "https" } else { "http" };
            origin == format!("{scheme}://{}", a.local)
        }),
    }
}

/// Whether the connection came in on a loopback address (`noauth2` logins are taken
/// only there).
pub fn on_loopback(parts: &Parts) -> bool {
    parts
        .extensions
        .get::<Arrival>()
        .is_some_and(|a| a.local.ip().is_loopback())
}

/// Whether the connection is HTTPS (the cookie is then `Secure`).
pub fn over_https(parts: &Parts) -> bool {
    parts.extensions.get::<Arrival>().is_some_and(|a| a.https)
}

/// Authenticates stored credentials the way the API authenticates a request, and
/// gives the context its handlers judge policy on.
pub async fn context(app: &AppState, credentials: &HeaderMap) -> Result<Ctx, AuthError> {
    let identity: Identity = app.config.auth.authenticate(credentials).await?;
    Ok(Ctx {
        request_id: format!("req-{}", uuid::Uuid::new_v4()),
        version: crate::microversion::MAX,
        identity: Some(identity),
        accept: None,
        policy_rules: app.config.policy_file.as_ref().map(|f| f.current()),
    })
}

/// The logged-in caller of a page: the session's id and CSRF token, and the API's
/// context for its identity. Extracting it is the login check: a request without a
/// live session is sent to the login page (a GET) or refused (anything else).
pub struct Viewer {
    /// The API's context: the identity, the microversion (the latest), the policy
    /// file's rules of the moment.
    pub ctx: Ctx,
    /// The server's settings and view.
    pub app: AppState,
    /// The session cookie's value.
    pub session: String,
    /// The token state-changing forms send back.
    pub csrf: String,
    /// Whether the connection is HTTPS.
    pub https: bool,
}

impl Viewer {
    /// Whether the API would allow the caller `action` (the same check, on the same
    /// rules).
    pub fn may(&self, action: Action) -> bool {
        authorize(&self.ctx, self.app.config.settings.policy, action).is_ok()
    }

    /// Refuses the page (403, naming the rule) unless every action is allowed.
    pub fn require(&self, actions: &[Action]) -> Result<(), UiError> {
        for &action in actions {
            if !self.may(action) {
                return Err(UiError::Forbidden(action.name()));
            }
        }
        Ok(())
    }

    /// Whether the API would show the caller a provider by uuid (its name among
    /// it): pages whose own rule is another name providers by uuid otherwise.
    pub fn sees_providers(&self) -> bool {
        self.may(Action::ProvidersShow)
    }

    /// Who is logged in, for the page's header.
    pub fn who(&self) -> String {
        let Some(identity) = &self.ctx.identity else {
            return String::new();
        };
        match &identity.project_id {
            Some(project) => format!("{} ({project})", identity.user_id),
            None if identity.system_scope => format!("{} (system)", identity.user_id),
            None => identity.user_id.clone(),
        }
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, UiError> {
        let login = || {
            if parts.method == Method::GET || parts.method == Method::HEAD {
                let next = parts
                    .uri
                    .path_and_query()
                    .map_or("/ui", |p| p.as_str())
                    .to_owned();
                UiError::Login { next }
            } else {
                UiError::Unauthorized
            }
        };
        let Some(id) = session_id(&parts.headers).map(str::to_owned) else {
            return Err(login());
        };
        let now = now_unix();
        let sessions = &app.config.ui;
        let Some(mut session) = sessions.live(&id, &app.host.read(), now) else {
            return Err(login());
        };
        // The token is no longer good (revoked, expired): neither is the session.
        let ctx = match context(app, &session.credentials()).await {
            Ok(ctx) => ctx,
            Err(AuthError::Unavailable(why)) => return Err(UiError::Unavailable(why)),
            Err(_) => return Err(login()),
        };
        let https = over_https(parts);
        if now - session.last_seen >= REFRESH_SECONDS {
            session.last_seen = now;
            if let Some(slot) = parts.extensions.get::<Refreshed>() {
                let value = cookie(&sessions.seal(&session), https);
                *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
            }
        }
        Ok(Viewer {
            ctx,
            app: app.clone(),
            session: id,
            csrf: session.csrf,
            https,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_read_strictly_and_written_safely() {
        let id = "a".repeat(64);
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("x=1; {COOKIE}={id}; y=2")).unwrap(),
        );
        assert_eq!(session_id(&h), Some(id.as_str()));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("allot_ui=../../etc"),
        );
        assert_eq!(session_id(&h), None);
        let c = cookie(&id, true);
        let c = c.to_str().unwrap();
        for part in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Secure"] {
            assert!(c.contains(part), "{c}");
        }
        assert!(!cookie(&id, false).to_str().unwrap().contains("Secure"));
        assert!(cookie("", false).to_str().unwrap().contains("Max-Age=0"));
    }

    #[test]
    fn sessions_are_sealed_and_end() {
        let sessions = Sessions::default();
        let mut credentials = HeaderMap::new();
        credentials.insert("x-auth-token", HeaderValue::from_static("the-token"));
        let value = sessions.open(credentials).unwrap();
        assert!(!value.contains(&crate::auth::hex(b"the-token")));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{COOKIE}={value}")).unwrap(),
        );
        assert_eq!(session_id(&h), Some(value.as_str()));
        let view = allot_core::State::default();
        let now = now_unix();
        let session = sessions.live(&value, &view, now).unwrap();
        assert_eq!(session.credentials()["x-auth-token"], "the-token");
        assert!(sessions.csrf_matches(&value, &session.csrf));
        assert!(!sessions.csrf_matches(&value, "nope"));
        // Another key (another cluster) opens nothing.
        assert!(Sessions::default().live(&value, &view, now).is_none());
        // Idle, or too old, it is over.
        assert!(sessions.live(&value, &view, now + IDLE_SECONDS).is_none());
        let mut old = session.clone();
        old.created -= LIFETIME_SECONDS;
        assert!(sessions.live(&sessions.seal(&old), &view, now).is_none());
        // Logged out (on any node: the view has it), it is over.
        let mut view = view;
        view.apply(&[allot_core::Change::RevokeSession {
            hash: session.hash(),
            until: now + 10,
            now,
        }]);
        assert!(sessions.live(&value, &view, now).is_none());
        // The revocation is forgotten once the session would have ended anyway.
        view.apply(&[allot_core::Change::RevokeSession {
            hash: "other".into(),
            until: now + 30,
            now: now + 10,
        }]);
        assert!(!view.session_revoked(&session.hash()));
    }
}
