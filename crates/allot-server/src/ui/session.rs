//! The web UI's sessions, and [`Viewer`], the logged-in caller of a page.
//!
//! A login leaves the credentials the API would take (the token, and in `noauth2`
//! the roles) in a server-side table, under a random id that only the session cookie
//! carries: `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page
//! sends it), `Path=/ui` (the API's own routes never see it, so they take no cookie
//! at all and keep their behaviour), `Secure` over HTTPS. The table is bounded
//! ([`MAX_SESSIONS`]) and every entry expires ([`IDLE_SECONDS`] unused,
//! [`LIFETIME_SECONDS`] in all).
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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, Method};

use crate::auth::{now_unix, AuthError, Identity};
use crate::context::{Arrival, Ctx};
use crate::policy::{authorize, Action};
use crate::AppState;

use super::UiError;

/// The session cookie's name.
pub const COOKIE: &str = "allot_ui";
/// The most sessions held at once; when full, the expired go first, then the one
/// unused longest (a login never fails for want of room).
pub const MAX_SESSIONS: usize = 10_000;
/// A session unused this long is over.
pub const IDLE_SECONDS: i64 = 3600;
/// A session older than this is over, however used.
pub const LIFETIME_SECONDS: i64 = 12 * 3600;

/// One logged-in browser.
#[derive(Clone)]
struct Session {
    /// The request headers the API would authenticate (`x-auth-token`, and in
    /// `noauth2` `x-roles`).
    credentials: HeaderMap,
    /// The token forms must send back.
    csrf: String,
    created: i64,
    last_seen: i64,
}

impl Session {
    fn live(&self, now: i64) -> bool {
        now - self.last_seen < IDLE_SECONDS && now - self.created < LIFETIME_SECONDS
    }
}

/// The session table (one per application, in [`crate::Config::ui`]). Cloning
/// shares it.
#[derive(Clone, Default)]
pub struct Sessions(Arc<Mutex<HashMap<String, Session>>>);

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never an id or a token.
        write!(f, "Sessions({})", self.table().len())
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
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // Held only to read or write an entry, so a poisoned lock is whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a session for `credentials`; its id (for the cookie).
    pub fn open(&self, credentials: HeaderMap) -> Result<String, UiError> {
        let id = random_id()?;
        let csrf = random_id()?;
        let now = now_unix();
        let mut table = self.table();
        if table.len() >= MAX_SESSIONS {
            table.retain(|_, s| s.live(now));
        }
        if table.len() >= MAX_SESSIONS {
            if let Some(oldest) = table
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone())
            {
                table.remove(&oldest);
            }
        }
        table.insert(
            id.clone(),
            Session {
                credentials,
                csrf,
                created: now,
                last_seen: now,
            },
        );
        Ok(id)
    }

    /// The live session `id` names (its credentials and CSRF token), marked used.
    fn touch(&self, id: &str) -> Option<(HeaderMap, String)> {
        let now = now_unix();
        let mut table = self.table();
        let session = table.get_mut(id)?;
        if !session.live(now) {
            table.remove(id);
            return None;
        }
        session.last_seen = now;
        Some((session.credentials.clone(), session.csrf.clone()))
    }

    /// Whether `sent` is session `id`'s CSRF token (compared in constant time).
    pub fn csrf_matches(&self, id: &str, sent: &str) -> bool {
        self.table()
            .get(id)
            .is_some_and(|s| crate::auth::constant_time_eq(s.csrf.as_bytes(), sent.as_bytes()))
    }

    /// Ends a session.
    pub fn close(&self, id: &str) {
        self.table().remove(id);
    }

    /// How many sessions are held (live or not yet swept).
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The session id a request's cookies carry, if any.
pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `Set-Cookie` value that carries session `id` (an empty id with `Max-Age=0`
/// clears it).
pub fn cookie(id: &str, https: bool) -> HeaderValue {
    let max_age = if id.is_empty() { 0 } else { LIFETIME_SECONDS };
    let secure = if https { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("allot_ui=; Path=/ui; Max-Age=0"))
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
    /// The session's id.
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
        let Some((credentials, csrf)) = app.config.ui.touch(&id) else {
            return Err(login());
        };
        let ctx = match context(app, &credentials).await {
            Ok(ctx) => ctx,
            Err(AuthError::Unavailable(why)) => return Err(UiError::Unavailable(why)),
            Err(_) => {
                // The token is no longer good (revoked, expired): so is the session.
                app.config.ui.close(&id);
                return Err(login());
            }
        };
        Ok(Viewer {
            ctx,
            app: app.clone(),
            session: id,
            csrf,
            https: over_https(parts),
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
    fn the_table_is_bounded_and_sessions_end() {
        let sessions = Sessions::default();
        let id = sessions.open(HeaderMap::new()).unwrap();
        assert_eq!(id.len(), 64);
        assert!(sessions.touch(&id).is_some());
        sessions.close(&id);
        assert!(sessions.touch(&id).is_none());
        {
            let mut table = sessions.table();
            for i in 0..MAX_SESSIONS {
                table.insert(
                    format!("{i}"),
                    Session {
                        credentials: HeaderMap::new(),
                        csrf: String::new(),
                        created: now_unix(),
                        last_seen: now_unix() - i as i64 % 100,
                    },
                );
            }
        }
        let id = sessions.open(HeaderMap::new()).unwrap();
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert!(sessions.touch(&id).is_some());
        // An idle session is over.
        sessions.table().get_mut(&id).unwrap().last_seen -= IDLE_SECONDS;
        assert!(sessions.touch(&id).is_none());
    }
}
