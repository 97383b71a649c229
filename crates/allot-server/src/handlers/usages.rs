//! Handlers for usages (to be written).

use axum::Router;

use crate::AppState;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
}
