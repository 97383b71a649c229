//! The statements every table's writer shares: rows of literals inserted many to a
//! statement, the ids the database gave them read back, and the one quoting rule
//! both sessions are set to.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Context};

use crate::conn::Conn;

/// Rows to one INSERT statement.
const BATCH: usize = 1000;

/// Reads `SELECT key, id` into a map.
pub(super) async fn ids(conn: &mut Conn, sql: &str) -> anyhow::Result<HashMap<String, i64>> {
    conn.rows(sql)
        .await?
        .into_iter()
        .map(|row| match row.as_slice() {
            [Some(key), Some(id)] => Ok((key.clone(), id.parse()?)),
            _ => Err(anyhow!("{sql}: an unexpected row")),
        })
        .collect()
}

/// The id the database gave `key` (a row this export has just written): a key it
/// cannot find back means the database changed it on the way in, which the strict
/// `sql_mode` should have refused; an error, never a panic.
pub(super) fn id_in(ids: &HashMap<String, i64>, key: &str, what: &str) -> anyhow::Result<i64> {
    ids.get(key)
        .copied()
        .ok_or_else(|| anyhow!("the {what} {key:?} was written but is not found back"))
}

/// Inserts rows of literals, [`BATCH`] to a statement.
pub(super) async fn insert(
    conn: &mut Conn,
    table: &str,
    columns: &str,
    rows: &[Vec<String>],
) -> anyhow::Result<()> {
    let mut start = 0;
    while start < rows.len() {
        let end = (start + BATCH).min(rows.len());
        let values: Vec<String> = rows[start..end]
            .iter()
            .map(|r| format!("({})", r.join(", ")))
            .collect();
        conn.execute(&format!(
            "INSERT INTO {table} ({columns}) VALUES {}",
            values.join(", ")
        ))
        .await
        .with_context(|| format!("writing Placement's {table}"))?;
        start = end;
    }
    Ok(())
}

/// A string literal under the one quoting rule both sessions are set to.
pub(super) fn text(s: &str) -> anyhow::Result<String> {
    if s.contains('\0') {
        bail!("{s:?} holds a NUL character, which neither database stores");
    }
    Ok(format!("'{}'", s.replace('\'', "''")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_doubles_its_quotes_and_refuses_nul() {
        assert_eq!(text("it's").unwrap(), "'it''s'");
        assert_eq!(text(r"a\b").unwrap(), r"'a\b'");
        assert!(text("a\0b").unwrap_err().to_string().contains("NUL"));
    }
}
