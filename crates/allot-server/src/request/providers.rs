//! The requests about providers: the bodies of `POST /resource_providers` and
//! `PUT /resource_providers/{uuid}`, the query string of the listing, and the bodies
//! of a provider's memberships, `PUT /resource_providers/{uuid}/aggregates` (a bare
//! list until 1.19, then with the provider's generation) and
//! `PUT /resource_providers/{uuid}/traits`.

use allot_core::model::Provider;
use allot_core::ops::providers::ParentChange;
use allot_core::query::ProviderQuery;
use allot_core::{ProviderRef, RequestedName, ResourceClass, TraitName, Uuid};
use serde::Deserialize;
use serde_json::json;

use super::{given_generation, not_valid, present, GivenGeneration, JsonBody, QueryParams};
use crate::error::ApiError;
use crate::microversion::Version;
use crate::params::filters::{member_of_filter, required_filter, resources_filter};
use crate::params::{format_checked_uuid, invalid_query, is_dashed_uuid};
use crate::{schema, schemas};

/// `POST /resource_providers`: the new provider's name, uuid (drawn when the request
/// gives none) and parent as the request names it.
#[derive(Debug)]
pub struct NewProvider {
    /// Its name.
    pub name: String,
    /// Its uuid, None for one to draw.
    pub uuid: Option<Uuid>,
    /// Its parent (from 1.14).
    pub parent: Option<ProviderRef>,
}

impl NewProvider {
    /// Reads and checks the body at `1.minor`.
    pub fn read(body: &JsonBody, minor: u16) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct Create {
            name: String,
            #[serde(default)]
            uuid: Option<String>,
            #[serde(default)]
            parent_provider_uuid: Option<String>,
        }
        let create: Create = body.read(&schemas::provider_create(minor >= 14))?;
        // The schema let through only uuids that parse; any spelling is stored in
        // the canonical one. An empty one asks for a uuid to be drawn.
        let uuid = match create.uuid.as_deref() {
            Some(u) if !u.is_empty() => {
                let uuid = format_checked_uuid(u);
                Some(uuid.ok_or_else(|| not_valid(format!("'{u}' is not a 'uuid'")))?)
            }
            _ => None,
        };
        Ok(NewProvider {
            name: create.name,
            uuid,
            parent: create
                .parent_provider_uuid
                .as_deref()
                .map(ProviderRef::parse),
        })
    }
}

/// `PUT /resource_providers/{uuid}`: the new name, and what happens to the parent.
#[derive(Debug)]
pub struct ProviderUpdate {
    /// The new name.
    pub name: String,
    /// The parent: kept (left out), set, or cleared (null).
    pub parent: ParentChange,
}

impl ProviderUpdate {
    /// Reads and checks the body at `1.minor`.
    pub fn read(body: &JsonBody, minor: u16) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct Update {
            name: String,
            #[serde(default, deserialize_with = "present")]
            parent_provider_uuid: Option<Option<String>>,
        }
        let update: Update = body.read(&schemas::provider_update(minor >= 14))?;
        Ok(ProviderUpdate {
            name: update.name,
            parent: match update.parent_provider_uuid {
                None => ParentChange::Keep,
                Some(Some(parent)) => ParentChange::SetTo(ProviderRef::parse(&parent)),
                Some(None) => ParentChange::Clear,
            },
        })
    }
}

/// Turns the query string of a provider listing into filters, with Placement's
/// checks and messages at each microversion.
pub fn list_query(
    version: Version,
    raw: Option<&str>,
) -> Result<(ProviderQuery, ListPage), ApiError> {
    let mut query = QueryParams::parse(raw)?;
    let extensions = query.split_off(&["with_usages", "limit", "marker"]);
    query.check(&schemas::provider_list_query(version.0))?;
    extensions.check(&schemas::provider_list_extensions())?;
    let last = |key: &str| query.owned(key);
    for key in ["uuid", "in_tree"] {
        if let Some(value) = last(key).filter(|v| !is_dashed_uuid(v)) {
            // The same words as a schema failure, which is what Placement reports.
            let repr = schema::py_repr(&json!(value));
            return Err(invalid_query(format!(
                "{repr} is not a 'uuid'\n\nFailed validating 'format' in \
                 schema['properties']['{key}']:\n    {{'type': 'string', 'format': 'uuid'}}\n\n\
                 On instance['{key}']:\n    {repr}"
            )));
        }
    }

    let mut filters = ProviderQuery::default();
    let member_of = query.all("member_of");
    if !member_of.is_empty() {
        (filters.member_of, filters.forbidden_aggregates) = member_of_filter(version, &member_of)?;
    }
    let required = query.all("required");
    if !required.is_empty() {
        // Any text is a trait to look up: the core answers text that is no trait name
        // as an unknown trait, at the same step.
        let (any_of, forbidden) = required_filter(version, &required)?;
        filters.required_traits = any_of
            .iter()
            .map(|group| group.iter().map(|t| TraitName::requested(t)).collect())
            .collect();
        filters.forbidden_traits = forbidden.iter().map(|t| TraitName::requested(t)).collect();
    }
    filters.name = last("name");
    filters.uuid = last("uuid").as_deref().map(ProviderRef::parse);
    filters.in_tree = last("in_tree").as_deref().map(ProviderRef::parse);
    if let Some(resources) = last("resources") {
        filters.resources = resources_filter(&resources)?
            .iter()
            .map(|(class, amount)| (ResourceClass::requested(class), *amount))
            .collect();
    }
    let page = ListPage {
        with_usages: extensions.text("with_usages") == Some("true"),
        // The schema's pattern admits only positive integers; one past usize asks for
        // more than any list holds, which is no limit.
        limit: extensions
            .text("limit")
            .map(|l| l.parse::<usize>().unwrap_or(usize::MAX)),
        marker: extensions.uuid("marker")?.zip(extensions.owned("marker")),
    };
    Ok((filters, page))
}

/// allot's extensions of the provider list: each provider's usages and pending
/// amounts, and pages (`limit`, `marker`).
#[derive(Debug, Default)]
pub struct ListPage {
    /// `with_usages=true`.
    pub with_usages: bool,
    /// The most providers to list.
    pub limit: Option<usize>,
    /// The last provider of the page before, as read and as given.
    pub marker: Option<(Uuid, String)>,
}

impl ListPage {
    /// The page of a listing: after the marker's provider, at most `limit` of them. A
    /// marker that is not in the listing is a 400 (a provider deleted between two
    /// pages, or a marker of another listing), never a silent restart.
    pub fn of<'a, 'v>(&self, listed: &'a [&'v Provider]) -> Result<&'a [&'v Provider], ApiError> {
        let from = match &self.marker {
            None => 0,
            Some((uuid, given)) => {
                let at = listed.iter().position(|p| p.uuid() == *uuid);
                1 + at.ok_or_else(|| {
                    invalid_query(format!(
                        "marker '{given}' is not a resource provider of this listing"
                    ))
                })?
            }
        };
        let rest = &listed[from..];
        Ok(&rest[..self.limit.unwrap_or(usize::MAX).min(rest.len())])
    }
}

/// `PUT /resource_providers/{uuid}/aggregates`.
#[derive(Debug)]
pub struct AggregatesUpdate {
    /// The aggregates as the request spells them, which Placement answers with.
    pub given: Vec<String>,
    /// The same, parsed.
    pub aggregates: Vec<Uuid>,
    /// From 1.19: the generation the client believes the provider has.
    pub generation: Option<GivenGeneration>,
}

impl AggregatesUpdate {
    /// Reads and checks a parsed body at `1.minor` (Placement parses it before it
    /// looks the provider up, and checks it after).
    pub fn read(body: &JsonBody, minor: u16) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct WithGeneration {
            aggregates: Vec<String>,
            #[serde(deserialize_with = "given_generation")]
            resource_provider_generation: GivenGeneration,
        }
        let (given, generation) = if minor >= 19 {
            let body: WithGeneration = body.read(&schemas::provider_aggregates_v1_19())?;
            (body.aggregates, Some(body.resource_provider_generation))
        } else {
            (body.read(&schemas::provider_aggregates_v1_1())?, None)
        };
        // The schema's `format: uuid` admits only what parses.
        let aggregates = given
            .iter()
            .map(|a| format_checked_uuid(a).ok_or_else(|| not_valid("not a 'uuid'")))
            .collect::<Result<_, _>>()?;
        Ok(AggregatesUpdate {
            given,
            aggregates,
            generation,
        })
    }
}

/// `PUT /resource_providers/{uuid}/traits`.
#[derive(Debug)]
pub struct TraitsUpdate {
    /// The traits as the request names them. The schema lets any text through; the
    /// core reports text that is not a trait name with the unknown ones, after its
    /// own checks.
    pub traits: Vec<RequestedName<TraitName>>,
    /// The generation the client believes the provider has.
    pub generation: GivenGeneration,
}

impl TraitsUpdate {
    /// Reads and checks the body.
    pub fn read(body: &JsonBody) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct Put {
            traits: Vec<String>,
            #[serde(deserialize_with = "given_generation")]
            resource_provider_generation: GivenGeneration,
        }
        let put: Put = body.read(&schemas::provider_traits())?;
        Ok(TraitsUpdate {
            traits: put.traits.iter().map(|t| TraitName::requested(t)).collect(),
            generation: put.resource_provider_generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ApiError) -> String {
        e.message
    }

    #[test]
    fn query_by_microversion() {
        let q = |v: u16, raw: &str| list_query(Version(v), Some(raw));
        assert!(message(q(17, "required=A").unwrap_err())
            .contains("Additional properties are not allowed ('required' was unexpected)"));
        assert!(message(q(2, "member_of=x").unwrap_err())
            .contains("Additional properties are not allowed"));
        assert!(q(3, "member_of=83a3d69d-8920-48e2-8914-cadfd8fa2f91").is_ok());
        assert!(message(q(39, "spam=eggs").unwrap_err())
            .starts_with("Invalid query string parameters: "));
        assert!(message(q(39, "uuid=spameggs").unwrap_err()).contains("'spameggs' is not a 'uuid'"));
        assert!(
            message(q(39, "in_tree=2290d4af9e6e400b9d651ee01376f71a").unwrap_err())
                .contains("is not a 'uuid'")
        );
        let (f, page) = q(
            39,
            "name=a&name=b&resources=VCPU:1&in_tree=2290d4af-9e6e-400b-9d65-1ee01376f71a",
        )
        .unwrap();
        assert!(!page.with_usages && page.limit.is_none() && page.marker.is_none());
        assert_eq!(f.name.as_deref(), Some("b"));
        assert_eq!(f.resources, vec![(ResourceClass::requested("VCPU"), 1)]);
        assert_eq!(
            f.in_tree.and_then(|t| t.uuid()).map(|u| u.to_string()),
            Some("2290d4af-9e6e-400b-9d65-1ee01376f71a".to_owned())
        );
    }

    use serde_json::json;

    use crate::request::test_body as body;

    const AGG: &str = "2290d4af-9e6e-400b-9d65-1ee01376f71a";

    #[test]
    fn aggregates_by_microversion() {
        let old = AggregatesUpdate::read(&body(json!([AGG])), 18).unwrap();
        assert_eq!(old.given, [AGG]);
        assert_eq!(old.aggregates[0].to_string(), AGG);
        assert_eq!(old.generation, None);
        let new = json!({"aggregates": [AGG], "resource_provider_generation": -1});
        let new = AggregatesUpdate::read(&body(new), 19).unwrap();
        assert_eq!(new.generation, Some(GivenGeneration(-1)));
        let e = AggregatesUpdate::read(&body(json!([AGG])), 19).unwrap_err();
        assert!(e.message.starts_with("JSON does not validate: "));
    }

    #[test]
    fn traits_as_named() {
        let put =
            json!({"traits": ["HW_CPU_X86_AVX", "not a trait"], "resource_provider_generation": 2});
        let put = TraitsUpdate::read(&body(put)).unwrap();
        assert_eq!(put.generation, GivenGeneration(2));
        assert_eq!(put.traits[1], RequestedName::NotAName("not a trait".into()));
    }
}
