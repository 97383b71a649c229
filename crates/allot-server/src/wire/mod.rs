//! The wire contract: every response body the API sends, as a type.
//!
//! Handlers fill these types and [`crate::http::json`] serializes them straight into
//! the response's bytes, with no `serde_json::Value` tree in between. One submodule
//! per family of URLs; each type's doc says which microversion adds or drops which
//! field. The bodies that can be large (allocation candidates, the allocations and
//! usages GETs) are written by hand instead, with the pieces of [`write`]; their types
//! stay here as the shape those writers follow and the oracle their tests compare
//! with.
//!
//! Conventions, so that the output stays byte-for-byte what clients already see:
//! - **Fields are declared in alphabetical order.** The bodies were first written as
//!   `serde_json::Value` maps, which sort their keys, and serde writes struct fields in
//!   declaration order. Keep the order when adding a field.
//! - **A field that only some microversions have is an `Option` skipped when `None`.**
//!   The handler reads the microversion once and fills it or not; the types never
//!   look at the version themselves. A field that is present but may be JSON `null`
//!   is a [`Nullable`], so a field that is both reads `Option<Nullable<T>>`: the outer
//!   `Option` is "sent at this microversion", the inner one is the `null`.
//! - **Maps keyed by uuid or by name are `BTreeMap`s**, which iterate (and so
//!   serialize) in the same sorted order the `Value` maps did. A `Uuid` key orders
//!   like its lowercase hyphenated text, which is what is written.
//! - Borrow from the view (`&'a str`, `&'a Uuid`) where the data is there to borrow;
//!   own what is computed for the answer (URLs, sums).
//!
//! The allocation bodies ([`allocations`]) are the exception: they were built as maps
//! that kept insertion order, and keep that order (an [`InOrder`] map where it is not
//! sorted).

pub mod allocations;
pub mod candidates;
pub mod claims;
pub mod classes;
pub mod drains;
pub mod explain;
pub mod inventories;
pub mod providers;
pub mod root;
pub mod server_groups;
pub mod traits;
pub mod usages;
pub mod write;

pub use allocations::{ConsumerAllocations, HeldByConsumer, HeldOnProvider, ProviderAllocations};
pub use allot_client::{Explanation, GroupExplanation, Headroom, Miss, Stage};
pub use candidates::{
    AllocationCandidates, AllocationRequest, KeyedRequest, ListedRequest, ProviderRef,
    ProviderResources, ProviderSummary, Resources, SummaryResource,
};
pub use claims::{
    claim_body, soft_broken, Claim, ClaimList, ClaimResources, Pending, PendingByRoot, Placed,
};
pub use classes::{ClassMetadataBody, ResourceClassBody, ResourceClassList};
pub use inventories::{InventoryBody, InventoryFields, InventoryList};
pub use providers::{
    ProviderAggregates, ProviderBody, ProviderLinks, ProviderList, ProviderTraits,
};
pub use root::{ApiVersion, Versions};
pub use traits::TraitList;
pub use usages::{ConsumerTypeUsages, ProviderUsages, Usages, UsagesByType};

use serde::{Serialize, Serializer};

/// A value that is sent even when it has none, as JSON `null` (a provider's parent
/// when it is a root). Spelled out so that `Option<Nullable<T>>`, a field some
/// microversions leave out and others send as a value or `null`, reads as what it is.
pub type Nullable<T> = Option<T>;

/// A link to a related resource: `{"href": ..., "rel": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    /// The path of the resource (relative to the service's root).
    pub href: String,
    /// What it is to the resource that links to it: `self`, `inventories`, ...
    pub rel: &'static str,
}

impl Link {
    /// The `self` link of a resource at `href`.
    pub fn to_self(href: impl Into<String>) -> Self {
        Link {
            href: href.into(),
            rel: "self",
        }
    }
}

/// A map written in the order of its entries rather than sorted: for a body whose
/// clients have seen its keys in the order the view lists them (a consumer's
/// providers). The keys must be distinct; nothing here checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InOrder<K, V>(pub Vec<(K, V)>);

impl<K: Serialize, V: Serialize> Serialize for InOrder<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}
