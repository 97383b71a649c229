//! What one engine's SQL spells its own way ([`Dialect`]: type names,
//! placeholders, upserts, inserts of many rows), and what an insert does about a
//! row already there ([`Conflict`]). Each engine implements the trait once; the
//! statements are rendered through it (`super::statement`).

use super::tables::{Column, Table, Type};

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
    /// What `CREATE TABLE` follows every table's closing parenthesis with (after
    /// [`Dialect::CLUSTERED`]): the storage engine and collation, where the
    /// server's defaults are not what allot needs.
    const TABLE_OPTIONS: &'static str = "";
    /// What follows `CREATE TABLE` and `CREATE INDEX` (` IF NOT EXISTS` where a
    /// migration cannot be one transaction, so that one cut short can run again).
    const IF_NOT_EXISTS: &'static str = "";

    /// The column type a [`Type`] is stored as.
    fn type_name(ty: Type) -> &'static str {
        Self::TYPES[ty as usize]
    }

    /// The type of `column` in `CREATE TABLE`; `keyed` when it is part of a key, a
    /// unique column or indexed (where some engines cannot take any length of
    /// text). [`Dialect::type_name`] by default.
    fn column_type(column: &Column, _keyed: bool) -> &'static str {
        Self::type_name(column.ty)
    }

    /// The condition that `a` and `b` differ, NULL being equal to NULL.
    fn distinct(a: &str, b: &str) -> String {
        format!("{a} IS DISTINCT FROM {b}")
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
pub(crate) const DIALECTS: usize = 3;

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
