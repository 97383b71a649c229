//! Logging in and out of the web UI.
//!
//! The form asks for what the server's authentication mode takes: a token (static
//! tokens; `noauth2`, on loopback only, with optional roles), or a Keystone user's
//! name, password and project (or a Keystone token pasted in). Whatever was given is
//! checked by the server's own authenticator before a session opens, so a login
//! succeeds exactly when the same credentials would be let into the API.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};

use crate::auth::{AuthError, PasswordLogin, MAX_TOKEN_BYTES};
use crate::AppState;

use super::session::{self, cookie, on_loopback, over_https, same_origin, session_id};
use super::{bare, query_pairs, UiError};

/// Where a login may return to: a path under `/ui` (never another site: `//host`,
/// a scheme, a backslash), else the overview.
pub fn safe_next(next: &str) -> &str {
    let local = (next == "/ui" || next.starts_with("/ui/") || next.starts_with("/ui?"))
        && !next.contains("//")
        && !next.contains('\\')
        && !next.starts_with("/ui/login")
        && next.len() <= 2048;
    if local {
        next
    } else {
        "/ui"
    }
}

/// The login form for the server's mode, with a message after a failed try.
fn login_page(
    mode: &str,
    loopback: bool,
    next: &str,
    message: Option<&str>,
    status: StatusCode,
) -> Response {
    let fields: Markup = match mode {
        "keystone" => html! {
            p.hint { "Log in with your Keystone user; the token it gives is checked on every page." }
            label { "User name" input name="username" autocomplete="username"; }
            label { "Password" input name="password" type="password" autocomplete="current-password"; }
            label { "User domain" input name="user_domain" value="Default"; }
            label { "Project" input name="project"; }
            label { "Project domain" input name="project_domain" value="Default"; }
            details {
                summary { "or paste a Keystone token" }
                label { "Token" input name="token" type="password" autocomplete="off"; }
            }
        },
        "noauth2" if !loopback => html! {
            p.error { "This server runs in noauth2 mode: the UI takes its logins on loopback only (127.0.0.1 or ::1)." }
        },
        "noauth2" => html! {
            p.hint { "noauth2 (test mode, loopback): the token is " code { "USER[:PROJECT]" } "; " code { "admin" } " has the admin role." }
            label { "Token" input name="token" autocomplete="off" required; }
            label { "Roles (optional, comma-separated)" input name="roles" autocomplete="off"; }
        },
        _ => html! {
            p.hint { "Paste a token that " code { "allot token add" } " printed." }
            label { "Token" input name="token" type="password" autocomplete="off" required; }
        },
    };
    let body = bare(
        "Log in",
        html! {
            h1 { "allot" }
            form.login method="post" action={"/ui/login?next=" (urlencode(next))} {
                @if let Some(m) = message { p.error role="alert" { (m) } }
                (fields)
                button type="submit" { "Log in" }
            }
        },
    );
    (status, body).into_response()
}

fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn next_of(raw: Option<&str>) -> Result<String, UiError> {
    let pairs = query_pairs(raw)?;
    let next = pairs
        .iter()
        .find(|(k, _)| k == "next")
        .map_or("/ui", |(_, v)| v.as_str());
    Ok(safe_next(next).to_owned())
}

/// `GET /ui/login`.
pub async fn form(
    State(app): State<AppState>,
    RawQuery(raw): RawQuery,
    parts: Parts,
) -> Result<Response, UiError> {
    let next = next_of(raw.as_deref())?;
    Ok(login_page(
        app.config.auth.mode(),
        on_loopback(&parts),
        &next,
        None,
        StatusCode::OK,
    ))
}

/// One form field, trimmed; 400 when it is longer than a token may be.
fn field<'a>(fields: &'a [(String, String)], name: &str) -> Result<&'a str, UiError> {
    let value = fields
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.trim());
    if value.len() > MAX_TOKEN_BYTES {
        return Err(UiError::BadRequest(format!(
            "The {name} field is too long."
        )));
    }
    Ok(value)
}

/// A header value from a form field (visible ASCII only, as the API's headers).
fn header_value(text: &str, what: &str) -> Result<HeaderValue, UiError> {
    if !text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(UiError::BadRequest(format!(
            "The {what} must be visible ASCII characters."
        )));
    }
    HeaderValue::from_str(text)
        .map_err(|_| UiError::BadRequest(format!("The {what} cannot be read.")))
}

/// `POST /ui/login`: checks the credentials as the API would, then opens a session
/// and sets its cookie.
pub async fn submit(
    State(app): State<AppState>,
    RawQuery(raw): RawQuery,
    parts: Parts,
    body: Bytes,
) -> Result<Response, UiError> {
    if !same_origin(&parts, app.config.settings.public_url.as_deref()) {
        return Err(UiError::CrossSite);
    }
    let next = next_of(raw.as_deref())?;
    let fields = form_fields(&parts, &body)?;
    let mode = app.config.auth.mode();
    let loopback = on_loopback(&parts);
    let refuse =
        |(message, status): Refusal| Ok(login_page(mode, loopback, &next, Some(message), status));
    if mode == "noauth2" && !loopback {
        return refuse((
            "noauth2 logins are taken on loopback only.",
            StatusCode::FORBIDDEN,
        ));
    }
    let mut token = field(&fields, "token")?.to_owned();
    if mode == "keystone" && token.is_empty() {
        token = match password_token(&app, &fields).await? {
            Ok(token) => token,
            Err(refusal) => return refuse(refusal),
        };
    }
    if token.is_empty() {
        return refuse(("Give a token.", StatusCode::BAD_REQUEST));
    }
    let credentials = credentials(mode, &token, &fields)?;
    match session::context(&app, &credentials).await {
        Ok(_) => {}
        Err(AuthError::Unavailable(why)) => return Err(UiError::Unavailable(why)),
        Err(_) => return refuse(("That token is not valid here.", StatusCode::UNAUTHORIZED)),
    }
    open_session(&app, &parts, credentials, &next).await
}

/// Why a login is refused with the form shown again: the message above it, and the
/// answer's status.
type Refusal = (&'static str, StatusCode);

/// The login form's fields, from a body that must be a form.
fn form_fields(parts: &Parts, body: &Bytes) -> Result<Vec<(String, String)>, UiError> {
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/x-www-form-urlencoded") {
        return Err(UiError::BadRequest(
            "A login is a form (application/x-www-form-urlencoded).".into(),
        ));
    }
    Ok(form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect())
}

/// A Keystone token for the user, password and project of the form, or why the form
/// is shown again.
async fn password_token(
    app: &AppState,
    fields: &[(String, String)],
) -> Result<Result<String, Refusal>, UiError> {
    let login = PasswordLogin {
        username: field(fields, "username")?.to_owned(),
        password: fields
            .iter()
            .find(|(k, _)| k == "password")
            .map_or(String::new(), |(_, v)| v.clone()),
        user_domain: field(fields, "user_domain")?.to_owned(),
        project: field(fields, "project")?.to_owned(),
        project_domain: field(fields, "project_domain")?.to_owned(),
    };
    if login.username.is_empty() || login.password.is_empty() || login.project.is_empty() {
        return Ok(Err((
            "Give a user name, a password and a project (or a token).",
            StatusCode::BAD_REQUEST,
        )));
    }
    if login.password.len() > MAX_TOKEN_BYTES {
        return Err(UiError::BadRequest(
            "The password field is too long.".into(),
        ));
    }
    let Some(issue) = app.config.auth.password_login(&login) else {
        return Ok(Err((
            "This mode takes no passwords.",
            StatusCode::BAD_REQUEST,
        )));
    };
    match issue.await {
        Ok(token) => Ok(Ok(token)),
        Err(AuthError::Unavailable(why)) => Err(UiError::Unavailable(why)),
        Err(_) => Ok(Err((
            "Keystone refused that user, password or project.",
            StatusCode::UNAUTHORIZED,
        ))),
    }
}

/// The headers a session sends the API on its caller's behalf: the token, and in
/// `noauth2` the roles the form gives.
fn credentials(mode: &str, token: &str, fields: &[(String, String)]) -> Result<HeaderMap, UiError> {
    let mut credentials = HeaderMap::new();
    credentials.insert("x-auth-token", header_value(token, "token")?);
    if mode == "noauth2" {
        let roles = field(fields, "roles")?;
        if !roles.is_empty() {
            credentials.insert("x-roles", header_value(roles, "roles")?);
        }
    }
    Ok(credentials)
}

/// Opens a session with `credentials`, ending the one the browser had (a login never
/// reuses an id), and sends the browser on to `next` with the new cookie.
async fn open_session(
    app: &AppState,
    parts: &Parts,
    credentials: HeaderMap,
    next: &str,
) -> Result<Response, UiError> {
    if let Some(old) = session_id(&parts.headers) {
        app.config.ui.close(app, old).await?;
    }
    let id = app.config.ui.open(credentials)?;
    let mut response = Redirect::to(next).into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie(&id, over_https(parts)));
    Ok(response)
}

/// `POST /ui/logout`: ends the session (the form must carry its CSRF token and come
/// from this origin).
pub async fn logout(
    State(app): State<AppState>,
    parts: Parts,
    body: Bytes,
) -> Result<Response, UiError> {
    if !same_origin(&parts, app.config.settings.public_url.as_deref()) {
        return Err(UiError::CrossSite);
    }
    let Some(id) = session_id(&parts.headers).map(str::to_owned) else {
        return Err(UiError::Unauthorized);
    };
    let sent = form_urlencoded::parse(&body)
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if !app.config.ui.csrf_matches(&id, &sent) {
        return Err(UiError::CrossSite);
    }
    app.config.ui.close(&app, &id).await?;
    let mut response = Redirect::to("/ui/login").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie("", over_https(&parts)));
    Ok(response)
}
