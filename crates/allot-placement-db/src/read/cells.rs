//! Reading the cells of Placement's rows, which both drivers hand over as text: a
//! row read left to right, and the two checks every table's reader makes (an id
//! that names a row of another table, a count that must not be negative).

use std::collections::HashMap;

use anyhow::anyhow;
use uuid::Uuid;

/// Placement's names (of resource classes, traits, projects, ...) by their row id.
pub(super) type Names = HashMap<i64, String>;

/// The cells of one row, read left to right.
pub(super) struct Cells<'a> {
    row: &'a [Option<String>],
    at: usize,
    table: &'a str,
}

impl<'a> Cells<'a> {
    pub(super) fn new(row: &'a [Option<String>], table: &'a str) -> Cells<'a> {
        Cells { row, at: 0, table }
    }

    pub(super) fn opt_text(&mut self) -> anyhow::Result<Option<String>> {
        let cell = self
            .row
            .get(self.at)
            .ok_or_else(|| anyhow!("{}: a row has too few columns", self.table))?;
        self.at += 1;
        Ok(cell.clone())
    }

    pub(super) fn text(&mut self) -> anyhow::Result<String> {
        let at = self.at;
        self.opt_text()?
            .ok_or_else(|| anyhow!("{}: column {} is NULL in a row", self.table, at + 1))
    }

    pub(super) fn opt_int(&mut self) -> anyhow::Result<Option<i64>> {
        match self.opt_text()? {
            None => Ok(None),
            Some(t) => t
                .parse()
                .map(Some)
                .map_err(|_| anyhow!("{}: {t:?} is not an integer", self.table)),
        }
    }

    pub(super) fn int(&mut self) -> anyhow::Result<i64> {
        let at = self.at;
        self.opt_int()?
            .ok_or_else(|| anyhow!("{}: column {} is NULL in a row", self.table, at + 1))
    }

    pub(super) fn uuid(&mut self) -> anyhow::Result<Uuid> {
        let t = self.text()?;
        t.parse()
            .map_err(|_| anyhow!("{}: {t:?} is not a uuid", self.table))
    }
}

/// The name a row's id stands for in another table (`what`), or why there is none.
pub(super) fn named(names: &Names, id: i64, table: &str, what: &str) -> anyhow::Result<String> {
    names
        .get(&id)
        .cloned()
        .ok_or_else(|| anyhow!("{table}: a row names {what} id {id}, which does not exist"))
}

/// A count or generation, refused when negative (`what` names the column).
pub(super) fn non_negative(n: i64, what: &str) -> anyhow::Result<u64> {
    u64::try_from(n).map_err(|_| anyhow!("{what} is negative ({n})"))
}
