//! Reading a Placement database into a dump: one read-only, repeatable-read
//! transaction (a consistent snapshot while Placement goes on serving), the schema
//! revision checked first, then each table in turn, with a line per table (and a
//! bar on a terminal); only once every table is read are the rows turned into the
//! dump, table by table, in the same order. One module per table or table family
//! holds its query and what becomes of its rows.
//!
//! What becomes of Placement's rows:
//! - resource classes and traits: the `CUSTOM_*` ones (the standard ones are the
//!   names both sides know); the ids are Placement's and stay here;
//! - providers in id order (the order Placement lists them in), with their
//!   generation as it is (a NULL one is Placement's default, 0); the root is
//!   checked against the parents, which is where the dump keeps it;
//! - consumers with their project, user, type and generation; an allocation whose
//!   consumer has no row, or a consumer whose project or user row is gone, is an
//!   "incomplete consumer", given the placeholders Placement's own online migration
//!   gives it (`[placement] incomplete_consumer_project_id/user_id`), generation 0.

mod aggregates;
mod allocations;
mod cells;
mod classes;
mod consumers;
mod inventories;
mod providers;
mod traits;

use std::time::Instant;

use allot_store::dump::{Dump, DumpClass, DumpConsumer, DumpProvider, DumpTrait};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::conn::{Conn, Rows};
use crate::placement_url::{Dialect, PlacementUrl};

/// The placeholders Placement gives a consumer it knows no owner of.
#[derive(Debug, Clone)]
pub struct Placeholders {
    /// `[placement] incomplete_consumer_project_id`.
    pub project_id: String,
    /// `[placement] incomplete_consumer_user_id`.
    pub user_id: String,
}

/// What was read, besides the dump.
pub struct Read {
    /// The whole deployment.
    pub dump: Dump,
    /// The schema revision found.
    pub revision: String,
    /// Consumers made up for allocations without a consumer row or owner.
    pub incomplete: usize,
}

/// Reads a whole Placement database, in one snapshot.
pub(crate) async fn read_placement(
    db: &PlacementUrl,
    placeholders: &Placeholders,
) -> anyhow::Result<Read> {
    let mut conn = Conn::connect(db).await?;
    let result = read(&mut conn, placeholders).await;
    // A read-only transaction: nothing to keep, whatever happened.
    let _ = conn.execute("ROLLBACK").await;
    conn.close().await;
    result
}

/// The tables read, in order (the bar's length).
const TABLES: u64 = 12;

async fn read(conn: &mut Conn, placeholders: &Placeholders) -> anyhow::Result<Read> {
    begin_snapshot(conn).await?;
    let (revision, has_types) = conn.revision().await?;
    let bar = ProgressBar::with_draw_target(Some(TABLES), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} tables, {elapsed_precise} {msg}")
            .expect("a valid template"),
    );
    let now = Instant::now();
    let rows = Fetched::fetch(&mut Table { conn, bar: &bar }, has_types).await?;
    bar.finish_and_clear();
    eprintln!(
        "allot import: read Placement's tables in {:.1}s (schema revision {revision})",
        now.elapsed().as_secs_f64()
    );

    let (resource_classes, class_names) = classes::decode(&rows.classes)?;
    let (traits, trait_names) = traits::decode(&rows.traits)?;
    let mut providers = providers::decode(&rows.providers)?;
    inventories::decode(&rows.inventories, &class_names, &mut providers)?;
    traits::decode_provider_traits(&rows.provider_traits, &trait_names, &mut providers)?;
    aggregates::decode(&rows.aggregates, &rows.provider_aggregates, &mut providers)?;
    providers.sort_members();
    let names = consumers::ConsumerNames::decode(&rows.projects, &rows.users, &rows.types)?;
    let (consumers, mut incomplete) = consumers::decode(&rows.consumers, &names, placeholders)?;
    let consumers = allocations::decode(
        &rows.allocations,
        &providers,
        &class_names,
        placeholders,
        consumers,
        &mut incomplete,
    )?;
    Ok(Read {
        dump: dump_of(resource_classes, traits, providers.list, consumers),
        revision,
        incomplete,
    })
}

/// Opens the read-only, repeatable-read transaction everything is read in (MySQL's
/// session also set to UTC, the zone Placement writes its times in).
async fn begin_snapshot(conn: &mut Conn) -> anyhow::Result<()> {
    match conn.dialect() {
        Dialect::MySql => {
            conn.execute("SET SESSION time_zone = '+00:00'").await?;
            conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .await?;
            conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                .await?;
        }
        Dialect::Postgres => {
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await?;
        }
    }
    Ok(())
}

/// Every table's rows, as read (in this order, the order of [`Fetched::fetch`]).
struct Fetched {
    classes: Rows,
    traits: Rows,
    providers: Rows,
    inventories: Rows,
    provider_traits: Rows,
    aggregates: Rows,
    provider_aggregates: Rows,
    projects: Rows,
    users: Rows,
    types: Rows,
    consumers: Rows,
    allocations: Rows,
}

impl Fetched {
    /// Reads the [`TABLES`] tables, one after the other (a struct's fields are
    /// evaluated in the order they are written).
    async fn fetch(table: &mut Table<'_>, has_types: bool) -> anyhow::Result<Fetched> {
        Ok(Fetched {
            classes: classes::select(table).await?,
            traits: traits::select(table).await?,
            providers: providers::select(table).await?,
            inventories: inventories::select(table).await?,
            provider_traits: traits::select_provider_traits(table).await?,
            aggregates: aggregates::select(table).await?,
            provider_aggregates: aggregates::select_provider_aggregates(table).await?,
            projects: consumers::select_projects(table).await?,
            users: consumers::select_users(table).await?,
            types: consumers::select_types(table, has_types).await?,
            consumers: consumers::select(table, has_types).await?,
            allocations: allocations::select(table).await?,
        })
    }
}

/// The dump of what was read, stamped now.
fn dump_of(
    resource_classes: Vec<DumpClass>,
    traits: Vec<DumpTrait>,
    providers: Vec<DumpProvider>,
    consumers: Vec<DumpConsumer>,
) -> Dump {
    Dump {
        format: allot_store::dump::FORMAT.to_owned(),
        version: allot_store::dump::VERSION,
        exported_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
        resource_classes,
        traits,
        providers,
        consumers,
        claims: Vec::new(),
        server_groups: Vec::new(),
        drains: Vec::new(),
        shapes: Vec::new(),
    }
}

/// Reads one table, with its line and the bar's step.
struct Table<'a> {
    conn: &'a mut Conn,
    bar: &'a ProgressBar,
}

impl Table<'_> {
    async fn read(&mut self, name: &str, sql: &str) -> anyhow::Result<Rows> {
        self.bar.set_message(name.to_owned());
        let started = Instant::now();
        let rows = self
            .conn
            .rows(sql)
            .await
            .with_context(|| format!("reading Placement's {name}"))?;
        self.bar.inc(1);
        self.bar.suspend(|| {
            eprintln!(
                "allot import: {name}: {} rows ({:.2}s)",
                rows.len(),
                started.elapsed().as_secs_f64()
            )
        });
        Ok(rows)
    }

    /// A column's DATETIME as seconds since the epoch, in the dialect's spelling.
    fn epoch(&self, column: &str) -> String {
        self.conn.epoch(column)
    }
}
