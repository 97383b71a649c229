//! The statements a change may write, whatever the dialect: a [`Statement`] is a
//! shape (an insert into a table, an update or delete keyed by some of its
//! columns, a row under a parent found by its uuid) with its text in each dialect,
//! rendered when first used and kept for the life of the process; an [`Op`] is one
//! of them with its parameters as neutral [`Value`]s.

use std::sync::OnceLock;

use allot_core::{Change, Uuid};

use super::dialect::{Conflict, Dialect, DIALECTS};
use super::tables::{Column, Table, Type};

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
    /// Deletes the rows whose `column` is at most the one parameter.
    DeleteUpTo {
        table: &'static Table,
        column: &'static str,
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
    /// The statement in a form that fails by itself (a duplicate key, or NULL in a
    /// column that takes none) unless it writes exactly one row, where its shape
    /// has one: an insert that does not ignore a conflict, and an insert under a
    /// parent that takes the parent's key as a value (NULL when there is no
    /// parent). For an engine that does not read each statement's count (MariaDB
    /// runs a write as one block: `mariadb::script`), so that such an op
    /// (`Op::one_row_of`) needs no check of its own.
    pub checked: Option<String>,
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
            rendered: [OnceLock::new(), OnceLock::new(), OnceLock::new()],
        }
    }

    /// An insert of one row of every column of `table` ([`Shape::Insert`]).
    pub(super) const fn insert(table: &'static Table, conflict: Conflict) -> Statement {
        Statement::new(Shape::Insert(table, conflict))
    }

    /// An update of `set` keyed by `filter` ([`Shape::Update`]).
    pub(super) const fn update(
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

    /// An update of `set` keyed by `filter` that writes only a row where some
    /// column of `set` differs ([`Shape::Update`] with `if_changed`).
    pub(super) const fn update_if_changed(
        table: &'static Table,
        set: &'static [&'static str],
        filter: &'static [&'static str],
    ) -> Statement {
        Statement::new(Shape::Update {
            table,
            set,
            filter,
            if_changed: true,
        })
    }

    /// A delete keyed by `filter` ([`Shape::Delete`]).
    pub(super) const fn delete(
        table: &'static Table,
        filter: &'static [&'static str],
    ) -> Statement {
        Statement::new(Shape::Delete { table, filter })
    }

    /// A delete of the rows whose `column` is at most the parameter
    /// ([`Shape::DeleteUpTo`]).
    pub(super) const fn delete_up_to(table: &'static Table, column: &'static str) -> Statement {
        Statement::new(Shape::DeleteUpTo { table, column })
    }

    /// A delete of the rows under a parent found by `by` ([`Shape::DeleteOfParent`]).
    pub(super) const fn delete_of_parent(
        table: &'static Table,
        parent: &'static Table,
        by: &'static str,
    ) -> Statement {
        Statement::new(Shape::DeleteOfParent { table, parent, by })
    }

    /// An insert of a row under a parent found by `by` ([`Shape::InsertUnderParent`]).
    pub(super) const fn insert_under_parent(
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
        match self.shape {
            Shape::Insert(table, conflict) => render_insert::<D>(table, conflict),
            Shape::Update {
                table,
                set,
                filter,
                if_changed,
            } => Rendered {
                sql: render_update::<D>(table, set, filter, if_changed),
                rows: None,
                checked: None,
            },
            Shape::Delete { table, filter } => Rendered {
                sql: format!(
                    "DELETE FROM {} WHERE {}",
                    table.name,
                    equal::<D>(filter, 1, " AND ")
                ),
                rows: None,
                checked: None,
            },
            Shape::DeleteUpTo { table, column } => Rendered {
                sql: format!(
                    "DELETE FROM {} WHERE {column} <= {}",
                    table.name,
                    D::placeholder(1)
                ),
                rows: None,
                checked: None,
            },
            Shape::DeleteOfParent { table, parent, by } => Rendered {
                sql: render_delete_of_parent::<D>(table, parent, by),
                rows: None,
                checked: None,
            },
            Shape::InsertUnderParent { table, parent, by } => Rendered {
                sql: render_insert_under_parent::<D>(table, parent, by),
                rows: None,
                checked: Some(render_insert_under_parent_checked::<D>(table, parent, by)),
            },
        }
    }
}

/// `a = $1 AND b = $2`: each of `columns` equal to its parameter, numbering from
/// `first`, joined by `join`.
fn equal<D: Dialect>(columns: &[&str], first: usize, join: &str) -> String {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = {}", D::placeholder(first + i)))
        .collect::<Vec<_>>()
        .join(join)
}

/// [`Shape::Insert`] in dialect `D`, with its many-rows form where there is one.
fn render_insert<D: Dialect>(table: &Table, conflict: Conflict) -> Rendered {
    let given: Vec<&Column> = table.columns.iter().filter(|c| !c.numbered).collect();
    let columns: Vec<&str> = given.iter().map(|c| c.name).collect();
    let columns = columns.join(", ");
    let values = (1..=given.len())
        .map(D::placeholder)
        .collect::<Vec<_>>()
        .join(", ");
    Rendered {
        sql: D::insert(table, conflict, &columns, &values),
        rows: match conflict {
            Conflict::Fail => D::insert_rows(table, &given, &columns),
            Conflict::Ignore | Conflict::Replace => None,
        },
        // An upsert may write one row or two (MariaDB counts a replaced row twice).
        checked: match conflict {
            Conflict::Fail | Conflict::Ignore => {
                Some(D::insert(table, Conflict::Fail, &columns, &values))
            }
            Conflict::Replace => None,
        },
    }
}

/// [`Shape::Update`] in dialect `D`.
fn render_update<D: Dialect>(
    table: &Table,
    set: &[&str],
    filter: &[&str],
    if_changed: bool,
) -> String {
    let mut sql = format!(
        "UPDATE {} SET {} WHERE {}",
        table.name,
        equal::<D>(set, 1, ", "),
        equal::<D>(filter, set.len() + 1, " AND ")
    );
    if if_changed {
        // A comparison in which NULL equals NULL; the set's parameters are
        // used twice, by number.
        let changed: Vec<String> = set
            .iter()
            .enumerate()
            .map(|(i, c)| D::distinct(c, &D::placeholder(1 + i)))
            .collect();
        sql.push_str(&format!(" AND ({})", changed.join(" OR ")));
    }
    sql
}

/// [`Shape::DeleteOfParent`] in dialect `D`.
fn render_delete_of_parent<D: Dialect>(table: &Table, parent: &Table, by: &str) -> String {
    format!(
        "DELETE FROM {} WHERE {} = (SELECT {} FROM {} WHERE {by} = {})",
        table.name,
        table.columns[0].name,
        parent.key[0],
        parent.name,
        D::placeholder(1)
    )
}

/// [`Shape::InsertUnderParent`] in dialect `D`.
fn render_insert_under_parent<D: Dialect>(table: &Table, parent: &Table, by: &str) -> String {
    let columns: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    let values: Vec<String> = table.columns[1..]
        .iter()
        .enumerate()
        .map(|(i, c)| D::typed_placeholder(i + 2, c.ty))
        .collect();
    format!(
        "INSERT INTO {} ({}) SELECT {}, {} FROM {} WHERE {by} = {}",
        table.name,
        columns.join(", "),
        parent.key[0],
        values.join(", "),
        parent.name,
        D::placeholder(1)
    )
}

/// [`Shape::InsertUnderParent`] as [`Rendered::checked`] has it: the parent's key
/// a value of the row, so that there is no row without a parent but an error.
fn render_insert_under_parent_checked<D: Dialect>(
    table: &Table,
    parent: &Table,
    by: &str,
) -> String {
    let columns: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    let values: Vec<String> = (2..=table.columns.len()).map(D::placeholder).collect();
    format!(
        "INSERT INTO {} ({}) VALUES ((SELECT {} FROM {} WHERE {by} = {}), {})",
        table.name,
        columns.join(", "),
        parent.key[0],
        parent.name,
        D::placeholder(1),
        values.join(", ")
    )
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
    /// An integer, or NULL.
    pub(super) fn opt_int(value: Option<i64>) -> Value<'a> {
        value.map_or(Value::Null(Type::Int), Value::Int)
    }

    /// A text, or NULL.
    pub(super) fn opt_text(value: Option<&'a str>) -> Value<'a> {
        value.map_or(Value::Null(Type::Text), Value::Text)
    }

    /// A count or an id: stored as the `i64` of the same bits, read back the same way.
    pub(super) fn count(value: u64) -> Value<'a> {
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
