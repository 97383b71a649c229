//! The handlers, one module per family of URLs, and the route table.
//!
//! Every handler follows the same order as Placement, so that a request that is wrong
//! in several ways gets the same error: the route's minimum microversion (404), then
//! content negotiation (406/415/400), then policy (403), then the input, then the
//! domain rules.

pub mod aggregates;
pub mod allocation_candidates;
pub mod allocations;
pub mod claims;
pub mod consumers;
pub mod drains;
pub mod dry_run;
pub mod headroom;
pub mod inventories;
pub mod provider_traits;
pub mod providers;
pub mod reshaper;
pub mod resource_classes;
pub mod root;
pub mod server_groups;
pub mod shapes;
#[cfg(test)]
pub(crate) mod test_support;
pub mod traits;
pub mod usages;

use axum::routing::get;
use axum::Router;

use crate::error::ApiError;
use crate::AppState;

/// A write checked and read in its handler's order, ready for the writer: its plan,
/// which the handler hands to `AppState::write` and a dry run (`dry_run`) runs on a
/// copy of the view, so that both refuse alike.
pub(crate) type CheckedPlan<T> =
    Box<dyn FnOnce(&allot_core::State, allot_core::Timestamp) -> allot_core::ops::Plan<T> + Send>;

/// Runs `work` (a search over the view: milliseconds of CPU) on the blocking pool,
/// off the async workers; a task that panicked is logged as `what` and answered 500.
pub(crate) async fn off_workers<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|join| {
        tracing::error!(error = %join, "{what} task failed");
        ApiError::internal()
    })?
}

/// The route table. Method routers answer 405 with an `Allow` header for methods a
/// URL does not have; the fallback answers 404.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(root::home))
        .route(crate::openapi::PATH, get(crate::openapi::serve))
        .route(crate::metrics::PATH, get(crate::metrics::scrape))
        .route(allot_client::status::PATH, get(crate::status::show))
        .route(
            "/resource_classes",
            get(resource_classes::list).post(resource_classes::create),
        )
        .route(
            "/resource_classes/{name}",
            get(resource_classes::show)
                .put(resource_classes::update)
                .delete(resource_classes::delete),
        )
        .route(
            "/resource_classes/{name}/metadata",
            get(resource_classes::show_metadata).put(resource_classes::update_metadata),
        )
        .route("/traits", get(traits::list))
        .route(
            "/traits/{name}",
            get(traits::show).put(traits::put).delete(traits::delete),
        )
        .merge(providers::routes())
        .merge(inventories::routes())
        .merge(aggregates::routes())
        .merge(provider_traits::routes())
        .merge(allocations::routes())
        .merge(usages::routes())
        .merge(headroom::routes())
        .merge(reshaper::routes())
        .merge(allocation_candidates::routes())
        .merge(claims::routes())
        .merge(server_groups::routes())
        .merge(drains::routes())
        .merge(consumers::routes())
        .merge(dry_run::routes())
        .merge(shapes::routes())
        .fallback(|| async { ApiError::not_found("The resource could not be found.") })
}
