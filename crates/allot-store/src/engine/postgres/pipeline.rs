//! A write's statements, sent in one go: a [`Pipeline`] holds them in order, each
//! with its parameters as the driver takes them, and [`Tx::run`] sends every one
//! before it awaits the first answer. A batch of claims is hundreds of small
//! statements; one round trip each, while every node's writer waits on the log's
//! lock, is what bounded a three-node storm, so they go out together.
//!
//! The rows a change inserts into one table (an inventory, a provider's traits)
//! go as one statement over arrays (`unnest`, [`super::Postgres`]'s
//! `insert_rows`), so that the pipeline stays short.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use allot_core::{Change, Uuid};
use futures_util::future::MaybeDone;
use postgres::types::ToSql;

use super::connection::Tx;
use super::Postgres;
use crate::engine::lost_race;
use crate::engine::sql::{self, Op, Type, Value};
use crate::StoreError;

/// A statement parameter: borrowed from the changes being written, or owned.
type Param<'a> = Box<dyn ToSql + Sync + 'a>;

/// A neutral value as the driver's parameter (a NULL typed as its column is).
fn param(value: Value<'_>) -> Param<'_> {
    match value {
        Value::Int(n) => Box::new(n),
        Value::Float(x) => Box::new(x),
        Value::Text(text) => Box::new(text),
        Value::Uuid(uuid) => Box::new(uuid),
        Value::Null(Type::Int) => Box::new(None::<i64>),
        Value::Null(Type::Float) => Box::new(None::<f64>),
        Value::Null(Type::Text) => Box::new(None::<&str>),
        Value::Null(Type::Uuid) => Box::new(None::<Uuid>),
        Value::Null(Type::Bytes) => Box::new(None::<&[u8]>),
    }
}

/// The values of column `i` of `rows` as one array parameter, if every one is a
/// value of the first one's kind (not NULL).
fn array<'a>(rows: &[Op<'a>], i: usize) -> Option<Param<'a>> {
    macro_rules! gather {
        ($kind:ident) => {{
            let values: Option<Vec<_>> = rows
                .iter()
                .map(|op| match op.params[i] {
                    Value::$kind(value) => Some(value),
                    _ => None,
                })
                .collect();
            Some(Box::new(values?) as Param<'a>)
        }};
    }
    match rows[0].params[i] {
        Value::Int(_) => gather!(Int),
        Value::Float(_) => gather!(Float),
        Value::Text(_) => gather!(Text),
        Value::Uuid(_) => gather!(Uuid),
        Value::Null(_) => None,
    }
}

/// One statement of a write.
struct Step<'a> {
    sql: &'static str,
    params: Vec<Param<'a>>,
    /// Set when the statement must change exactly one row: the change whose
    /// precondition failed if it changes none.
    one_row_of: Option<&'a Change>,
}

/// A write's statements, in order, to be sent in one go ([`Tx::run`]).
#[derive(Default)]
pub(super) struct Pipeline<'a> {
    ops: Vec<Step<'a>>,
}

impl<'a> Pipeline<'a> {
    pub(super) fn push(&mut self, sql: &'static str, params: Vec<Param<'a>>) {
        self.ops.push(Step {
            sql,
            params,
            one_row_of: None,
        });
    }

    /// The statements of `changes` (`sql::ops`), where a run of rows inserted into
    /// one table goes as one statement over arrays.
    pub(super) fn changes(&mut self, changes: &'a [Change]) {
        let mut ops = Vec::new();
        for change in changes {
            sql::ops(change, &mut ops);
        }
        let mut ops = ops.into_iter().peekable();
        while let Some(op) = ops.next() {
            let rendered = op.statement.rendered::<Postgres>();
            if let Some(rows_sql) = &rendered.rows {
                let mut run = vec![op];
                while let Some(next) =
                    ops.next_if(|next| std::ptr::eq(next.statement, run[0].statement))
                {
                    run.push(next);
                }
                let arrays: Option<Vec<Param<'a>>> =
                    (0..run[0].params.len()).map(|i| array(&run, i)).collect();
                match arrays {
                    Some(arrays) => self.push(rows_sql, arrays),
                    None => run.into_iter().for_each(|op| self.op(op)),
                }
            } else {
                self.op(op);
            }
        }
    }

    fn op(&mut self, op: Op<'a>) {
        self.ops.push(Step {
            sql: op.statement.sql::<Postgres>(),
            params: op.params.into_iter().map(param).collect(),
            one_row_of: op.one_row_of,
        });
    }
}

impl Tx<'_> {
    /// Sends the pipeline's statements in one go, then checks what each did: the
    /// first that failed is the error (the ones after it fail too, in an aborted
    /// transaction), and one that had to change a row and changed none means its
    /// change lost a race ([`StoreError::Stale`]).
    pub(super) fn run(&mut self, pipeline: &Pipeline<'_>) -> Result<(), StoreError> {
        self.prepare(pipeline.ops.iter().map(|op| op.sql))?;
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = pipeline
            .ops
            .iter()
            .map(|op| {
                op.params
                    .iter()
                    .map(|p| &**p as &(dyn ToSql + Sync))
                    .collect()
            })
            .collect();
        let statements = &*self.statements;
        let counts = self.runtime.block_on(in_order(
            pipeline
                .ops
                .iter()
                .zip(&params)
                .map(|(op, params)| self.tx().execute(&statements[op.sql], params)),
        ));
        for (op, count) in pipeline.ops.iter().zip(counts) {
            let count = count?;
            if let (Some(change), false) = (op.one_row_of, count == 1) {
                return Err(StoreError::Stale(lost_race(change)));
            }
        }
        Ok(())
    }
}

/// Drives `futures` to completion, each polled first in the order given, and
/// returns their outputs in that order. The driver sends a request on its future's
/// first poll, and the server runs a connection's requests in the order they
/// arrive: so every statement goes out, in order, before the first answer is
/// awaited. (`join_all` would do the same today, but does not promise the order of
/// first polls for long lists; this does, by construction.)
pub(super) async fn in_order<F: Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<MaybeDone<F>>>> =
        futures.map(|f| Box::pin(MaybeDone::Future(f))).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for f in &mut pending {
            done &= f.as_mut().poll(cx).is_ready();
        }
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    pending
        .iter_mut()
        .map(|f| f.as_mut().take_output().expect("every future is done"))
        .collect()
}

#[cfg(test)]
mod tests {
    //! The pipeline on a real server (`ALLOT_TEST_POSTGRES_URL`; without one a case
    //! is skipped by the store suite's rule, `tests/skip`).

    use allot_core::{ProviderId, ProviderRow};

    use super::super::testing::{client, Database};
    use super::super::PgEngine;
    use super::*;
    use crate::Cursor;

    /// A provider's row at `generation`, planned against `previous`.
    fn provider_at(generation: u64, previous: Option<u64>) -> Change {
        Change::PutProvider {
            row: ProviderRow {
                id: ProviderId(1),
                uuid: Uuid::from_u128(1),
                name: "cn1".into(),
                generation,
                parent: None,
                root: ProviderId(1),
                created_at: 1,
                updated_at: 1,
            },
            previous_generation: previous,
        }
    }

    #[test]
    fn a_pipelined_write_runs_its_statements_in_order_and_all_or_nothing() {
        let Some(db) = Database::new() else { return };
        let mut a = PgEngine::open(&db.url).unwrap();
        // A create, then 99 updates each planned against the one before it: every
        // precondition holds only if the server runs them in the order planned.
        // (Far more than the 30 futures below which `join_all` keeps its order.)
        let mut changes = vec![provider_at(0, None)];
        changes.extend((1..100).map(|g| provider_at(g, Some(g - 1))));
        assert_eq!(
            a.write(Some(Cursor(0)), &mut |_| changes.clone()).unwrap(),
            Cursor(1)
        );
        let generation: i64 = client(&db)
            .query_one("SELECT generation FROM providers", &[])
            .unwrap()
            .get(0);
        assert_eq!(generation, 99);
        // One failed precondition in the middle: nothing of the write remains,
        // neither the changes before it nor the log row, and the connection serves on.
        let mut changes: Vec<Change> = (100..110).map(|g| provider_at(g, Some(g - 1))).collect();
        changes.insert(5, provider_at(7, Some(6)));
        let e = a.write(Some(Cursor(1)), &mut |_| changes.clone());
        assert!(
            matches!(&e, Err(StoreError::Stale(m)) if m.contains("not at generation 6")),
            "{e:?}"
        );
        let (state, head) = a.load().unwrap();
        assert_eq!(head, Cursor(1));
        assert_eq!(state.provider(ProviderId(1)).unwrap().row.generation, 99);
        assert_eq!(a.head().unwrap(), Cursor(1));
    }
}
