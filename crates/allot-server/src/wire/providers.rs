//! `/resource_providers` and the provider's sub-resources that are lists of names:
//! its aggregates (1.1) and its traits (1.6).

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use std::collections::BTreeMap;

use serde::Serialize;
use uuid::Uuid;

use super::write::{uuid_text, UUID_LEN};
use super::Nullable;

/// One provider: `GET /resource_providers/{uuid}`, the answer of its `PUT`, of the
/// `POST /resource_providers` from 1.20 (before, that answer has no body), and an
/// item of [`ProviderList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderBody<'a> {
    /// Its generation, which every change to it bumps.
    pub generation: u64,
    /// `self`, `inventories` and `usages`; from 1.1 `aggregates`, from 1.6 `traits`,
    /// from 1.11 `allocations`, in that order.
    pub links: ProviderLinks,
    /// Its name.
    pub name: &'a str,
    /// From 1.14: its parent, `null` for a root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_provider_uuid: Option<Nullable<&'a Uuid>>,
    /// From 1.14: the root of its tree (itself for a root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_provider_uuid: Option<&'a Uuid>,
    /// Its uuid.
    pub uuid: &'a Uuid,
    /// allot's `with_usages=true` on the list: what its allocations use, by class (as
    /// `GET /resource_providers/{uuid}/usages` answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usages: Option<BTreeMap<&'a str, u64>>,
    /// allot's `with_usages=true` on the list: what live pending claims promise on it,
    /// by class (as `GET /resource_providers/{uuid}/pending` answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<BTreeMap<String, u64>>,
}

/// `GET /resource_providers`: the providers that pass the filters, in creation order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderList<'a> {
    /// The providers.
    pub resource_providers: Vec<ProviderBody<'a>>,
}

/// `GET` and `PUT /resource_providers/{uuid}/aggregates` (1.1): the aggregates the
/// provider is a member of (the `PUT` repeats them as they were sent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderAggregates<'a> {
    /// Aggregate uuids.
    pub aggregates: &'a [String],
    /// From 1.19: the provider's generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_provider_generation: Option<u64>,
}

/// `GET` and `PUT /resource_providers/{uuid}/traits` (1.6): the provider's traits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderTraits<'a> {
    /// The provider's generation.
    pub resource_provider_generation: u64,
    /// Trait names, sorted.
    pub traits: Vec<&'a str>,
}

/// A provider's links, `[{"href": ..., "rel": ...}]` as a list of [`super::Link`]s
/// would write them, but with each `href` put together on the stack as it is written:
/// a listing of thousands of providers allocated six strings and a list for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderLinks {
    /// The provider's uuid.
    pub uuid: Uuid,
    /// The relations after `self`, in order.
    pub rels: &'static [&'static str],
}

impl ProviderLinks {
    /// The links of a provider at a microversion (its minor number).
    pub fn at(uuid: Uuid, minor: u16) -> Self {
        const ALL: [&str; 5] = [
            "inventories",
            "usages",
            "aggregates",
            "traits",
            "allocations",
        ];
        // `aggregates` from 1.1, `traits` from 1.6, `allocations` from 1.11.
        let count = match minor {
            0 => 2,
            1..=5 => 3,
            6..=10 => 4,
            _ => 5,
        };
        ProviderLinks {
            uuid,
            rels: &ALL[..count],
        }
    }
}

/// `/resource_providers/`.
const PREFIX: &[u8] = b"/resource_providers/";

impl Serialize for ProviderLinks {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Room for the prefix, the uuid, a slash and the longest relation.
        let mut href = [0u8; 80];
        href[..PREFIX.len()].copy_from_slice(PREFIX);
        let base = PREFIX.len() + UUID_LEN;
        href[PREFIX.len()..base].copy_from_slice(&uuid_text(&self.uuid));
        let mut seq = serializer.serialize_seq(Some(1 + self.rels.len()))?;
        seq.serialize_element(&LinkOf(&href[..base], "self"))?;
        for rel in self.rels {
            let end = base + 1 + rel.len();
            href[base] = b'/';
            href[base + 1..end].copy_from_slice(rel.as_bytes());
            seq.serialize_element(&LinkOf(&href[..end], rel))?;
        }
        seq.end()
    }
}

/// One link: its href's bytes (ASCII) and its relation.
struct LinkOf<'a>(&'a [u8], &'a str);

impl Serialize for LinkOf<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("href", std::str::from_utf8(self.0).unwrap_or_default())?;
        map.serialize_entry("rel", self.1)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Link;

    /// The links are the list of `Link`s they replace, at every microversion.
    #[test]
    fn links_write_as_the_list_of_links() {
        let uuid = Uuid::from_u128(0x6f1c0c2e_6b1e_4a59_9a1a_5a0d1c6a2b10);
        for minor in 0..=39u16 {
            let url = format!("/resource_providers/{uuid}");
            let mut want = vec![Link::to_self(url.clone())];
            for (since, rel) in [
                (0, "inventories"),
                (0, "usages"),
                (1, "aggregates"),
                (6, "traits"),
                (11, "allocations"),
            ] {
                if minor >= since {
                    want.push(Link {
                        href: format!("{url}/{rel}"),
                        rel,
                    });
                }
            }
            let got = serde_json::to_string(&ProviderLinks::at(uuid, minor)).unwrap();
            assert_eq!(got, serde_json::to_string(&want).unwrap(), "1.{minor}");
        }
    }
}
