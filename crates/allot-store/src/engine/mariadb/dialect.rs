//! MariaDB's spelling of the neutral statements (`crate::engine::sql`).
//!
//! - Text that is part of a key, unique or indexed is `VARCHAR(255)` (InnoDB
//!   indexes no `TEXT` whole; every name allot keys on is at most 255
//!   characters), other text `TEXT`; every table's collation is
//!   `utf8mb4_nopad_bin`, so that names compare byte for byte and `'a'` is not
//!   `'a '`, as on the other engines (MariaDB's default collation is
//!   case-insensitive and pads). Uuids are their 36 ASCII characters, sorted
//!   byte by byte as the shared load expects of text keys.
//! - Parameters are numbered here as SQLite numbers them (`?1`), because the
//!   shared statements use one parameter twice; the engine turns each into
//!   MariaDB's `?` and the list of which value goes where (`super::connection`).
//! - `NOT (a <=> b)` for `a IS DISTINCT FROM b`; `INSERT IGNORE` and `INSERT ...
//!   ON DUPLICATE KEY UPDATE` for the upserts.
//! - `CREATE ... IF NOT EXISTS`: MariaDB commits each DDL statement by itself, so
//!   a migration cut short must be able to run again.

use crate::engine::sql::{Column, Conflict, Dialect, Table, Type};

/// MariaDB's spelling of the statements.
pub(crate) struct MariaDb;

impl Dialect for MariaDb {
    const SLOT: usize = 2;
    /// InnoDB keeps every table's rows in its primary key.
    const CLUSTERED: &'static str = "";
    const TYPES: [&'static str; 5] = [
        "BIGINT",
        "DOUBLE",
        "TEXT",
        "CHAR(36) CHARACTER SET ascii COLLATE ascii_bin",
        "LONGBLOB",
    ];
    const PARAMETER: char = '?';
    const NUMBERED: &'static str = " AUTO_INCREMENT";
    const TABLE_OPTIONS: &'static str =
        " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin";
    const IF_NOT_EXISTS: &'static str = " IF NOT EXISTS";

    fn column_type(column: &Column, keyed: bool) -> &'static str {
        match column.ty {
            Type::Text if keyed => "VARCHAR(255)",
            ty => Self::type_name(ty),
        }
    }

    fn distinct(a: &str, b: &str) -> String {
        format!("NOT ({a} <=> {b})")
    }

    fn insert(table: &Table, conflict: Conflict, columns: &str, values: &str) -> String {
        let into = format!("INTO {} ({columns}) VALUES ({values})", table.name);
        match conflict {
            Conflict::Fail => format!("INSERT {into}"),
            // Changes no row when the key, or a unique value, is taken (as SQLite's
            // `OR IGNORE` and PostgreSQL's `ON CONFLICT DO NOTHING`).
            Conflict::Ignore => format!("INSERT IGNORE {into}"),
            Conflict::Replace => {
                let set: Vec<String> = table
                    .columns
                    .iter()
                    .filter(|c| !table.key.contains(&c.name))
                    .map(|c| format!("{0} = VALUES({0})", c.name))
                    .collect();
                format!("INSERT {into} ON DUPLICATE KEY UPDATE {}", set.join(", "))
            }
        }
    }
}

/// A statement as rendered (`?1`, `?2`, ... as in SQLite), turned into MariaDB's
/// (`?` each) and, for each `?` in order, the index of the value it takes.
pub(super) fn positional(sql: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut chars = sql.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        out.push(c);
        if c != '?' {
            continue;
        }
        let mut n = 0usize;
        let mut digits = false;
        while let Some(&(_, d)) = chars.peek() {
            let Some(digit) = d.to_digit(10) else { break };
            n = n * 10 + digit as usize;
            digits = true;
            chars.next();
        }
        order.push(if digits { n - 1 } else { order.len() });
    }
    (out, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_become_positional_ones() {
        let (sql, order) = positional("UPDATE t SET a = ?1 WHERE b = ?2 AND NOT (a <=> ?1)");
        assert_eq!(sql, "UPDATE t SET a = ? WHERE b = ? AND NOT (a <=> ?)");
        assert_eq!(order, [0, 1, 0]);
        let (sql, order) = positional("SELECT x FROM t WHERE y > ? AND z = ?");
        assert_eq!(sql, "SELECT x FROM t WHERE y > ? AND z = ?");
        assert_eq!(order, [0, 1]);
    }
}
