//! The statements each [`Change`] becomes ([`ops`]): one function per kind of
//! change, each appending its statements in the order they must run, with the
//! preconditions a shared database checks (an op that must change exactly one row:
//! [`Op::one_row_of`]).

use allot_core::drains::Drain;
use allot_core::server_groups::ServerGroup;
use allot_core::{
    Allocation, Change, Claim, ClassMetadata, ClassRecord, ConsumerRow, Inventory, ProviderId,
    ProviderRow, ResourceClass, TraitName, TraitRecord, Uuid,
};

use super::dialect::Conflict;
use super::statement::{Op, Statement, Value};
use super::tables::{
    ALLOCATIONS, CLAIMS, CLAIM_ALLOCATIONS, CLASS_METADATA, CONSUMERS, DRAINS, DRAIN_CLAIMS,
    DRAIN_ROOTS, INVENTORIES, PROVIDERS, PROVIDER_AGGREGATES, PROVIDER_TRAITS, RESOURCE_CLASSES,
    REVOKED_SESSIONS, SERVER_GROUPS, SERVER_GROUP_MEMBERS, SHAPES, TRAITS,
};

static DELETE_CLASS: Statement = Statement::delete(&RESOURCE_CLASSES, &["name"]);
static PUT_CLASS: Statement = Statement::insert(&RESOURCE_CLASSES, Conflict::Replace);
static RENAME_IN_INVENTORIES: Statement =
    Statement::update(&INVENTORIES, &["resource_class"], &["resource_class"]);
static RENAME_IN_ALLOCATIONS: Statement =
    Statement::update(&ALLOCATIONS, &["resource_class"], &["resource_class"]);
static RENAME_IN_CLAIMS: Statement =
    Statement::update(&CLAIM_ALLOCATIONS, &["resource_class"], &["resource_class"]);
static RENAME_METADATA: Statement = Statement::update(&CLASS_METADATA, &["name"], &["name"]);
static PUT_METADATA: Statement = Statement::insert(&CLASS_METADATA, Conflict::Replace);
static DELETE_METADATA: Statement = Statement::delete(&CLASS_METADATA, &["name"]);
static PUT_TRAIT: Statement = Statement::insert(&TRAITS, Conflict::Replace);
static DELETE_TRAIT: Statement = Statement::delete(&TRAITS, &["name"]);
static CREATE_PROVIDER: Statement = Statement::insert(&PROVIDERS, Conflict::Ignore);
/// What every write to a provider sets (a claim on it sets nothing else), checked
/// against the generation the plan saw.
static BUMP_PROVIDER: Statement = Statement::update(
    &PROVIDERS,
    &["generation", "updated_at"],
    &["id", "generation"],
);
/// What a provider's write may also move: rarely (a rename, a new parent), and never
/// for a claim. Written only if it moved, since `uuid` and `name` are indexed: set
/// to the same values they would cost each claim two more leaves of the two unique
/// indexes, written at random places (issue 25).
static MOVE_PROVIDER: Statement = Statement::update_if_changed(
    &PROVIDERS,
    &["uuid", "name", "parent_id", "root_id"],
    &["id"],
);
/// [`BUMP_PROVIDER`] and [`MOVE_PROVIDER`] as one statement ([`bump_and_move`]).
static BUMP_AND_MOVE_PROVIDER: Statement = Statement::update(
    &PROVIDERS,
    &[
        "generation",
        "updated_at",
        "uuid",
        "name",
        "parent_id",
        "root_id",
    ],
    &["id", "generation"],
);
static DELETE_PROVIDER: Statement = Statement::delete(&PROVIDERS, &["id"]);
static DELETE_INVENTORIES: Statement = Statement::delete(&INVENTORIES, &["provider_id"]);
static INSERT_INVENTORY: Statement = Statement::insert(&INVENTORIES, Conflict::Fail);
static DELETE_TRAITS: Statement = Statement::delete(&PROVIDER_TRAITS, &["provider_id"]);
static INSERT_TRAIT: Statement = Statement::insert(&PROVIDER_TRAITS, Conflict::Fail);
static DELETE_AGGREGATES: Statement = Statement::delete(&PROVIDER_AGGREGATES, &["provider_id"]);
static INSERT_AGGREGATE: Statement = Statement::insert(&PROVIDER_AGGREGATES, Conflict::Fail);
static CREATE_CONSUMER: Statement = Statement::insert(&CONSUMERS, Conflict::Ignore);
static UPDATE_CONSUMER: Statement = Statement::update(
    &CONSUMERS,
    &[
        "project_id",
        "user_id",
        "consumer_type",
        "generation",
        "updated_at",
    ],
    &["uuid", "generation"],
);
static DELETE_CONSUMER: Statement = Statement::delete(&CONSUMERS, &["uuid"]);
static DELETE_ALLOCATIONS: Statement =
    Statement::delete_of_parent(&ALLOCATIONS, &CONSUMERS, "uuid");
static INSERT_ALLOCATION: Statement =
    Statement::insert_under_parent(&ALLOCATIONS, &CONSUMERS, "uuid");
static PUT_CLAIM: Statement = Statement::insert(&CLAIMS, Conflict::Replace);
/// A claim's amounts never change after it is made: written once.
static INSERT_CLAIM_AMOUNT: Statement = Statement::insert(&CLAIM_ALLOCATIONS, Conflict::Ignore);
static DELETE_CLAIM_AMOUNTS: Statement = Statement::delete(&CLAIM_ALLOCATIONS, &["claim_uuid"]);
static DELETE_CLAIM: Statement = Statement::delete(&CLAIMS, &["uuid"]);
static PUT_SERVER_GROUP: Statement = Statement::insert(&SERVER_GROUPS, Conflict::Replace);
static DELETE_SERVER_GROUP: Statement = Statement::delete(&SERVER_GROUPS, &["uuid"]);
static TOUCH_SERVER_GROUP: Statement =
    Statement::update(&SERVER_GROUPS, &["updated_at"], &["uuid"]);
static INSERT_MEMBER: Statement = Statement::insert(&SERVER_GROUP_MEMBERS, Conflict::Fail);
static DELETE_MEMBERS: Statement = Statement::delete(&SERVER_GROUP_MEMBERS, &["group_uuid"]);
static PUT_DRAIN: Statement = Statement::insert(&DRAINS, Conflict::Replace);
static DELETE_DRAIN: Statement = Statement::delete(&DRAINS, &["uuid"]);
static INSERT_DRAIN_ROOT: Statement = Statement::insert(&DRAIN_ROOTS, Conflict::Fail);
static DELETE_DRAIN_ROOTS: Statement = Statement::delete(&DRAIN_ROOTS, &["drain_uuid"]);
static INSERT_DRAIN_CLAIM: Statement = Statement::insert(&DRAIN_CLAIMS, Conflict::Fail);
static DELETE_DRAIN_CLAIMS: Statement = Statement::delete(&DRAIN_CLAIMS, &["drain_uuid"]);
static REVOKE_SESSION: Statement = Statement::insert(&REVOKED_SESSIONS, Conflict::Replace);
static PUT_SHAPE: Statement = Statement::insert(&SHAPES, Conflict::Replace);
static DELETE_SHAPE: Statement = Statement::delete(&SHAPES, &["name"]);
static FORGET_REVOCATIONS: Statement = Statement::delete_up_to(&REVOKED_SESSIONS, "ends_at");

/// Appends the statements that write `change` to `out`, in the order they must run.
pub(crate) fn ops<'a>(change: &'a Change, out: &mut Vec<Op<'a>>) {
    match change {
        Change::PutClass { record, old_name } => put_class(record, old_name.as_ref(), out),
        Change::DeleteClass(name) => delete_class(name, out),
        Change::SetClassMetadata(name, metadata) => {
            set_class_metadata(name, metadata.as_ref(), out)
        }
        Change::PutTrait(record) => put_trait(record, out),
        Change::DeleteTrait(name) => delete_trait(name, out),
        Change::PutProvider {
            row,
            previous_generation,
        } => put_provider(change, row, *previous_generation, out),
        Change::DeleteProvider(id) => delete_provider(*id, out),
        Change::SetInventories(id, inventories) => set_inventories(*id, inventories, out),
        Change::SetTraits(id, traits) => set_traits(*id, traits, out),
        Change::SetAggregates(id, aggregates) => set_aggregates(*id, aggregates, out),
        Change::PutConsumer {
            row,
            previous_generation,
        } => put_consumer(change, row, *previous_generation, out),
        Change::PutClaim(claim) => put_claim(claim, out),
        Change::DeleteClaim(uuid) => delete_claim(*uuid, out),
        Change::PutServerGroup(group) => put_server_group(group, out),
        Change::DeleteServerGroup(uuid) => delete_server_group(*uuid, out),
        Change::JoinServerGroup {
            group,
            consumer,
            at,
        } => {
            let group = Value::Uuid(*group);
            push(out, &INSERT_MEMBER, vec![group, Value::Uuid(*consumer)]);
            push(out, &TOUCH_SERVER_GROUP, vec![Value::Int(*at), group]);
        }
        Change::PutDrain(drain) => put_drain(drain, out),
        Change::DeleteDrain(uuid) => delete_drain(*uuid, out),
        Change::PutShape(shape) => push(
            out,
            &PUT_SHAPE,
            vec![
                Value::Text(shape.name.as_str()),
                Value::Text(&shape.request),
                Value::Int(shape.created_at),
                Value::Int(shape.updated_at),
            ],
        ),
        Change::DeleteShape(name) => push(out, &DELETE_SHAPE, vec![Value::Text(name.as_str())]),
        Change::DeleteConsumer(uuid) => delete_consumer(*uuid, out),
        Change::SetAllocations(uuid, allocations) => {
            set_allocations(change, *uuid, allocations, out)
        }
        Change::RevokeSession { hash, until, now } => {
            push(out, &FORGET_REVOCATIONS, vec![Value::Int(*now)]);
            if until > now {
                push(
                    out,
                    &REVOKE_SESSION,
                    vec![Value::Text(hash), Value::Int(*until)],
                );
            }
        }
    }
}

/// Appends a statement that checks no precondition (it may change any number of
/// rows).
fn push<'a>(out: &mut Vec<Op<'a>>, statement: &'static Statement, params: Vec<Value<'a>>) {
    out.push(Op {
        statement,
        params,
        one_row_of: None,
    });
}

/// A class created or replaced; a rename first moves every row that names the
/// class by its old name.
fn put_class<'a>(
    record: &'a ClassRecord,
    old_name: Option<&'a ResourceClass>,
    out: &mut Vec<Op<'a>>,
) {
    let name = Value::Text(record.name.as_str());
    if let Some(old) = old_name {
        let old = Value::Text(old.as_str());
        push(out, &DELETE_CLASS, vec![old]);
        // Rows refer to classes by name: a rename carries them along.
        for rename in [
            &RENAME_IN_INVENTORIES,
            &RENAME_IN_ALLOCATIONS,
            &RENAME_IN_CLAIMS,
            &RENAME_METADATA,
        ] {
            push(out, rename, vec![name, old]);
        }
    }
    push(
        out,
        &PUT_CLASS,
        vec![
            name,
            Value::Int(record.created_at),
            Value::Int(record.updated_at),
        ],
    );
}

/// A class deleted, with its metadata.
fn delete_class<'a>(name: &'a ResourceClass, out: &mut Vec<Op<'a>>) {
    let name = Value::Text(name.as_str());
    push(out, &DELETE_CLASS, vec![name]);
    push(out, &DELETE_METADATA, vec![name]);
}

/// A class's metadata set, or cleared (`None`).
fn set_class_metadata<'a>(
    name: &'a ResourceClass,
    metadata: Option<&'a ClassMetadata>,
    out: &mut Vec<Op<'a>>,
) {
    let name = Value::Text(name.as_str());
    match metadata {
        Some(m) => push(
            out,
            &PUT_METADATA,
            vec![
                name,
                Value::opt_text(m.units.as_deref()),
                Value::opt_text(m.display_name.as_deref()),
                Value::opt_text(m.description.as_deref()),
            ],
        ),
        None => push(out, &DELETE_METADATA, vec![name]),
    }
}

/// A trait created.
fn put_trait<'a>(record: &'a TraitRecord, out: &mut Vec<Op<'a>>) {
    push(
        out,
        &PUT_TRAIT,
        vec![
            Value::Text(record.name.as_str()),
            Value::Int(record.created_at),
        ],
    );
}

/// A trait deleted.
fn delete_trait<'a>(name: &'a TraitName, out: &mut Vec<Op<'a>>) {
    push(out, &DELETE_TRAIT, vec![Value::Text(name.as_str())]);
}

/// A provider's row created (`previous_generation` is `None`) or updated from the
/// generation the plan saw; either must change exactly one row.
fn put_provider<'a>(
    change: &'a Change,
    row: &'a ProviderRow,
    previous_generation: Option<u64>,
    out: &mut Vec<Op<'a>>,
) {
    let id = Value::count(row.id.0);
    let (uuid, name) = (Value::Uuid(row.uuid), Value::Text(&row.name));
    let generation = Value::count(row.generation);
    let parent = Value::opt_int(row.parent.map(|p| p.0 as i64));
    let root = Value::count(row.root.0);
    let updated_at = Value::Int(row.updated_at);
    match previous_generation {
        // A create: any row already there with its id, uuid or name was made
        // by someone the plan did not know of.
        None => out.push(Op {
            statement: &CREATE_PROVIDER,
            params: vec![
                id,
                uuid,
                name,
                generation,
                parent,
                root,
                Value::Int(row.created_at),
                updated_at,
            ],
            one_row_of: Some(change),
        }),
        Some(previous) => {
            out.push(Op {
                statement: &BUMP_PROVIDER,
                params: vec![generation, updated_at, id, Value::count(previous)],
                one_row_of: Some(change),
            });
            out.push(Op {
                statement: &MOVE_PROVIDER,
                params: vec![uuid, name, parent, root, id],
                one_row_of: None,
            });
        }
    }
}

/// A provider's bump followed by its move ([`put_provider`]) as one update, or
/// None if `bump` and `then` are not those two ops of one provider. For an engine
/// whose update leaves a column's index alone when the column is set to the value
/// it holds (InnoDB compares the old and the new values), so that the split that
/// spares SQLite's indexes buys nothing there, and one statement fewer is worth
/// having: MariaDB, whose statements are parsed from text (`mariadb::script`).
pub(crate) fn bump_and_move<'a>(bump: &Op<'a>, then: &Op<'a>) -> Option<Op<'a>> {
    if !std::ptr::eq(bump.statement, &BUMP_PROVIDER)
        || !std::ptr::eq(then.statement, &MOVE_PROVIDER)
    {
        return None;
    }
    let ([generation, updated_at, id, previous], [uuid, name, parent, root, moved]) =
        (bump.params.as_slice(), then.params.as_slice())
    else {
        return None;
    };
    (id == moved).then(|| Op {
        statement: &BUMP_AND_MOVE_PROVIDER,
        params: vec![
            *generation,
            *updated_at,
            *uuid,
            *name,
            *parent,
            *root,
            *id,
            *previous,
        ],
        one_row_of: bump.one_row_of,
    })
}

/// A provider deleted, with everything attached to it.
fn delete_provider<'a>(id: ProviderId, out: &mut Vec<Op<'a>>) {
    let id = Value::count(id.0);
    for statement in [
        &DELETE_INVENTORIES,
        &DELETE_TRAITS,
        &DELETE_AGGREGATES,
        &DELETE_PROVIDER,
    ] {
        push(out, statement, vec![id]);
    }
}

/// A provider's inventories replaced.
fn set_inventories<'a>(
    id: ProviderId,
    inventories: &'a [(ResourceClass, Inventory)],
    out: &mut Vec<Op<'a>>,
) {
    let id = Value::count(id.0);
    push(out, &DELETE_INVENTORIES, vec![id]);
    for (class, inv) in inventories {
        push(
            out,
            &INSERT_INVENTORY,
            vec![
                id,
                Value::Text(class.as_str()),
                Value::count(inv.total),
                Value::count(inv.reserved),
                Value::count(inv.min_unit),
                Value::count(inv.max_unit),
                Value::count(inv.step_size.get()),
                Value::Float(inv.allocation_ratio),
            ],
        );
    }
}

/// A provider's traits replaced.
fn set_traits<'a>(id: ProviderId, traits: &'a [TraitName], out: &mut Vec<Op<'a>>) {
    let id = Value::count(id.0);
    push(out, &DELETE_TRAITS, vec![id]);
    for name in traits {
        push(out, &INSERT_TRAIT, vec![id, Value::Text(name.as_str())]);
    }
}

/// A provider's aggregates replaced.
fn set_aggregates<'a>(id: ProviderId, aggregates: &'a [Uuid], out: &mut Vec<Op<'a>>) {
    let id = Value::count(id.0);
    push(out, &DELETE_AGGREGATES, vec![id]);
    for aggregate in aggregates {
        push(out, &INSERT_AGGREGATE, vec![id, Value::Uuid(*aggregate)]);
    }
}

/// A consumer's row created (`previous_generation` is `None`) or updated from the
/// generation the plan saw; either must change exactly one row.
fn put_consumer<'a>(
    change: &'a Change,
    row: &'a ConsumerRow,
    previous_generation: Option<u64>,
    out: &mut Vec<Op<'a>>,
) {
    let uuid = Value::Uuid(row.uuid);
    let project = Value::Text(row.project_id.as_str());
    let user = Value::Text(row.user_id.as_str());
    let kind = Value::opt_text(row.consumer_type.as_deref());
    let generation = Value::count(row.generation);
    let updated_at = Value::Int(row.updated_at);
    let (statement, params) = match previous_generation {
        None => (
            &CREATE_CONSUMER,
            vec![
                uuid,
                project,
                user,
                kind,
                generation,
                Value::Int(row.created_at),
                updated_at,
            ],
        ),
        Some(previous) => (
            &UPDATE_CONSUMER,
            vec![
                project,
                user,
                kind,
                generation,
                updated_at,
                uuid,
                Value::count(previous),
            ],
        ),
    };
    out.push(Op {
        statement,
        params,
        one_row_of: Some(change),
    });
}

/// A claim's record created or replaced, and its amounts written (once: they
/// never change).
fn put_claim<'a>(claim: &'a Claim, out: &mut Vec<Op<'a>>) {
    let uuid = Value::Uuid(claim.uuid);
    push(
        out,
        &PUT_CLAIM,
        vec![
            uuid,
            Value::Uuid(claim.consumer),
            Value::Text(claim.project_id.as_str()),
            Value::Text(claim.user_id.as_str()),
            Value::opt_text(claim.consumer_type.as_deref()),
            Value::opt_text(claim.tag.as_deref()),
            Value::Text(claim.state.as_str()),
            Value::Int(claim.created_at),
            Value::opt_int(claim.expires_at),
            Value::opt_int(claim.ended_at),
        ],
    );
    for a in claim.allocations.iter() {
        push(
            out,
            &INSERT_CLAIM_AMOUNT,
            vec![
                uuid,
                Value::Uuid(a.provider),
                Value::Text(a.class.as_str()),
                Value::count(a.amount),
            ],
        );
    }
}

/// An ended claim forgotten, with its amounts.
fn delete_claim<'a>(uuid: Uuid, out: &mut Vec<Op<'a>>) {
    let uuid = Value::Uuid(uuid);
    push(out, &DELETE_CLAIM_AMOUNTS, vec![uuid]);
    push(out, &DELETE_CLAIM, vec![uuid]);
}

/// A server group's record replaced, and its members written anew (a group has
/// few).
fn put_server_group<'a>(group: &'a ServerGroup, out: &mut Vec<Op<'a>>) {
    let uuid = Value::Uuid(group.uuid);
    push(
        out,
        &PUT_SERVER_GROUP,
        vec![
            uuid,
            Value::Text(&group.name),
            Value::Text(&group.project_id),
            Value::Text(&group.user_id),
            Value::Text(group.policy.as_str()),
            Value::count(u64::from(group.max_per_domain)),
            Value::Text(group.scope.kind()),
            Value::opt_text(group.scope.prefix()),
            Value::Int(i64::from(group.enforce_on_allocations)),
            Value::Int(group.created_at),
            Value::Int(group.updated_at),
        ],
    );
    push(out, &DELETE_MEMBERS, vec![uuid]);
    for m in &group.members {
        push(out, &INSERT_MEMBER, vec![uuid, Value::Uuid(*m)]);
    }
}

/// A server group deleted, with its members' rows.
fn delete_server_group<'a>(uuid: Uuid, out: &mut Vec<Op<'a>>) {
    let uuid = Value::Uuid(uuid);
    push(out, &DELETE_MEMBERS, vec![uuid]);
    push(out, &DELETE_SERVER_GROUP, vec![uuid]);
}

/// A drain's record replaced, its roots and claims written anew (a drain has few).
fn put_drain<'a>(drain: &'a Drain, out: &mut Vec<Op<'a>>) {
    let uuid = Value::Uuid(drain.uuid);
    push(
        out,
        &PUT_DRAIN,
        vec![
            uuid,
            Value::Text(drain.state.as_str()),
            Value::Int(drain.created_at),
            Value::opt_int(drain.ended_at),
        ],
    );
    push(out, &DELETE_DRAIN_ROOTS, vec![uuid]);
    for root in &drain.roots {
        let disabled = i64::from(drain.disabled.contains(root));
        push(
            out,
            &INSERT_DRAIN_ROOT,
            vec![uuid, Value::Uuid(*root), Value::Int(disabled)],
        );
    }
    push(out, &DELETE_DRAIN_CLAIMS, vec![uuid]);
    for (i, c) in drain.claims.iter().enumerate() {
        let params = vec![
            uuid,
            Value::count(i as u64),
            Value::Uuid(c.consumer),
            Value::Uuid(c.claim),
        ];
        push(out, &INSERT_DRAIN_CLAIM, params);
    }
}

/// An abandoned drain forgotten, with its roots and claims' rows.
fn delete_drain<'a>(uuid: Uuid, out: &mut Vec<Op<'a>>) {
    let uuid = Value::Uuid(uuid);
    push(out, &DELETE_DRAIN_ROOTS, vec![uuid]);
    push(out, &DELETE_DRAIN_CLAIMS, vec![uuid]);
    push(out, &DELETE_DRAIN, vec![uuid]);
}

/// A consumer deleted, with its allocations.
fn delete_consumer<'a>(uuid: Uuid, out: &mut Vec<Op<'a>>) {
    let uuid = Value::Uuid(uuid);
    push(out, &DELETE_ALLOCATIONS, vec![uuid]);
    push(out, &DELETE_CONSUMER, vec![uuid]);
}

/// A consumer's allocations replaced; each insert must find the consumer.
fn set_allocations<'a>(
    change: &'a Change,
    uuid: Uuid,
    allocations: &'a [Allocation],
    out: &mut Vec<Op<'a>>,
) {
    let uuid = Value::Uuid(uuid);
    if !follows_creation(uuid, out) {
        push(out, &DELETE_ALLOCATIONS, vec![uuid]);
    }
    for a in allocations {
        // Exactly one row, or the consumer is gone (a write the plan did not
        // see): the write fails rather than lose the allocation.
        out.push(Op {
            statement: &INSERT_ALLOCATION,
            params: vec![
                uuid,
                Value::count(a.provider.0),
                Value::Text(a.class.as_str()),
                Value::count(a.used),
            ],
            one_row_of: Some(change),
        });
    }
}

/// Whether the last statement written created the consumer `uuid`. A consumer's
/// allocations right after its creation (as a plan writes a new consumer's claim)
/// replace nothing: a consumer this write created has none (a number SQLite hands
/// out again, once the largest consumer was deleted, lost its allocations with it),
/// so their delete, a lookup in two trees per claim, is left out.
fn follows_creation(uuid: Value<'_>, out: &[Op<'_>]) -> bool {
    out.last().is_some_and(|op| {
        std::ptr::eq(op.statement, &CREATE_CONSUMER) && op.params.first() == Some(&uuid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::postgres::Postgres;
    use crate::engine::sqlite::Sqlite;

    #[test]
    fn each_dialect_spells_upserts_and_placeholders_its_way() {
        assert_eq!(
            PUT_CLASS.sql::<Sqlite>(),
            "INSERT OR REPLACE INTO resource_classes (name, created_at, updated_at) \
             VALUES (?1, ?2, ?3)"
        );
        assert_eq!(
            PUT_CLASS.sql::<Postgres>(),
            "INSERT INTO resource_classes (name, created_at, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET created_at = excluded.created_at, \
             updated_at = excluded.updated_at"
        );
        assert_eq!(
            CREATE_CONSUMER.sql::<Postgres>(),
            "INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            BUMP_PROVIDER.sql::<Sqlite>(),
            "UPDATE providers SET generation = ?1, updated_at = ?2 WHERE id = ?3 AND generation = ?4"
        );
        assert_eq!(
            MOVE_PROVIDER.sql::<Postgres>(),
            "UPDATE providers SET uuid = $1, name = $2, parent_id = $3, root_id = $4 \
             WHERE id = $5 AND (uuid IS DISTINCT FROM $1 OR name IS DISTINCT FROM $2 \
             OR parent_id IS DISTINCT FROM $3 OR root_id IS DISTINCT FROM $4)"
        );
        assert_eq!(
            INSERT_INVENTORY.rendered::<Postgres>().rows.as_deref(),
            Some(
                "INSERT INTO inventories (provider_id, resource_class, total, reserved, \
                 min_unit, max_unit, step_size, allocation_ratio) SELECT * FROM \
                 unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], \
                 $6::bigint[], $7::bigint[], $8::double precision[])"
            )
        );
        assert_eq!(INSERT_INVENTORY.rendered::<Sqlite>().rows, None);
        // A numbered key is the engine's to fill, in one row or many.
        static NUMBERED_ROWS: Statement = Statement::insert(&CONSUMERS, Conflict::Fail);
        assert_eq!(
            NUMBERED_ROWS.rendered::<Postgres>().rows.as_deref(),
            Some(
                "INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, \
                 created_at, updated_at) SELECT * FROM unnest($1::uuid[], $2::text[], \
                 $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[])"
            )
        );
        // A consumer's allocations name it by its number, found by its uuid.
        assert_eq!(
            INSERT_ALLOCATION.sql::<Postgres>(),
            "INSERT INTO allocations (consumer_id, provider_id, resource_class, used) \
             SELECT id, $2::bigint, $3::text, $4::bigint FROM consumers WHERE uuid = $1"
        );
        assert_eq!(
            INSERT_ALLOCATION.sql::<Sqlite>(),
            "INSERT INTO allocations (consumer_id, provider_id, resource_class, used) \
             SELECT id, ?2, ?3, ?4 FROM consumers WHERE uuid = ?1"
        );
        assert_eq!(
            DELETE_ALLOCATIONS.sql::<Sqlite>(),
            "DELETE FROM allocations WHERE consumer_id = (SELECT id FROM consumers WHERE uuid = ?1)"
        );
        assert_eq!(INSERT_CLAIM_AMOUNT.rendered::<Postgres>().rows, None);
    }

    /// The highest parameter number in `sql` after `mark`.
    fn parameters(sql: &str, mark: char) -> usize {
        sql.split(mark)
            .skip(1)
            .filter_map(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .max()
            .unwrap_or(0)
    }

    /// A new consumer's allocations are inserted without a delete before them; an
    /// existing consumer's replace what it held, and so do a new consumer's that do
    /// not follow its creation.
    #[test]
    fn only_allocations_after_their_consumer_s_creation_skip_the_delete() {
        let every = crate::log::tests::every_kind();
        let created = every
            .iter()
            .position(|c| matches!(c, Change::PutConsumer { .. }))
            .unwrap();
        let (put, set) = (every[created].clone(), every[created + 1].clone());
        assert!(matches!(set, Change::SetAllocations(..)));
        let Change::PutConsumer { row, .. } = &put else {
            unreachable!()
        };
        let updated = Change::PutConsumer {
            row: row.clone(),
            previous_generation: Some(0),
        };
        let deletes = |changes: &[&Change]| {
            let mut written = Vec::new();
            for change in changes {
                ops(change, &mut written);
            }
            written
                .iter()
                .filter(|op| std::ptr::eq(op.statement, &DELETE_ALLOCATIONS))
                .count()
        };
        assert_eq!(deletes(&[&put, &set]), 0);
        assert_eq!(deletes(&[&updated, &set]), 1);
        assert_eq!(deletes(&[&set]), 1);
        assert_eq!(deletes(&[&put, &every[0], &set]), 1);
    }

    #[test]
    fn every_statement_gets_as_many_values_as_it_has_parameters() {
        let mut changes = crate::log::tests::every_kind();
        let class = ResourceClass::new_unchecked("CUSTOM_GOLD");
        changes.extend([
            Change::DeleteClass(class.clone()),
            Change::SetClassMetadata(class, None),
            Change::DeleteTrait(TraitName::new_unchecked("CUSTOM_T")),
            Change::SetTraits(ProviderId(7), vec![TraitName::new_unchecked("CUSTOM_T")]),
            Change::DeleteClaim(Uuid::from_u128(11)),
            Change::DeleteConsumer(Uuid::from_u128(5)),
        ]);
        let mut written = Vec::new();
        for change in &changes {
            ops(change, &mut written);
        }
        assert!(written.len() > changes.len());
        for op in &written {
            assert_eq!(
                parameters(op.statement.sql::<Sqlite>(), '?'),
                op.params.len()
            );
            assert_eq!(
                parameters(op.statement.sql::<Postgres>(), '$'),
                op.params.len()
            );
        }
        // Those that check a precondition are the generation-checked puts, and an
        // allocation's insert under its consumer.
        let checked: Vec<_> = written.iter().filter_map(|op| op.one_row_of).collect();
        assert!(checked.iter().all(|c| matches!(
            c,
            Change::PutProvider { .. } | Change::PutConsumer { .. } | Change::SetAllocations(..)
        )));
        assert_eq!(checked.len(), 3);
    }
}
