//! The migrations' steps ([`Ddl`]: a table, an index, or raw SQL) and their
//! rendering in one dialect ([`script`]), with the raw steps that both engines'
//! migrations share (the same SQL in both dialects).

use super::tables::{Index, Table};
use super::Dialect;

/// One step of a migration script.
#[derive(Debug)]
pub(crate) enum Ddl {
    Table(&'static Table),
    Index(&'static Index),
    /// Anything else, in the engine's own SQL.
    Raw(&'static str),
}

/// Schema version 7's first half: the consumers and allocations of
/// [`super::CONSUMERS_BY_UUID`] and [`super::ALLOCATIONS_BY_UUID`] set aside in
/// temporary tables and the old tables dropped, so that [`super::CONSUMERS`] and
/// [`super::ALLOCATIONS`] can be created under the same names (renaming them instead would leave PostgreSQL's key and
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

/// No statement reads allocations by provider (queries run on the view, and a
/// provider with allocations cannot be deleted), so the index only cost each claim a
/// leaf written at a random place in one more tree (issue 25).
pub(crate) const DROP_ALLOCATIONS_BY_PROVIDER: &str =
    "DROP INDEX IF EXISTS allocations_by_provider;";

/// Whether one of `steps` indexes `column` of `table`.
fn indexed(steps: &[Ddl], table: &Table, column: &str) -> bool {
    steps.iter().any(|step| {
        matches!(step, Ddl::Index(index)
            if std::ptr::eq(index.table, table) && index.column == column)
    })
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
                        let keyed = table.key.contains(&c.name)
                            || c.unique
                            || indexed(steps, table, c.name);
                        let mut line = format!("    {} {}", c.name, D::column_type(c, keyed));
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
                    "CREATE TABLE{} {} (\n{}\n){after}{};\n",
                    D::IF_NOT_EXISTS,
                    table.name,
                    lines.join(",\n"),
                    D::TABLE_OPTIONS
                ));
            }
            Ddl::Index(index) => out.push_str(&format!(
                "CREATE INDEX{} {} ON {} ({});\n",
                D::IF_NOT_EXISTS,
                index.name,
                index.table.name,
                index.column
            )),
            Ddl::Raw(sql) => {
                out.push_str(sql);
                out.push('\n');
            }
        }
    }
    out
}
