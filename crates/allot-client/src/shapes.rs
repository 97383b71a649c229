//! Typed calls for named shapes (an allot extension, issue 47; `docs/api.md`,
//! "Named shapes"): write, list, show and delete, and the headroom of one. The
//! answer types are the ones the server writes its answers through.

use serde::{Deserialize, Serialize};

use crate::headroom::Headroom;
use crate::{path_segment, Client, Method, Result, StatusCode};

/// A named shape as the server answers it. Fields in alphabetical order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// When it was first written (UTC, RFC 3339).
    pub created_at: String,
    /// Its name.
    pub name: String,
    /// The query string of `GET /allocation_candidates` for one instance.
    pub request: String,
    /// When it was last written.
    pub updated_at: String,
}

/// The body of `PUT /shapes/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeRequest {
    /// The query string of `GET /allocation_candidates` for one instance.
    pub request: String,
}

/// `GET /shapes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeList {
    /// Every shape, by name.
    pub shapes: Vec<Shape>,
}

/// The path of shape `name`.
fn shape_path(name: &str) -> String {
    format!("/shapes/{}", path_segment(name))
}

impl Client {
    /// `PUT /shapes/{name}`: the shape written (made, or its request replaced);
    /// whether it is new (201) rather than replaced (200).
    pub async fn put_shape(&self, name: &str, request: &str) -> Result<(Shape, bool)> {
        let path = shape_path(name);
        let body = serde_json::to_value(ShapeRequest {
            request: request.to_owned(),
        })
        .expect("a shape request always serialises");
        let response = self
            .expect(
                Method::PUT,
                &path,
                Some(&body),
                &[StatusCode::OK, StatusCode::CREATED],
            )
            .await?;
        let shape = crate::claims::parse(Method::PUT, &path, &response.body)?;
        Ok((shape, response.status == StatusCode::CREATED))
    }

    /// `GET /shapes`.
    pub async fn shapes(&self) -> Result<Vec<Shape>> {
        let list: ShapeList = self.typed(Method::GET, "/shapes", None).await?;
        Ok(list.shapes)
    }

    /// `GET /shapes/{name}`.
    pub async fn shape(&self, name: &str) -> Result<Shape> {
        self.typed(Method::GET, &shape_path(name), None).await
    }

    /// `DELETE /shapes/{name}`.
    pub async fn delete_shape(&self, name: &str) -> Result<()> {
        self.expect(
            Method::DELETE,
            &shape_path(name),
            None,
            &[StatusCode::NO_CONTENT],
        )
        .await
        .map(drop)
    }

    /// `GET /headroom?shape=NAME&MORE`: how many more of the shape fit, `more`
    /// (a query string, may be empty) added to its request.
    pub async fn shape_headroom(&self, name: &str, more: &str) -> Result<Headroom> {
        // Unreserved characters only: as safe in a query's value as in a path.
        let more = more.trim_start_matches(['?', '&']);
        let query = match more {
            "" => format!("shape={}", path_segment(name)),
            _ => format!("shape={}&{more}", path_segment(name)),
        };
        self.headroom(&query).await
    }
}
