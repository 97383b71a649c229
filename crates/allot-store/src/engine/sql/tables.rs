//! The tables' neutral description: each table a list of columns of a neutral
//! [`Type`], with its key, and the indexes on them. The engines spell them in their
//! own SQL (`super::script`), and their migrations say which version created which;
//! so a description here, once a release created its table, must keep rendering
//! what that version created.

/// The type of a column, as the two engines store it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    /// A 64-bit signed integer (counts and ids are stored as `u64 as i64`).
    Int = 0,
    /// A double.
    Float = 1,
    /// UTF-8 text.
    Text = 2,
    /// A uuid: text in its hyphenated lower-case spelling where there is no native
    /// type for it.
    Uuid = 3,
    /// Bytes (the change log's records).
    Bytes = 4,
}

/// One column of a table.
#[derive(Debug)]
pub(crate) struct Column {
    pub name: &'static str,
    pub ty: Type,
    /// Whether it may be NULL.
    pub null: bool,
    /// Whether no two rows may share its value (besides the primary key).
    pub unique: bool,
    /// Whether the engine numbers new rows in it (the key of a table whose rows
    /// other tables name): inserts leave it out.
    pub numbered: bool,
}

pub(crate) const fn col(name: &'static str, ty: Type) -> Column {
    Column {
        name,
        ty,
        null: false,
        unique: false,
        numbered: false,
    }
}

/// A table's key that the engine numbers, one more than the largest so far (SQLite's
/// rowid, PostgreSQL's identity column).
const fn numbered(name: &'static str) -> Column {
    Column {
        numbered: true,
        ..col(name, Type::Int)
    }
}

const fn nullable(name: &'static str, ty: Type) -> Column {
    Column {
        null: true,
        ..col(name, ty)
    }
}

const fn unique(name: &'static str, ty: Type) -> Column {
    Column {
        unique: true,
        ..col(name, ty)
    }
}

/// A table: its columns in order, and its primary key.
#[derive(Debug)]
pub(crate) struct Table {
    pub name: &'static str,
    pub columns: &'static [Column],
    /// The primary key's columns (none: the table has no key).
    pub key: &'static [&'static str],
    /// Whether the key is the row (SQLite's `WITHOUT ROWID`; the tables created
    /// that way stay that way, and the others stay rowid tables).
    pub clustered: bool,
}

/// An index on one column.
#[derive(Debug)]
pub(crate) struct Index {
    pub name: &'static str,
    pub table: &'static Table,
    pub column: &'static str,
}

use Type::{Float, Int, Text};

pub(crate) static RESOURCE_CLASSES: Table = Table {
    name: "resource_classes",
    columns: &[
        col("name", Text),
        col("created_at", Int),
        col("updated_at", Int),
    ],
    key: &["name"],
    clustered: false,
};

/// A custom class's metadata; rows follow their class by name, as inventories and
/// allocations do.
pub(crate) static CLASS_METADATA: Table = Table {
    name: "class_metadata",
    columns: &[
        col("name", Text),
        nullable("units", Text),
        nullable("display_name", Text),
        nullable("description", Text),
    ],
    key: &["name"],
    clustered: true,
};

pub(crate) static TRAITS: Table = Table {
    name: "traits",
    columns: &[col("name", Text), col("created_at", Int)],
    key: &["name"],
    clustered: false,
};

pub(crate) static PROVIDERS: Table = Table {
    name: "providers",
    columns: &[
        col("id", Int),
        unique("uuid", Type::Uuid),
        unique("name", Text),
        col("generation", Int),
        nullable("parent_id", Int),
        col("root_id", Int),
        col("created_at", Int),
        col("updated_at", Int),
    ],
    key: &["id"],
    clustered: false,
};

pub(crate) static INVENTORIES: Table = Table {
    name: "inventories",
    columns: &[
        col("provider_id", Int),
        col("resource_class", Text),
        col("total", Int),
        col("reserved", Int),
        col("min_unit", Int),
        col("max_unit", Int),
        col("step_size", Int),
        col("allocation_ratio", Float),
    ],
    key: &["provider_id", "resource_class"],
    clustered: true,
};

pub(crate) static PROVIDER_TRAITS: Table = Table {
    name: "provider_traits",
    columns: &[col("provider_id", Int), col("trait", Text)],
    key: &["provider_id", "trait"],
    clustered: true,
};

pub(crate) static PROVIDER_AGGREGATES: Table = Table {
    name: "provider_aggregates",
    columns: &[col("provider_id", Int), col("aggregate", Type::Uuid)],
    key: &["provider_id", "aggregate"],
    clustered: true,
};

/// The consumers as the first schemas stored them, keyed by uuid, and their
/// allocations, keyed by the consumer's uuid: a new consumer's row and its
/// allocations each went into a leaf at a random place of its tree, two leaves that a
/// claim storm in a large cloud finds in no cache and the checkpoint copies apart.
/// Migrated to [`CONSUMERS`] and [`ALLOCATIONS`] ([`super::STASH_CONSUMERS`]).
pub(crate) static CONSUMERS_BY_UUID: Table = Table {
    name: "consumers",
    columns: &[
        col("uuid", Type::Uuid),
        col("project_id", Text),
        col("user_id", Text),
        nullable("consumer_type", Text),
        col("generation", Int),
        col("created_at", Int),
        col("updated_at", Int),
    ],
    key: &["uuid"],
    clustered: true,
};

pub(crate) static ALLOCATIONS_BY_UUID: Table = Table {
    name: "allocations",
    columns: &[
        col("consumer_uuid", Type::Uuid),
        col("provider_id", Int),
        col("resource_class", Text),
        col("used", Int),
    ],
    key: &["consumer_uuid", "provider_id", "resource_class"],
    clustered: true,
};

/// Consumers, numbered in the order they were made (issue 25). A new consumer's
/// row goes at the end of the table and its allocations at the end of theirs, on
/// pages that the claims before it wrote too; only the uuid's index takes an entry at
/// a random place. Nothing reads a consumer by its number but its allocations: the
/// view finds consumers by uuid, and the writes name them by uuid
/// ([`super::statement::Shape::DeleteOfParent`],
/// [`super::statement::Shape::InsertUnderParent`]).
pub(crate) static CONSUMERS: Table = Table {
    name: "consumers",
    columns: &[
        numbered("id"),
        unique("uuid", Type::Uuid),
        col("project_id", Text),
        col("user_id", Text),
        nullable("consumer_type", Text),
        col("generation", Int),
        col("created_at", Int),
        col("updated_at", Int),
    ],
    key: &["id"],
    clustered: false,
};

pub(crate) static ALLOCATIONS: Table = Table {
    name: "allocations",
    columns: &[
        col("consumer_id", Int),
        col("provider_id", Int),
        col("resource_class", Text),
        col("used", Int),
    ],
    key: &["consumer_id", "provider_id", "resource_class"],
    clustered: true,
};

/// The first schemas' index of allocations by provider, which later migrations drop
/// ([`super::DROP_ALLOCATIONS_BY_PROVIDER`]).
pub(crate) static ALLOCATIONS_BY_PROVIDER: Index = Index {
    name: "allocations_by_provider",
    table: &ALLOCATIONS_BY_UUID,
    column: "provider_id",
};

/// A class rename updates allocations and inventories by class. (PostgreSQL's
/// schema has these two indexes; SQLite's predates them.)
pub(crate) static ALLOCATIONS_BY_CLASS: Index = Index {
    name: "allocations_by_class",
    table: &ALLOCATIONS,
    column: "resource_class",
};

pub(crate) static INVENTORIES_BY_CLASS: Index = Index {
    name: "inventories_by_class",
    table: &INVENTORIES,
    column: "resource_class",
};

/// Claims, pending or ended. A claim's amounts name providers by uuid, which
/// outlives the provider for a claim that ended.
pub(crate) static CLAIMS: Table = Table {
    name: "claims",
    columns: &[
        col("uuid", Type::Uuid),
        col("consumer_uuid", Type::Uuid),
        col("project_id", Text),
        col("user_id", Text),
        nullable("consumer_type", Text),
        nullable("tag", Text),
        col("state", Text),
        col("created_at", Int),
        nullable("expires_at", Int),
        nullable("ended_at", Int),
    ],
    key: &["uuid"],
    clustered: true,
};

pub(crate) static CLAIM_ALLOCATIONS: Table = Table {
    name: "claim_allocations",
    columns: &[
        col("claim_uuid", Type::Uuid),
        col("provider_uuid", Type::Uuid),
        col("resource_class", Text),
        col("amount", Int),
    ],
    key: &["claim_uuid", "provider_uuid", "resource_class"],
    clustered: true,
};

/// Server groups (issue 44); their members are in [`SERVER_GROUP_MEMBERS`].
pub(crate) static SERVER_GROUPS: Table = Table {
    name: "server_groups",
    columns: &[
        col("uuid", Type::Uuid),
        col("name", Text),
        col("project_id", Text),
        col("user_id", Text),
        col("policy", Text),
        col("max_per_domain", Int),
        col("scope", Text),
        nullable("scope_prefix", Text),
        col("enforce_on_allocations", Int),
        col("created_at", Int),
        col("updated_at", Int),
    ],
    key: &["uuid"],
    clustered: true,
};

/// A group's members: consumers by uuid, which need not have a row (a member may
/// hold nothing).
pub(crate) static SERVER_GROUP_MEMBERS: Table = Table {
    name: "server_group_members",
    columns: &[
        col("group_uuid", Type::Uuid),
        col("consumer_uuid", Type::Uuid),
    ],
    key: &["group_uuid", "consumer_uuid"],
    clustered: true,
};

/// Web UI sessions logged out before their end (issue 46,
/// `Change::RevokeSession`): the session id's hash, and when the session would
/// have ended.
pub(crate) static REVOKED_SESSIONS: Table = Table {
    name: "revoked_sessions",
    columns: &[col("hash", Text), col("ends_at", Int)],
    key: &["hash"],
    clustered: true,
};

/// Drains (issue 44); their roots and claims are in [`DRAIN_ROOTS`] and
/// [`DRAIN_CLAIMS`].
pub(crate) static DRAINS: Table = Table {
    name: "drains",
    columns: &[
        col("uuid", Type::Uuid),
        col("state", Text),
        col("created_at", Int),
        nullable("ended_at", Int),
    ],
    key: &["uuid"],
    clustered: true,
};

/// A drain's roots, and whether it gave each `COMPUTE_STATUS_DISABLED`.
pub(crate) static DRAIN_ROOTS: Table = Table {
    name: "drain_roots",
    columns: &[
        col("drain_uuid", Type::Uuid),
        col("root_uuid", Type::Uuid),
        col("disabled", Int),
    ],
    key: &["drain_uuid", "root_uuid"],
    clustered: true,
};

/// A drain's consumers and their claims, in placing order.
pub(crate) static DRAIN_CLAIMS: Table = Table {
    name: "drain_claims",
    columns: &[
        col("drain_uuid", Type::Uuid),
        col("position", Int),
        col("consumer_uuid", Type::Uuid),
        col("claim_uuid", Type::Uuid),
    ],
    key: &["drain_uuid", "position"],
    clustered: true,
};

/// Named shapes (issue 47): a name and the query string it stands for.
pub(crate) static SHAPES: Table = Table {
    name: "shapes",
    columns: &[
        col("name", Text),
        col("request", Text),
        col("created_at", Int),
        col("updated_at", Int),
    ],
    key: &["name"],
    clustered: true,
};

/// The change log's columns (each engine names its log table: see its docs).
pub(crate) const LOG_COLUMNS: &[Column] =
    &[col("seq", Int), col("at", Int), col("changes", Type::Bytes)];
