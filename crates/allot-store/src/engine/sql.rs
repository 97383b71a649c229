//! What every engine stores, described once: the tables, and the statements each
//! [`Change`] becomes.
//!
//! Nothing here is in any engine's SQL dialect. The tables are lists of columns of
//! a neutral [`Type`]; the statements are shapes (an insert into a table, an update
//! or delete keyed by some of its columns); a change becomes a list of [`Op`]s, each
//! a statement with its parameters as neutral [`Value`]s. An engine implements
//! [`Dialect`], which says only how its SQL spells what differs (type names,
//! placeholders, upserts, a table without a rowid), and runs the `Op`s its own way
//! (SQLite one at a time, PostgreSQL pipelined). A statement's text is rendered once
//! per dialect and kept for the life of the process, so that the engines' prepared
//! statement caches see the same `&'static str` every time.
//!
//! The schema of a database that exists already must not change under it: the
//! engines' migrations list which of these tables (and indexes) each version
//! creates, and a table's description here must keep rendering what those versions
//! created.

use std::sync::OnceLock;

use allot_core::{Change, Uuid};

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
/// Migrated to [`CONSUMERS`] and [`ALLOCATIONS`] ([`STASH_CONSUMERS`]).
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
/// ([`Shape::DeleteOfParent`], [`Shape::InsertUnderParent`]).
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

/// Schema version 7's first half: the consumers and allocations of
/// [`CONSUMERS_BY_UUID`] and [`ALLOCATIONS_BY_UUID`] set aside in temporary tables and
/// the old tables dropped, so that [`CONSUMERS`] and [`ALLOCATIONS`] can be created
/// under the same names (renaming them instead would leave PostgreSQL's key and
/// unique constraints with the names the new tables' need).
pub(crate) const STASH_CONSUMERS: &str = "\
CREATE TEMP TABLE stashed_consumers AS SELECT uuid, project_id, user_id, consumer_type, \
generation, created_at, updated_at FROM consumers;
CREATE TEMP TABLE stashed_allocations AS SELECT consumer_uuid, provider_id, resource_class, \
used FROM allocations;
DROP TABLE allocations;
DROP TABLE consumers;";

/// Its second half: the consumers numbered in the order they were made, and each
/// allocation under its consumer's number. An allocation whose consumer has no row
/// (no write leaves one) is not carried over, as the load skips it.
pub(crate) const RESTORE_CONSUMERS: &str = "\
INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, created_at, \
updated_at) SELECT uuid, project_id, user_id, consumer_type, generation, created_at, \
updated_at FROM stashed_consumers ORDER BY created_at, uuid;
INSERT INTO allocations (consumer_id, provider_id, resource_class, used) \
SELECT c.id, a.provider_id, a.resource_class, a.used FROM stashed_allocations a \
JOIN consumers c ON c.uuid = a.consumer_uuid;
DROP TABLE stashed_allocations;
DROP TABLE stashed_consumers;";

/// The first schemas' index of allocations by provider, which later migrations drop
/// ([`DROP_ALLOCATIONS_BY_PROVIDER`]).
pub(crate) static ALLOCATIONS_BY_PROVIDER: Index = Index {
    name: "allocations_by_provider",
    table: &ALLOCATIONS_BY_UUID,
    column: "provider_id",
};

/// No statement reads allocations by provider (queries run on the view, and a
/// provider with allocations cannot be deleted), so the index only cost each claim a
/// leaf written at a random place in one more tree (issue 25).
pub(crate) const DROP_ALLOCATIONS_BY_PROVIDER: &str =
    "DROP INDEX IF EXISTS allocations_by_provider;";

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

/// The change log's columns (each engine names its log table: see its docs).
pub(crate) const LOG_COLUMNS: &[Column] =
    &[col("seq", Int), col("at", Int), col("changes", Type::Bytes)];

/// One step of a migration script.
#[derive(Debug)]
pub(crate) enum Ddl {
    Table(&'static Table),
    Index(&'static Index),
    /// Anything else, in the engine's own SQL.
    Raw(&'static str),
}

/// What one engine's SQL spells its own way.
pub(crate) trait Dialect {
    /// Which of a statement's rendered texts is this dialect's (each dialect has
    /// its own number below [`DIALECTS`]).
    const SLOT: usize;
    /// What `CREATE TABLE` follows a table's closing parenthesis with when its key
    /// is the row.
    const CLUSTERED: &'static str;
    /// The column type each [`Type`] is stored as, in the order of its variants.
    const TYPES: [&'static str; 5];
    /// What a numbered parameter's number follows (`?1` or `$1`).
    const PARAMETER: char;
    /// What follows the type of a column the engine numbers (see [`Column`]).
    const NUMBERED: &'static str;

    /// The column type a [`Type`] is stored as.
    fn type_name(ty: Type) -> &'static str {
        Self::TYPES[ty as usize]
    }

    /// The `n`th parameter of a statement (from 1).
    fn placeholder(n: usize) -> String {
        format!("{}{n}", Self::PARAMETER)
    }

    /// The `n`th parameter where nothing around it says its type (a `SELECT`'s
    /// list): as [`Dialect::placeholder`] unless the dialect must be told.
    fn typed_placeholder(n: usize, _ty: Type) -> String {
        Self::placeholder(n)
    }

    /// An insert of one row into `table`, with `columns` and `values` already
    /// spelled (comma-separated), and what to do about a row with the same key.
    fn insert(table: &Table, conflict: Conflict, columns: &str, values: &str) -> String;
    /// An insert of any number of rows at once, their values given one parameter
    /// per column of `given` (an array of that column's values; `columns` spells
    /// their names), if the dialect has one. Only for inserts that fail on a
    /// conflict, where one statement for many rows has the same outcome as one for
    /// each. None by default: one insert per row.
    fn insert_rows(_table: &Table, _given: &[&Column], _columns: &str) -> Option<String> {
        None
    }
}

/// How many dialects there are (the engines).
pub(crate) const DIALECTS: usize = 2;

/// What an insert does about a row already there with the same key (or a unique
/// value of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// It fails (the transaction with it).
    Fail,
    /// Nothing is inserted: the statement changes no row.
    Ignore,
    /// The new row replaces it.
    Replace,
}

/// The `CREATE` statements of one migration.
pub(crate) fn script<D: Dialect>(steps: &[Ddl]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Ddl::Table(table) => {
                let mut lines: Vec<String> = table
                    .columns
                    .iter()
                    .map(|c| {
                        let mut line = format!("    {} {}", c.name, D::type_name(c.ty));
                        if c.numbered {
                            line.push_str(D::NUMBERED);
                        }
                        if table.key == [c.name] {
                            line.push_str(" PRIMARY KEY");
                        } else if !c.null {
                            line.push_str(" NOT NULL");
                        }
                        if c.unique {
                            line.push_str(" UNIQUE");
                        }
                        line
                    })
                    .collect();
                if table.key.len() > 1 {
                    lines.push(format!("    PRIMARY KEY ({})", table.key.join(", ")));
                }
                let after = if table.clustered { D::CLUSTERED } else { "" };
                out.push_str(&format!(
                    "CREATE TABLE {} (\n{}\n){after};\n",
                    table.name,
                    lines.join(",\n")
                ));
            }
            Ddl::Index(index) => out.push_str(&format!(
                "CREATE INDEX {} ON {} ({});\n",
                index.name, index.table.name, index.column
            )),
            Ddl::Raw(sql) => {
                out.push_str(sql);
                out.push('\n');
            }
        }
    }
    out
}

/// What a statement does, whatever the dialect.
#[derive(Debug)]
enum Shape {
    /// Inserts one row of every column of the table, in order.
    Insert(&'static Table, Conflict),
    /// Sets `set` where every column of `filter` is equal to its parameter; the
    /// parameters are `set`'s, then `filter`'s. With `if_changed`, only where some
    /// column of `set` differs from its parameter, so that a row that holds those
    /// values already is not written at all: an update of an indexed column
    /// rewrites the column's index entry even when the value is the same (SQLite
    /// deletes and reinserts it).
    Update {
        table: &'static Table,
        set: &'static [&'static str],
        filter: &'static [&'static str],
        if_changed: bool,
    },
    /// Deletes the rows where every column of `filter` is equal to its parameter.
    Delete {
        table: &'static Table,
        filter: &'static [&'static str],
    },
    /// Deletes the rows of `table` under the row of `parent` whose column `by` is
    /// equal to the one parameter: those whose first column holds the parent's
    /// (numbered) key.
    DeleteOfParent {
        table: &'static Table,
        parent: &'static Table,
        by: &'static str,
    },
    /// Inserts one row of `table` under the row of `parent` whose column `by` is
    /// equal to the first parameter: its first column is the parent's (numbered)
    /// key, the other parameters are its other columns, in order. Inserts nothing if
    /// there is no such parent (its op then fails the write: `Op::one_row_of`).
    InsertUnderParent {
        table: &'static Table,
        parent: &'static Table,
        by: &'static str,
    },
}

/// A statement's text in one dialect.
#[derive(Debug)]
pub(crate) struct Rendered {
    /// The statement itself.
    pub sql: String,
    /// For an insert that fails on a conflict, the dialect's statement for many rows
    /// at once, if it has one ([`Dialect::insert_rows`]).
    pub rows: Option<String>,
}

/// One statement that a change may write, with its text in each dialect, rendered
/// when first used.
#[derive(Debug)]
pub(crate) struct Statement {
    shape: Shape,
    rendered: [OnceLock<Rendered>; DIALECTS],
}

impl Statement {
    const fn new(shape: Shape) -> Statement {
        Statement {
            shape,
            rendered: [OnceLock::new(), OnceLock::new()],
        }
    }

    const fn insert(table: &'static Table, conflict: Conflict) -> Statement {
        Statement::new(Shape::Insert(table, conflict))
    }

    const fn update(
        table: &'static Table,
        set: &'static [&'static str],
        filter: &'static [&'static str],
    ) -> Statement {
        Statement::new(Shape::Update {
            table,
            set,
            filter,
            if_changed: false,
        })
    }

    const fn delete(table: &'static Table, filter: &'static [&'static str]) -> Statement {
        Statement::new(Shape::Delete { table, filter })
    }

    const fn delete_of_parent(
        table: &'static Table,
        parent: &'static Table,
        by: &'static str,
    ) -> Statement {
        Statement::new(Shape::DeleteOfParent { table, parent, by })
    }

    const fn insert_under_parent(
        table: &'static Table,
        parent: &'static Table,
        by: &'static str,
    ) -> Statement {
        Statement::new(Shape::InsertUnderParent { table, parent, by })
    }

    /// The statement in dialect `D`.
    pub fn rendered<D: Dialect>(&'static self) -> &'static Rendered {
        self.rendered[D::SLOT].get_or_init(|| self.render::<D>())
    }

    /// The statement's text in dialect `D`.
    pub fn sql<D: Dialect>(&'static self) -> &'static str {
        &self.rendered::<D>().sql
    }

    fn render<D: Dialect>(&self) -> Rendered {
        // `a = $1 AND b = $2`, numbering from `first`.
        let equal = |columns: &[&str], first: usize, join: &str| -> String {
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{c} = {}", D::placeholder(first + i)))
                .collect::<Vec<_>>()
                .join(join)
        };
        match self.shape {
            Shape::Insert(table, conflict) => {
                let given: Vec<&Column> = table.columns.iter().filter(|c| !c.numbered).collect();
                let columns: Vec<&str> = given.iter().map(|c| c.name).collect();
                let columns = columns.join(", ");
                let values: Vec<String> = (1..=given.len()).map(D::placeholder).collect();
                Rendered {
                    sql: D::insert(table, conflict, &columns, &values.join(", ")),
                    rows: match conflict {
                        Conflict::Fail => D::insert_rows(table, &given, &columns),
                        Conflict::Ignore | Conflict::Replace => None,
                    },
                }
            }
            Shape::Update {
                table,
                set,
                filter,
                if_changed,
            } => {
                let mut sql = format!(
                    "UPDATE {} SET {} WHERE {}",
                    table.name,
                    equal(set, 1, ", "),
                    equal(filter, set.len() + 1, " AND ")
                );
                if if_changed {
                    // `IS DISTINCT FROM` is the comparison in which NULL equals NULL,
                    // in both dialects (SQLite has it since 3.39); the set's
                    // parameters are used twice, by number.
                    let changed: Vec<String> = set
                        .iter()
                        .enumerate()
                        .map(|(i, c)| format!("{c} IS DISTINCT FROM {}", D::placeholder(1 + i)))
                        .collect();
                    sql.push_str(&format!(" AND ({})", changed.join(" OR ")));
                }
                Rendered { sql, rows: None }
            }
            Shape::Delete { table, filter } => Rendered {
                sql: format!(
                    "DELETE FROM {} WHERE {}",
                    table.name,
                    equal(filter, 1, " AND ")
                ),
                rows: None,
            },
            Shape::DeleteOfParent { table, parent, by } => Rendered {
                sql: format!(
                    "DELETE FROM {} WHERE {} = (SELECT {} FROM {} WHERE {by} = {})",
                    table.name,
                    table.columns[0].name,
                    parent.key[0],
                    parent.name,
                    D::placeholder(1)
                ),
                rows: None,
            },
            Shape::InsertUnderParent { table, parent, by } => {
                let columns: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
                let values: Vec<String> = table.columns[1..]
                    .iter()
                    .enumerate()
                    .map(|(i, c)| D::typed_placeholder(i + 2, c.ty))
                    .collect();
                Rendered {
                    sql: format!(
                        "INSERT INTO {} ({}) SELECT {}, {} FROM {} WHERE {by} = {}",
                        table.name,
                        columns.join(", "),
                        parent.key[0],
                        values.join(", "),
                        parent.name,
                        D::placeholder(1)
                    ),
                    rows: None,
                }
            }
        }
    }
}

/// A parameter of a statement, borrowed from the change it writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Int(i64),
    Float(f64),
    Text(&'a str),
    Uuid(Uuid),
    /// NULL, in a column of this type.
    Null(Type),
}

impl<'a> Value<'a> {
    fn opt_int(value: Option<i64>) -> Value<'a> {
        value.map_or(Value::Null(Type::Int), Value::Int)
    }

    fn opt_text(value: Option<&'a str>) -> Value<'a> {
        value.map_or(Value::Null(Type::Text), Value::Text)
    }

    /// A count or an id: stored as the `i64` of the same bits, read back the same way.
    fn count(value: u64) -> Value<'a> {
        Value::Int(value as i64)
    }
}

/// One statement of a write, with its parameters.
#[derive(Debug)]
pub(crate) struct Op<'a> {
    pub statement: &'static Statement,
    pub params: Vec<Value<'a>>,
    /// Set when the statement must change exactly one row: the change whose
    /// precondition (a generation, or the absence of the row it creates) failed
    /// if it changes none.
    pub one_row_of: Option<&'a Change>,
}

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
static MOVE_PROVIDER: Statement = Statement::new(Shape::Update {
    table: &PROVIDERS,
    set: &["uuid", "name", "parent_id", "root_id"],
    filter: &["id"],
    if_changed: true,
});
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

/// Appends the statements that write `change` to `out`, in the order they must run.
pub(crate) fn ops<'a>(change: &'a Change, out: &mut Vec<Op<'a>>) {
    // A consumer's allocations right after its creation (as a plan writes a new
    // consumer's claim) replace nothing: a consumer this write created has none (a
    // number SQLite hands out again, once the largest consumer was deleted, lost its
    // allocations with it), so their delete, a lookup in two trees per claim, is left
    // out.
    let after_creation = match change {
        Change::SetAllocations(uuid, _) => out.last().is_some_and(|op| {
            std::ptr::eq(op.statement, &CREATE_CONSUMER)
                && op.params.first() == Some(&Value::Uuid(*uuid))
        }),
        _ => false,
    };
    let mut push = |statement: &'static Statement, params: Vec<Value<'a>>| {
        out.push(Op {
            statement,
            params,
            one_row_of: None,
        });
    };
    match change {
        Change::PutClass { record, old_name } => {
            let name = Value::Text(record.name.as_str());
            if let Some(old) = old_name {
                let old = Value::Text(old.as_str());
                push(&DELETE_CLASS, vec![old]);
                // Rows refer to classes by name: a rename carries them along.
                for rename in [
                    &RENAME_IN_INVENTORIES,
                    &RENAME_IN_ALLOCATIONS,
                    &RENAME_IN_CLAIMS,
                    &RENAME_METADATA,
                ] {
                    push(rename, vec![name, old]);
                }
            }
            push(
                &PUT_CLASS,
                vec![
                    name,
                    Value::Int(record.created_at),
                    Value::Int(record.updated_at),
                ],
            );
        }
        Change::DeleteClass(name) => {
            let name = Value::Text(name.as_str());
            push(&DELETE_CLASS, vec![name]);
            push(&DELETE_METADATA, vec![name]);
        }
        Change::SetClassMetadata(name, metadata) => {
            let name = Value::Text(name.as_str());
            match metadata {
                Some(m) => push(
                    &PUT_METADATA,
                    vec![
                        name,
                        Value::opt_text(m.units.as_deref()),
                        Value::opt_text(m.display_name.as_deref()),
                        Value::opt_text(m.description.as_deref()),
                    ],
                ),
                None => push(&DELETE_METADATA, vec![name]),
            }
        }
        Change::PutTrait(record) => push(
            &PUT_TRAIT,
            vec![
                Value::Text(record.name.as_str()),
                Value::Int(record.created_at),
            ],
        ),
        Change::DeleteTrait(name) => push(&DELETE_TRAIT, vec![Value::Text(name.as_str())]),
        Change::PutProvider {
            row,
            previous_generation,
        } => {
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
                        params: vec![generation, updated_at, id, Value::count(*previous)],
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
        Change::DeleteProvider(id) => {
            let id = Value::count(id.0);
            for statement in [
                &DELETE_INVENTORIES,
                &DELETE_TRAITS,
                &DELETE_AGGREGATES,
                &DELETE_PROVIDER,
            ] {
                push(statement, vec![id]);
            }
        }
        Change::SetInventories(id, inventories) => {
            let id = Value::count(id.0);
            push(&DELETE_INVENTORIES, vec![id]);
            for (class, inv) in inventories {
                push(
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
        Change::SetTraits(id, traits) => {
            let id = Value::count(id.0);
            push(&DELETE_TRAITS, vec![id]);
            for name in traits {
                push(&INSERT_TRAIT, vec![id, Value::Text(name.as_str())]);
            }
        }
        Change::SetAggregates(id, aggregates) => {
            let id = Value::count(id.0);
            push(&DELETE_AGGREGATES, vec![id]);
            for aggregate in aggregates {
                push(&INSERT_AGGREGATE, vec![id, Value::Uuid(*aggregate)]);
            }
        }
        Change::PutConsumer {
            row,
            previous_generation,
        } => {
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
                        Value::count(*previous),
                    ],
                ),
            };
            out.push(Op {
                statement,
                params,
                one_row_of: Some(change),
            });
        }
        Change::PutClaim(claim) => {
            let uuid = Value::Uuid(claim.uuid);
            push(
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
        Change::DeleteClaim(uuid) => {
            let uuid = Value::Uuid(*uuid);
            push(&DELETE_CLAIM_AMOUNTS, vec![uuid]);
            push(&DELETE_CLAIM, vec![uuid]);
        }
        Change::DeleteConsumer(uuid) => {
            let uuid = Value::Uuid(*uuid);
            push(&DELETE_ALLOCATIONS, vec![uuid]);
            push(&DELETE_CONSUMER, vec![uuid]);
        }
        Change::SetAllocations(uuid, allocations) => {
            let uuid = Value::Uuid(*uuid);
            if !after_creation {
                push(&DELETE_ALLOCATIONS, vec![uuid]);
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::postgres::Postgres;
    use crate::engine::sqlite::Sqlite;
    use allot_core::{ProviderId, ResourceClass, TraitName};

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
