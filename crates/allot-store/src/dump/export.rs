//! The export: a store's view becomes a [`Dump`], one function per kind of record,
//! and a dump becomes pretty JSON.
//!
//! Every list is sorted here (and providers kept in creation order), because the
//! format promises that two exports of the same data are the same bytes apart from
//! `exported_at` (`docs/dump.md`, "Determinism").

use std::io::Write;

use allot_core::{Claim, ClassRecord, Consumer, Provider, State, Text, Timestamp};
use uuid::Uuid;

use super::{
    load_state, Dump, DumpAllocation, DumpClaim, DumpClaimAmount, DumpClass, DumpConsumer,
    DumpDrain, DumpDrainClaim, DumpInventory, DumpMetadata, DumpProvider, DumpServerGroup,
    DumpShape, DumpTrait, FORMAT, VERSION,
};
use crate::{Store, StoreError};

/// Reads everything a store holds into a dump taken at `exported_at`.
pub fn export_store(store: &mut Store, exported_at: Timestamp) -> Result<Dump, StoreError> {
    Ok(export(&load_state(store)?, exported_at))
}

/// The dump of a view, taken at `exported_at` (the only field that differs between
/// two dumps of the same data).
pub fn export(state: &State, exported_at: Timestamp) -> Dump {
    Dump {
        format: FORMAT.to_owned(),
        version: VERSION,
        exported_at,
        resource_classes: classes(state),
        traits: traits(state),
        providers: providers(state),
        consumers: consumers(state),
        claims: claims(state),
        server_groups: server_groups(state),
        drains: drains(state),
        shapes: state
            .shapes()
            .map(|s| DumpShape {
                name: s.name.to_string(),
                request: s.request.clone(),
                created_at: s.created_at,
                updated_at: s.updated_at,
            })
            .collect(),
    }
}

/// The drains, by uuid.
fn drains(state: &State) -> Vec<DumpDrain> {
    let mut drains: Vec<DumpDrain> = state
        .drains()
        .map(|d| DumpDrain {
            uuid: d.uuid,
            state: d.state.as_str().to_owned(),
            roots: d.roots.clone(),
            disabled: d.disabled.clone(),
            claims: d
                .claims
                .iter()
                .map(|c| DumpDrainClaim {
                    consumer: c.consumer,
                    claim: c.claim,
                })
                .collect(),
            created_at: d.created_at,
            ended_at: d.ended_at,
        })
        .collect();
    drains.sort_by_key(|d| d.uuid);
    drains
}

/// The server groups, by uuid.
fn server_groups(state: &State) -> Vec<DumpServerGroup> {
    let mut groups: Vec<DumpServerGroup> = state
        .server_groups()
        .map(|g| DumpServerGroup {
            uuid: g.uuid,
            name: g.name.clone(),
            project_id: g.project_id.clone(),
            user_id: g.user_id.clone(),
            policy: g.policy.as_str().to_owned(),
            max_server_per_host: g.max_per_domain,
            scope: g.scope.to_string(),
            enforce_on_allocations: g.enforce_on_allocations,
            members: g.members.clone(),
            created_at: g.created_at,
            updated_at: g.updated_at,
        })
        .collect();
    groups.sort_by_key(|g| g.uuid);
    groups
}

/// Writes a dump as pretty JSON (one field a line: diffable, and the same bytes for
/// the same dump), ending with a newline.
pub fn write(dump: &Dump, out: &mut impl Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, dump)?;
    out.write_all(b"\n")
}

/// A stored text as the dump's string.
fn text(t: &Text) -> String {
    t.as_str().to_owned()
}

/// The custom classes with their metadata (none where it is empty), by name.
fn classes(state: &State) -> Vec<DumpClass> {
    let class = |c: &ClassRecord| DumpClass {
        name: c.name.as_str().to_owned(),
        created_at: c.created_at,
        updated_at: c.updated_at,
        metadata: state
            .class_metadata(&c.name)
            .filter(|m| !m.is_empty())
            .map(|m| DumpMetadata {
                units: m.units,
                display_name: m.display_name,
                description: m.description,
            }),
    };
    let mut classes: Vec<DumpClass> = state.custom_classes().map(class).collect();
    classes.sort_by(|a, b| a.name.cmp(&b.name));
    classes
}

/// The custom traits, by name.
fn traits(state: &State) -> Vec<DumpTrait> {
    let mut traits: Vec<DumpTrait> = state
        .custom_traits()
        .map(|t| DumpTrait {
            name: t.name.as_str().to_owned(),
            created_at: t.created_at,
        })
        .collect();
    traits.sort_by(|a, b| a.name.cmp(&b.name));
    traits
}

/// The providers in creation (id) order: the order every listing shows, which an
/// import keeps by handing out ids in the dump's order.
fn providers(state: &State) -> Vec<DumpProvider> {
    state.providers().map(|p| provider(state, p)).collect()
}

/// One provider with its inventories (by class), traits and aggregates (sorted).
fn provider(state: &State, p: &Provider) -> DumpProvider {
    let mut inventories: Vec<DumpInventory> = p
        .inventories
        .iter()
        .map(|(class, inv)| DumpInventory {
            resource_class: class.as_str().to_owned(),
            total: inv.total,
            reserved: inv.reserved,
            min_unit: inv.min_unit,
            max_unit: inv.max_unit,
            step_size: inv.step_size.get(),
            // The shortest decimal that reads back as the same double.
            allocation_ratio: format!("{:?}", inv.allocation_ratio),
        })
        .collect();
    inventories.sort_by(|a, b| a.resource_class.cmp(&b.resource_class));
    let mut traits: Vec<String> = p.traits.iter().map(|t| t.as_str().to_owned()).collect();
    traits.sort();
    let mut aggregates: Vec<Uuid> = p.aggregates.iter().copied().collect();
    aggregates.sort();
    DumpProvider {
        uuid: p.uuid(),
        name: p.row.name.clone(),
        parent: p.row.parent.map(|id| state.uuid_of(id)),
        generation: p.row.generation,
        created_at: p.row.created_at,
        updated_at: p.row.updated_at,
        inventories,
        traits,
        aggregates,
    }
}

/// The consumers, by uuid.
fn consumers(state: &State) -> Vec<DumpConsumer> {
    let mut consumers: Vec<DumpConsumer> = state.consumers().map(|c| consumer(state, c)).collect();
    consumers.sort_by_key(|c| c.uuid);
    consumers
}

/// One consumer with its allocations, by provider uuid then class.
fn consumer(state: &State, c: &Consumer) -> DumpConsumer {
    let mut allocations: Vec<DumpAllocation> = c
        .allocations
        .iter()
        .map(|a| DumpAllocation {
            provider: state.uuid_of(a.provider),
            resource_class: a.class.as_str().to_owned(),
            used: a.used,
        })
        .collect();
    allocations
        .sort_by(|a, b| (a.provider, &a.resource_class).cmp(&(b.provider, &b.resource_class)));
    DumpConsumer {
        uuid: c.row.uuid,
        project_id: text(&c.row.project_id),
        user_id: text(&c.row.user_id),
        consumer_type: c.row.consumer_type.as_ref().map(text),
        generation: c.row.generation,
        created_at: c.row.created_at,
        updated_at: c.row.updated_at,
        allocations,
    }
}

/// The claims in any state, by uuid.
fn claims(state: &State) -> Vec<DumpClaim> {
    let mut claims: Vec<DumpClaim> = state.claims().map(claim).collect();
    claims.sort_by_key(|c| c.uuid);
    claims
}

/// One claim with its amounts, by provider uuid then class.
fn claim(c: &Claim) -> DumpClaim {
    let mut allocations: Vec<DumpClaimAmount> = c
        .allocations
        .iter()
        .map(|a| DumpClaimAmount {
            provider: a.provider,
            resource_class: a.class.as_str().to_owned(),
            amount: a.amount,
        })
        .collect();
    allocations
        .sort_by(|a, b| (a.provider, &a.resource_class).cmp(&(b.provider, &b.resource_class)));
    DumpClaim {
        uuid: c.uuid,
        consumer: c.consumer,
        project_id: text(&c.project_id),
        user_id: text(&c.user_id),
        consumer_type: c.consumer_type.as_ref().map(text),
        tag: c.tag.as_ref().map(text),
        state: c.state.as_str().to_owned(),
        created_at: c.created_at,
        expires_at: c.expires_at,
        ended_at: c.ended_at,
        allocations,
    }
}
