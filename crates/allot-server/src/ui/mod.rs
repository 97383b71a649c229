//! The web UI at `/ui` (issue 26): capacity, providers, allocations, pending claims,
//! headroom, server groups and drains, for people, served by allot itself.
//!
//! Server-rendered HTML ([maud](https://maud.lambda.xyz): HTML in Rust macros,
//! checked at compile time, escaped by default) with one small script (countdowns to
//! a claim's expiry) and one stylesheet, both compiled into the binary
//! ([`ASSETS`]): nothing is fetched from elsewhere, and the pages work offline.
//! Usage bars are plain CSS (`format::Usage::bar`); there is no chart to draw.
//!
//! Pages are read from one version of the view, walked once per page (never once
//! per provider), after the API's own policy checks for the API reads the page
//! stands for (`session::Viewer::require`), so a caller sees what the API would
//! show it; within a page, what the API would not show that caller is left out (a
//! provider's name where the API's answer gives a uuid, `Viewer::sees_providers`;
//! pending amounts, `providers::pending_at`). Only GETs read; the one
//! state-changing form is logout.
//!
//! The routes sit beside the API's, outside its context middleware
//! ([`crate::router`]): the API's paths and answers are unchanged, and the API never
//! takes the UI's cookie. Every answer here carries a strict content security policy
//! ([`headers`]).

pub mod format;
pub mod groups;
pub mod login;
pub mod overview;
pub mod pages;
pub mod providers;
pub mod session;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::AppState;

pub use session::{Sessions, Viewer};

/// The largest form body read (a login).
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// The stylesheet and the script, compiled in: (path under `/ui/static/`, content
/// type, body).
pub const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("app.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("app.js"),
    ),
    // Named by every page, so that no browser asks the API's `/favicon.ico`.
    ("icon.svg", "image/svg+xml", include_str!("icon.svg")),
];

/// The content security policy of every UI answer: this origin's script and
/// stylesheet only, no inline script, inline styles only as attributes (the bars'
/// widths), forms only to this origin, never in a frame.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     style-src-attr 'unsafe-inline'; img-src 'self'; connect-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The UI's routes (see the module doc).
pub fn routes(state: AppState) -> Router {
    Router::new()
        .route("/ui", get(overview::show))
        .route("/ui/", get(overview::show))
        .route("/ui/login", get(login::form).post(login::submit))
        .route("/ui/logout", post(login::logout))
        .route("/ui/providers", get(providers::list))
        .route("/ui/providers/{uuid}", get(providers::show))
        .route("/ui/consumers/{uuid}", get(pages::consumer))
        .route("/ui/claims", get(pages::claims))
        .route("/ui/headroom", get(pages::headroom))
        .route("/ui/groups", get(groups::list))
        .route("/ui/groups/{uuid}", get(groups::show))
        .route("/ui/drains", get(groups::drains))
        .route("/ui/static/{file}", get(asset))
        .route("/ui/{*rest}", get(not_found).post(not_found))
        .route_layer(axum::middleware::from_fn(crate::request_log::note_route))
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(axum::middleware::from_fn(session::refresh))
        .layer(axum::middleware::from_fn(headers))
        .with_state(state)
}

/// Adds the security headers to every UI answer (see [`CSP`]); pages are never
/// cached, the assets for an hour.
pub async fn headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it a browser sends `Origin: null` with a form, and
    // [`session::same_origin`] could not tell this site's forms from others'.
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// `GET /ui/static/{file}`: a compiled-in asset.
async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match ASSETS.iter().find(|(name, ..)| *name == file) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "public, max-age=3600"),
            ],
            *body,
        )
            .into_response(),
        None => UiError::NotFound("No such file.".into()).into_response(),
    }
}

async fn not_found() -> UiError {
    UiError::NotFound("No such page.".into())
}

/// Why a page is not shown; each is a page of its own with its status.
#[derive(Debug)]
pub enum UiError {
    /// No live session, on a GET: to the login page, then back to `next`.
    Login {
        /// Where the login returns to (a path under `/ui`).
        next: String,
    },
    /// No live session on anything else: 401.
    Unauthorized,
    /// The API's policy refuses the caller an action the page needs: 403.
    Forbidden(&'static str),
    /// A form from another origin, or without the session's CSRF token: 403.
    CrossSite,
    /// Input that cannot be read: 400.
    BadRequest(String),
    /// Nothing by that name: 404.
    NotFound(String),
    /// The identity service (or the OS) cannot answer: 503.
    Unavailable(String),
    /// The API's own refusal of the same input (a headroom shape): its status and
    /// message.
    Api(crate::error::ApiError),
}

impl From<crate::error::ApiError> for UiError {
    fn from(e: crate::error::ApiError) -> Self {
        UiError::Api(e)
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            UiError::Login { next } => {
                let next: String =
                    form_urlencoded::byte_serialize(login::safe_next(&next).as_bytes()).collect();
                return Redirect::to(&format!("/ui/login?next={next}")).into_response();
            }
            UiError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "Log in first: this needs a session.".to_owned(),
            ),
            UiError::Forbidden(rule) => (
                StatusCode::FORBIDDEN,
                format!("The API's policy does not allow you this page ({rule})."),
            ),
            UiError::CrossSite => (
                StatusCode::FORBIDDEN,
                "Refused: the form did not come from this site's page.".to_owned(),
            ),
            UiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            UiError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            UiError::Unavailable(m) => {
                tracing::warn!(reason = %m, "a UI page could not be served");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The identity service cannot be reached; try again shortly.".to_owned(),
                )
            }
            UiError::Api(e) => {
                let status = e.status;
                if status.is_server_error() {
                    tracing::error!(message = %e.message, "a UI page failed");
                }
                (status, e.message)
            }
        };
        let body = bare(
            status.canonical_reason().unwrap_or("Error"),
            html! {
                h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                p.error { (message) }
                p { a href="/ui" { "Back to the overview" } }
            },
        );
        (status, body).into_response()
    }
}

/// A page's head: its title, the icon, the stylesheet and, where the page has
/// countdowns, the script.
fn head(title: &str, script: bool) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · allot" }
            link rel="icon" href="/ui/static/icon.svg";
            link rel="stylesheet" href="/ui/static/app.css";
            @if script {
                script src="/ui/static/app.js" defer {}
            }
        }
    }
}

/// A page without the navigation (login, errors).
pub fn bare(title: &str, content: Markup) -> axum::response::Html<String> {
    axum::response::Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(title, false))
                body.bare { main { (content) } }
            }
        }
        .into_string(),
    )
}

/// Which tab a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// Capacity across the cloud.
    Overview,
    /// Providers and their trees.
    Providers,
    /// Pending claims.
    Claims,
    /// Headroom.
    Headroom,
    /// Server groups.
    Groups,
    /// Drains.
    Drains,
}

/// A page with the navigation, the logged-in user and the logout form.
pub fn page(viewer: &Viewer, tab: Tab, title: &str, content: Markup) -> Response {
    let now = viewer.app.host.now();
    let tabs = [
        (Tab::Overview, "/ui", "Overview"),
        (Tab::Providers, "/ui/providers", "Providers"),
        (Tab::Claims, "/ui/claims", "Pending claims"),
        (Tab::Headroom, "/ui/headroom", "Headroom"),
        (Tab::Groups, "/ui/groups", "Groups"),
        (Tab::Drains, "/ui/drains", "Drains"),
    ];
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, true))
            body data-now=(now) {
                header.top {
                    a.brand href="/ui" { "allot" }
                    nav {
                        @for (t, href, name) in tabs {
                            a.current[t == tab] href=(href) { (name) }
                        }
                    }
                    div.who {
                        span { (viewer.who()) }
                        form method="post" action="/ui/logout" {
                            input type="hidden" name="csrf" value=(viewer.csrf);
                            button type="submit" { "Log out" }
                        }
                    }
                }
                main { (content) }
            }
        }
    };
    axum::response::Html(markup.into_string()).into_response()
}

/// Reads a page's query string into (name, value) pairs, refusing (400) one longer
/// than a page could need.
pub fn query_pairs(raw: Option<&str>) -> Result<Vec<(String, String)>, UiError> {
    let raw = raw.unwrap_or("");
    if raw.len() > 4096 {
        return Err(UiError::BadRequest("The query string is too long.".into()));
    }
    Ok(form_urlencoded::parse(raw.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect())
}

/// A 1-based page number from a query (`page`), 1 when absent; 400 when it is not
/// a number from 1 to 1,000,000.
pub fn page_number(pairs: &[(String, String)]) -> Result<usize, UiError> {
    match pairs.iter().find(|(k, _)| k == "page") {
        None => Ok(1),
        Some((_, v)) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1_000_000).contains(n))
            .ok_or_else(|| {
                UiError::BadRequest(format!("Invalid page {v:?}: a number from 1 to 1000000."))
            }),
    }
}

/// The links to the previous and next page of a list (`base` ends with `?` or `&`).
pub fn pager(base: &str, page: usize, shown: usize, total: usize, per_page: usize) -> Markup {
    let last = total.div_ceil(per_page).max(1);
    html! {
        nav.pager {
            @if page > 1 { a rel="prev" href={(base) "page=" (page - 1)} { "← previous" } }
            span { "page " (page) " of " (last) " · " (format::grouped(total as i128)) " in all" @if shown == 0 && total > 0 { " (past the end)" } }
            @if page < last { a rel="next" href={(base) "page=" (page + 1)} { "next →" } }
        }
    }
}

/// A uuid from a path, 404 when it is not one (as the API answers an unknown one).
pub fn path_uuid(text: &str) -> Result<uuid::Uuid, UiError> {
    // Not the API's `canonical_uuid`: that rule is Placement's lookup by text, which
    // the UI does not copy; a person's URL may spell the uuid any standard way.
    uuid::Uuid::try_parse(text)
        .map_err(|_| UiError::NotFound(format!("No such uuid: {:?}.", clip(text, 64))))
}

/// At most `n` characters of a text, for messages that echo input.
pub fn clip(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

/// An empty fragment.
pub fn nothing() -> Markup {
    PreEscaped(String::new())
}
