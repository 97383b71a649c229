//! Reading a Placement database into a dump: one read-only, repeatable-read
//! transaction (a consistent snapshot while Placement goes on serving), the schema
//! revision checked first, then each table in turn, with a line per table (and a
//! bar on a terminal).
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

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use allot_store::dump::{
    Dump, DumpAllocation, DumpClass, DumpConsumer, DumpInventory, DumpProvider, DumpTrait,
};
use anyhow::{anyhow, bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use uuid::Uuid;

use super::{Conn, PlacementUrl, Rows};

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
pub async fn read_placement(
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
    match conn.dialect() {
        super::Dialect::MySql => {
            conn.execute("SET SESSION time_zone = '+00:00'").await?;
            conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .await?;
            conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                .await?;
        }
        super::Dialect::Postgres => {
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await?;
        }
    }
    let (revision, has_types) = conn.revision().await?;
    let bar = ProgressBar::with_draw_target(Some(TABLES), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} tables, {elapsed_precise} {msg}")
            .expect("a valid template"),
    );
    let mut table = Table { conn, bar: &bar };
    let now = Instant::now();

    let e = |c: &str| table.conn.epoch(c);
    let sql = format!(
        "SELECT id, name, {}, {} FROM resource_classes",
        e("created_at"),
        e("updated_at")
    );
    let class_rows = table.read("resource_classes", &sql).await?;
    let sql = format!(
        "SELECT id, name, {} FROM traits",
        table.conn.epoch("created_at")
    );
    let trait_rows = table.read("traits", &sql).await?;
    let e = |c: &str| table.conn.epoch(c);
    let sql = format!(
        "SELECT id, uuid, name, generation, parent_provider_id, root_provider_id, {}, {} \
         FROM resource_providers ORDER BY id",
        e("created_at"),
        e("updated_at")
    );
    let provider_rows = table.read("resource_providers", &sql).await?;
    let inventory_rows = table
        .read(
            "inventories",
            "SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, \
             max_unit, step_size, allocation_ratio FROM inventories",
        )
        .await?;
    let provider_trait_rows = table
        .read(
            "resource_provider_traits",
            "SELECT resource_provider_id, trait_id FROM resource_provider_traits",
        )
        .await?;
    let aggregate_rows = table
        .read(
            "placement_aggregates",
            "SELECT id, uuid FROM placement_aggregates",
        )
        .await?;
    let provider_aggregate_rows = table
        .read(
            "resource_provider_aggregates",
            "SELECT resource_provider_id, aggregate_id FROM resource_provider_aggregates",
        )
        .await?;
    let project_rows = table
        .read("projects", "SELECT id, external_id FROM projects")
        .await?;
    let user_rows = table
        .read("users", "SELECT id, external_id FROM users")
        .await?;
    let type_rows = if has_types {
        table
            .read("consumer_types", "SELECT id, name FROM consumer_types")
            .await?
    } else {
        bar.inc(1);
        Vec::new()
    };
    let e = |c: &str| table.conn.epoch(c);
    let type_column = if has_types {
        "consumer_type_id"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT uuid, project_id, user_id, generation, {type_column}, {}, {} FROM consumers",
        e("created_at"),
        e("updated_at")
    );
    let consumer_rows = table.read("consumers", &sql).await?;
    let sql = format!(
        "SELECT consumer_id, resource_provider_id, resource_class_id, used, {} FROM allocations",
        table.conn.epoch("created_at")
    );
    let allocation_rows = table.read("allocations", &sql).await?;
    bar.finish_and_clear();
    eprintln!(
        "allot import: read Placement's tables in {:.1}s (schema revision {revision})",
        now.elapsed().as_secs_f64()
    );

    // ----- from rows to the dump -----
    let mut class_names: HashMap<i64, String> = HashMap::new();
    let mut resource_classes = Vec::new();
    for row in &class_rows {
        let mut r = Cells::new(row, "resource_classes");
        let (id, name) = (r.int()?, r.text()?);
        let (created_at, updated_at) = (r.opt_int()?.unwrap_or(0), r.opt_int()?);
        if name.starts_with("CUSTOM_") {
            resource_classes.push(DumpClass {
                name: name.clone(),
                created_at,
                updated_at: updated_at.unwrap_or(created_at),
                metadata: None,
            });
        }
        class_names.insert(id, name);
    }
    resource_classes.sort_by(|a, b| a.name.cmp(&b.name));

    let mut trait_names: HashMap<i64, String> = HashMap::new();
    let mut traits = Vec::new();
    for row in &trait_rows {
        let mut r = Cells::new(row, "traits");
        let (id, name, created_at) = (r.int()?, r.text()?, r.opt_int()?.unwrap_or(0));
        if name.starts_with("CUSTOM_") {
            traits.push(DumpTrait {
                name: name.clone(),
                created_at,
            });
        }
        trait_names.insert(id, name);
    }
    traits.sort_by(|a, b| a.name.cmp(&b.name));

    let mut providers: Vec<DumpProvider> = Vec::with_capacity(provider_rows.len());
    let mut at: HashMap<i64, usize> = HashMap::with_capacity(provider_rows.len());
    let mut ids: Vec<(Option<i64>, Option<i64>)> = Vec::with_capacity(provider_rows.len());
    for row in &provider_rows {
        let mut r = Cells::new(row, "resource_providers");
        let id = r.int()?;
        let uuid = r.uuid()?;
        let name = r.opt_text()?.unwrap_or_default();
        let generation = r.opt_int()?.unwrap_or(0);
        let (parent, root) = (r.opt_int()?, r.opt_int()?);
        let (created_at, updated_at) = (r.opt_int()?.unwrap_or(0), r.opt_int()?);
        at.insert(id, providers.len());
        ids.push((parent, root));
        providers.push(DumpProvider {
            uuid,
            name,
            parent: None,
            generation: non_negative(generation, "resource_providers.generation")?,
            created_at,
            updated_at: updated_at.unwrap_or(created_at),
            inventories: Vec::new(),
            traits: Vec::new(),
            aggregates: Vec::new(),
        });
    }
    let provider = |id: i64, table: &str| {
        at.get(&id)
            .copied()
            .ok_or_else(|| anyhow!("{table}: a row names provider id {id}, which does not exist"))
    };
    for (i, (parent, root)) in ids.iter().enumerate() {
        if let Some(parent) = parent {
            let p = provider(*parent, "resource_providers.parent_provider_id")?;
            providers[i].parent = Some(providers[p].uuid);
        }
        // The root Placement stored must be the top of the parents' chain (a NULL
        // one, from before revision 611cd6dffd7b, is the provider itself).
        if let Some(root) = root {
            let mut top = i;
            for _ in 0..=ids.len() {
                match ids[top].0 {
                    Some(parent) => top = provider(parent, "resource_providers")?,
                    None => break,
                }
            }
            if provider(*root, "resource_providers.root_provider_id")? != top {
                bail!(
                    "resource_providers: provider {} has root_provider_id {root}, which is \
                     not the top of its parents",
                    providers[i].uuid
                );
            }
        }
    }

    for row in &inventory_rows {
        let mut r = Cells::new(row, "inventories");
        let p = provider(r.int()?, "inventories")?;
        let class = named(&class_names, r.int()?, "inventories", "resource class")?;
        let mut count = |what: &str| -> anyhow::Result<u64> {
            non_negative(r.int()?, &format!("inventories.{what}"))
        };
        let (total, reserved, min_unit) = (count("total")?, count("reserved")?, count("min_unit")?);
        let (max_unit, step_size) = (count("max_unit")?, count("step_size")?);
        let ratio_text = r.text()?;
        let ratio: f64 = ratio_text
            .parse()
            .map_err(|_| anyhow!("inventories: allocation_ratio {ratio_text:?} is no number"))?;
        providers[p].inventories.push(DumpInventory {
            resource_class: class,
            total,
            reserved,
            min_unit,
            max_unit,
            step_size,
            allocation_ratio: format!("{ratio:?}"),
        });
    }
    for row in &provider_trait_rows {
        let mut r = Cells::new(row, "resource_provider_traits");
        let p = provider(r.int()?, "resource_provider_traits")?;
        let name = named(&trait_names, r.int()?, "resource_provider_traits", "trait")?;
        providers[p].traits.push(name);
    }
    let mut aggregates: HashMap<i64, Uuid> = HashMap::new();
    for row in &aggregate_rows {
        let mut r = Cells::new(row, "placement_aggregates");
        aggregates.insert(r.int()?, r.uuid()?);
    }
    for row in &provider_aggregate_rows {
        let mut r = Cells::new(row, "resource_provider_aggregates");
        let p = provider(r.int()?, "resource_provider_aggregates")?;
        let id = r.int()?;
        let uuid = aggregates.get(&id).copied().ok_or_else(|| {
            anyhow!(
                "resource_provider_aggregates: aggregate id {id} is not in placement_aggregates"
            )
        })?;
        providers[p].aggregates.push(uuid);
    }
    for p in &mut providers {
        p.inventories
            .sort_by(|a, b| a.resource_class.cmp(&b.resource_class));
        p.traits.sort();
        p.aggregates.sort();
    }

    let external = |rows: &Rows, table: &str| -> anyhow::Result<HashMap<i64, String>> {
        rows.iter()
            .map(|row| {
                let mut r = Cells::new(row, table);
                Ok((r.int()?, r.text()?))
            })
            .collect()
    };
    let projects = external(&project_rows, "projects")?;
    let users = external(&user_rows, "users")?;
    let types = external(&type_rows, "consumer_types")?;

    let mut consumers: BTreeMap<Uuid, DumpConsumer> = BTreeMap::new();
    let mut incomplete = 0;
    for row in &consumer_rows {
        let mut r = Cells::new(row, "consumers");
        let uuid = r.uuid()?;
        let (project, user) = (r.int()?, r.int()?);
        let generation = non_negative(r.int()?, "consumers.generation")?;
        let consumer_type = match r.opt_int()? {
            Some(id) => Some(named(&types, id, "consumers", "consumer type")?),
            None => None,
        };
        let (created_at, updated_at) = (r.opt_int()?.unwrap_or(0), r.opt_int()?);
        let (project_id, user_id) = match (projects.get(&project), users.get(&user)) {
            (Some(p), Some(u)) => (p.clone(), u.clone()),
            _ => {
                incomplete += 1;
                (
                    placeholders.project_id.clone(),
                    placeholders.user_id.clone(),
                )
            }
        };
        consumers.insert(
            uuid,
            DumpConsumer {
                uuid,
                project_id,
                user_id,
                consumer_type,
                generation,
                created_at,
                updated_at: updated_at.unwrap_or(created_at),
                allocations: Vec::new(),
            },
        );
    }
    for row in &allocation_rows {
        let mut r = Cells::new(row, "allocations");
        let consumer = r.uuid()?;
        let p = provider(r.int()?, "allocations")?;
        let class = named(&class_names, r.int()?, "allocations", "resource class")?;
        let used = non_negative(r.int()?, "allocations.used")?;
        let created_at = r.opt_int()?.unwrap_or(0);
        let entry = consumers.entry(consumer).or_insert_with(|| {
            incomplete += 1;
            DumpConsumer {
                uuid: consumer,
                project_id: placeholders.project_id.clone(),
                user_id: placeholders.user_id.clone(),
                consumer_type: None,
                generation: 0,
                created_at,
                updated_at: created_at,
                allocations: Vec::new(),
            }
        });
        entry.allocations.push(DumpAllocation {
            provider: providers[p].uuid,
            resource_class: class,
            used,
        });
    }
    let mut consumers: Vec<DumpConsumer> = consumers.into_values().collect();
    for c in &mut consumers {
        c.allocations
            .sort_by(|a, b| (a.provider, &a.resource_class).cmp(&(b.provider, &b.resource_class)));
    }

    let dump = Dump {
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
    };
    Ok(Read {
        dump,
        revision,
        incomplete,
    })
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
}

/// The cells of one row, read left to right.
struct Cells<'a> {
    row: &'a [Option<String>],
    at: usize,
    table: &'a str,
}

impl<'a> Cells<'a> {
    fn new(row: &'a [Option<String>], table: &'a str) -> Cells<'a> {
        Cells { row, at: 0, table }
    }

    fn opt_text(&mut self) -> anyhow::Result<Option<String>> {
        let cell = self
            .row
            .get(self.at)
            .ok_or_else(|| anyhow!("{}: a row has too few columns", self.table))?;
        self.at += 1;
        Ok(cell.clone())
    }

    fn text(&mut self) -> anyhow::Result<String> {
        let at = self.at;
        self.opt_text()?
            .ok_or_else(|| anyhow!("{}: column {} is NULL in a row", self.table, at + 1))
    }

    fn opt_int(&mut self) -> anyhow::Result<Option<i64>> {
        match self.opt_text()? {
            None => Ok(None),
            Some(t) => t
                .parse()
                .map(Some)
                .map_err(|_| anyhow!("{}: {t:?} is not an integer", self.table)),
        }
    }

    fn int(&mut self) -> anyhow::Result<i64> {
        let at = self.at;
        self.opt_int()?
            .ok_or_else(|| anyhow!("{}: column {} is NULL in a row", self.table, at + 1))
    }

    fn uuid(&mut self) -> anyhow::Result<Uuid> {
        let t = self.text()?;
        t.parse()
            .map_err(|_| anyhow!("{}: {t:?} is not a uuid", self.table))
    }
}

fn named(names: &HashMap<i64, String>, id: i64, table: &str, what: &str) -> anyhow::Result<String> {
    names
        .get(&id)
        .cloned()
        .ok_or_else(|| anyhow!("{table}: a row names {what} id {id}, which does not exist"))
}

fn non_negative(n: i64, what: &str) -> anyhow::Result<u64> {
    u64::try_from(n).map_err(|_| anyhow!("{what} is negative ({n})"))
}
