//! A provider named in a URL path (`/resource_providers/{uuid}...`), read once for
//! every endpoint under it; which check comes when, and with which words, stays with
//! each handler (Placement's order differs from one endpoint to the next).

use std::convert::Infallible;

use allot_core::names::canonical_uuid;
use allot_core::{Provider, State as View, Uuid};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::response::Response;

use super::JsonBody;
use crate::error::ApiError;

/// The `{uuid}` segment of a `/resource_providers/{uuid}...` URL, as the client sent
/// it. Extracting it never fails: each handler says when, in Placement's order of
/// checks, a provider it does not have is refused, and with its endpoint's words.
#[derive(Debug, Clone)]
pub struct ProviderPath {
    /// None when the segment is not UTF-8 once percent-decoded.
    raw: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for ProviderPath {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Infallible> {
        let params = Path::<Vec<(String, String)>>::from_request_parts(parts, state).await;
        let raw = params.ok().and_then(|Path(params)| {
            params
                .into_iter()
                .find(|(name, _)| name == "uuid")
                .map(|(_, value)| value)
        });
        Ok(ProviderPath { raw })
    }
}

impl ProviderPath {
    /// A path for tests and callers that have the segment in hand.
    pub fn new(raw: impl Into<String>) -> Self {
        ProviderPath {
            raw: Some(raw.into()),
        }
    }

    /// The segment as sent. One that is not UTF-8 names no resource at all (404, the
    /// words of a URL that matches no route).
    pub fn raw(&self) -> Result<&str, ApiError> {
        self.raw
            .as_deref()
            .ok_or_else(|| ApiError::not_found("The resource could not be found."))
    }

    /// The uuid the segment names. Placement looks the text up as it is stored, so
    /// only the canonical spelling names a provider; any other is a 404 with the
    /// endpoint's `message` (given the segment as sent).
    pub fn uuid(&self, message: impl FnOnce(&str) -> String) -> Result<Uuid, ApiError> {
        let raw = self.raw()?;
        canonical_uuid(raw).ok_or_else(|| ApiError::not_found(message(raw)))
    }

    /// The provider the segment names in `view`, or a 404 with the endpoint's
    /// `message`.
    pub fn provider<'v>(
        &self,
        view: &'v View,
        message: impl FnOnce(&str) -> String,
    ) -> Result<&'v Provider, ApiError> {
        let raw = self.raw()?;
        canonical_uuid(raw)
            .and_then(|uuid| view.provider_by_uuid(&uuid))
            .ok_or_else(|| ApiError::not_found(message(raw)))
    }
}

/// What every write under `/resource_providers/{uuid}` receives: the provider's
/// path segment and the body, both unread (the handler checks them in its
/// endpoint's order).
#[derive(Debug, Clone)]
pub struct ProviderBody {
    /// The `{uuid}` segment.
    pub path: ProviderPath,
    /// The body as received.
    pub body: JsonBody,
}

impl<S: Send + Sync> FromRequest<S> for ProviderBody {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let Ok(path) = ProviderPath::from_request_parts(&mut parts, state).await;
        let body = JsonBody::from_request(Request::from_parts(parts, body), state).await?;
        Ok(ProviderBody { path, body })
    }
}

/// The words most endpoints use for a provider they do not have; several wrap them
/// in their own.
pub fn no_provider(uuid: &str) -> String {
    format!("No resource provider with uuid {uuid} found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_paths() {
        let canonical = "2290d4af-9e6e-400b-9d65-1ee01376f71a";
        let said = |raw: &str| format!("none like {raw}");
        assert_eq!(
            ProviderPath::new(canonical).uuid(said).unwrap().to_string(),
            canonical
        );
        for other in [
            "2290D4AF-9E6E-400B-9D65-1EE01376F71A",
            "2290d4af9e6e400b9d651ee01376f71a",
            "x",
        ] {
            let e = ProviderPath::new(other).uuid(said).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::NOT_FOUND);
            assert_eq!(e.message, format!("none like {other}"));
        }
        let undecodable = ProviderPath { raw: None };
        assert_eq!(
            undecodable.uuid(said).unwrap_err().message,
            "The resource could not be found."
        );
        let view = View::default();
        assert_eq!(
            ProviderPath::new(canonical)
                .provider(&view, no_provider)
                .unwrap_err()
                .message,
            format!("No resource provider with uuid {canonical} found")
        );
    }
}
