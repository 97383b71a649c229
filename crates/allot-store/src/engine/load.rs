//! The load: every table of a store, read into a fresh [`State`], the same way for
//! every engine.
//!
//! An engine supplies its rows through [`Source`] (a query's rows, one at a time,
//! each read through [`Cells`]); everything else is here, once: which tables are
//! read, in what order, how a row becomes a record, and how the records are folded
//! into the view.
//!
//! Two threads, so that the two halves of the work overlap on two cores: a reader
//! (spawned by [`load`], with the source) steps through the rows and decodes them
//! into records, and the calling thread folds them into the view as they come, in
//! batches over a short queue. The order of the folds is the order of the rows, as
//! if one thread did both.
//!
//! Rows are folded as they are read, a provider's or a consumer's rows at a time,
//! never gathered first: at a million providers the records would otherwise be held
//! twice at the peak of start-up (the queue holds 65,536 records at most). Text is
//! read in place where it is parsed; a class or trait name, or a consumer's project,
//! user or type, crosses once and is shared after. The providers' and the
//! consumers' tables are each read side by side with the tables of what they hold
//! (several queries open at once, merged by key), so that the two threads keep pace
//! row by row.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::mpsc::{self, SyncSender};

use allot_core::{
    Allocation, Change, Claim, ClaimAmount, ClaimState, ClassMetadata, ClassRecord, ConsumerRow,
    Inventory, ProviderId, ProviderRow, ResourceClass, State, Text, TraitName, TraitRecord, Uuid,
};

use allot_core::drains::{Drain, DrainClaim, DrainState};
use allot_core::server_groups::{Policy, Scope, ServerGroup};
use allot_core::shapes::{Shape, ShapeName};

use crate::StoreError;

/// One row of a query, as an engine hands it over.
///
/// Integers come back as the `i64` they were stored as; a count (an amount, a
/// generation, an id) is that `i64`'s bits as a `u64`, the inverse of how it was
/// written (`sql::Value::count`).
pub(crate) trait Cells {
    fn int(&self, i: usize) -> Result<i64, StoreError>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError>;
    fn float(&self, i: usize) -> Result<f64, StoreError>;
    /// A text column's bytes, in place and not yet checked to be UTF-8 (what is kept
    /// of them is checked where it is kept).
    fn text(&self, i: usize) -> Result<&[u8], StoreError> {
        self.opt_text(i)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
    }
    fn opt_text(&self, i: usize) -> Result<Option<&[u8]>, StoreError>;
    /// A uuid column, as the query sorted it.
    fn key(&self, i: usize) -> Result<Key<'_>, StoreError>;

    fn count(&self, i: usize) -> Result<u64, StoreError> {
        Ok(self.int(i)? as u64)
    }

    /// A text column as text.
    fn string(&self, i: usize) -> Result<&str, StoreError> {
        utf8(self.text(i)?)
    }

    fn opt_string(&self, i: usize) -> Result<Option<&str>, StoreError> {
        self.opt_text(i)?.map(utf8).transpose()
    }

    fn uuid(&self, i: usize, what: &str) -> Result<Uuid, StoreError> {
        self.key(i)?.uuid(what)
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, StoreError> {
    std::str::from_utf8(bytes).map_err(|e| StoreError::Corrupt(format!("text {bytes:?}: {e}")))
}

/// A uuid as an engine stores and sorts it: as text (whose spellings sort byte by
/// byte) or as a native uuid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key<'r> {
    Text(&'r [u8]),
    Uuid(Uuid),
}

impl Key<'_> {
    fn uuid(self, what: &str) -> Result<Uuid, StoreError> {
        match self {
            Key::Uuid(uuid) => Ok(uuid),
            Key::Text(text) => Uuid::try_parse_ascii(text).map_err(|e| {
                let text = String::from_utf8_lossy(text);
                StoreError::Corrupt(format!("{what} {text:?}: {e}"))
            }),
        }
    }

    /// Whether this is the one spelling of its uuid (a native uuid always is; text
    /// is if it is the hyphenated lower-case form allot writes).
    fn is_canonical(self) -> bool {
        match self {
            Key::Uuid(_) => true,
            Key::Text(text) => text.len() == 36 && !text.iter().any(u8::is_ascii_uppercase),
        }
    }
}

/// A query's rows, one at a time.
pub(crate) trait Rows {
    /// A reference to a row held by the query (so, `Copy`: a lookahead row can be
    /// kept while other queries move on).
    type Row<'r>: Cells + Copy
    where
        Self: 'r;
    fn next(&mut self) -> Result<Option<Self::Row<'_>>, StoreError>;
}

/// Where a load reads from: an engine's connection, inside one snapshot.
pub(crate) trait Source {
    type Rows<'s>: Rows;
    /// Runs `sql` (a query with no parameters) and hands its rows to `each`. Several
    /// queries may be open at once (nested calls).
    fn rows<T>(
        &self,
        sql: &str,
        each: impl FnOnce(&mut Self::Rows<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError>;
}

/// Reads everything `source` holds into a fresh view (see the module's doc).
pub(crate) fn load<S: Source + Send>(source: S) -> Result<State, StoreError> {
    let (out, steps) = mpsc::sync_channel(IN_FLIGHT);
    std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name("allot-load".into())
            .spawn_scoped(scope, move || read(&source, out))?;
        let (mut state, mut palette) = (State::new(), Palette::default());
        for batch in steps {
            // What the batch's records will change, read first so that the cache
            // misses overlap (see `State::warm_consumers`).
            let warmth = state.warm_consumers(batch.iter().filter_map(|step| match step {
                Step::Consumer(raw) => Some((&raw.uuid, raw.allocations.first().map(|a| a.0))),
                _ => None,
            }));
            std::hint::black_box(warmth);
            for step in batch {
                fold(&mut state, &mut palette, step);
            }
        }
        // The queue closed: the reader is done, or failed and says why.
        match reader.join() {
            Ok(read) => read?,
            Err(panic) => std::panic::resume_unwind(panic),
        }
        Ok(state)
    })
}
/// Steps per message on the load's queue: enough that the queue costs nothing per
/// row, few enough that what is in flight stays small.
const BATCH: usize = 256;

/// Messages the load's reader may be ahead of the fold.
const IN_FLIGHT: usize = 256;

/// What the load's reader hands the thread that builds the view.
///
/// Names and texts cross as plain bytes, once each, and the steps after refer to them
/// by their place in the load's list: the view's shared copies are made and counted
/// on the building thread alone. (Sharing `Arc`s between the two threads made every
/// reference count a cache line that both cores write, and that cost more than the
/// copying it saved.)
enum Step {
    /// Make room for this many more consumers (so that the table does not rehash
    /// again and again while it fills).
    Reserve { consumers: usize },
    /// The next resource class name of the load's list.
    Class(Box<str>),
    /// The next trait name of the load's list.
    Trait(Box<str>),
    /// A provider's row.
    Provider(ProviderRow),
    /// Every provider's row is in: link children to parents, index the providers.
    ProvidersLoaded,
    /// A provider's inventories, classes by their place in the list.
    Inventories(ProviderId, Vec<(u32, Inventory)>),
    /// A provider's traits, by their place in the list.
    Traits(ProviderId, Vec<u32>),
    /// Any other record, as a change.
    Change(Change),
    /// A consumer and its allocations.
    Consumer(RawConsumer),
}

/// A consumer as the reader hands it over.
struct RawConsumer {
    uuid: Uuid,
    /// The project, user and type, each only when it differs from the previous
    /// consumer's (most clouds have few, and a bench's have one each).
    project: Option<Box<str>>,
    user: Option<Box<str>>,
    kind: Option<Option<Box<str>>>,
    generation: u64,
    created_at: i64,
    updated_at: i64,
    /// Provider, class (its place in the list), amount.
    allocations: Vec<(ProviderId, u32, u64)>,
    /// Whether it is known not to be in the view yet (see `State::load_consumer`).
    known_new: bool,
}

/// The building thread's copies of what the reader sent once: the names by their
/// place, and the previous consumer's texts.
#[derive(Default)]
struct Palette {
    classes: Vec<ResourceClass>,
    traits: Vec<TraitName>,
    project: Option<Text>,
    user: Option<Text>,
    kind: Option<Text>,
}

/// Folds one step of a load into the view.
fn fold(state: &mut State, palette: &mut Palette, step: Step) {
    match step {
        Step::Reserve { consumers } => state.reserve(consumers),
        // Trusted: names read back from the store were checked when written.
        Step::Class(name) => palette.classes.push(ResourceClass::new_unchecked(name)),
        Step::Trait(name) => palette.traits.push(TraitName::new_unchecked(name)),
        Step::Provider(row) => state.load_provider(row),
        Step::ProvidersLoaded => state.providers_loaded(),
        Step::Inventories(id, list) => {
            let list = list
                .iter()
                .map(|(c, inventory)| (palette.classes[*c as usize].clone(), *inventory))
                .collect();
            state.load_change(Change::SetInventories(id, list));
        }
        Step::Traits(id, list) => {
            let list = list
                .iter()
                .map(|t| palette.traits[*t as usize].clone())
                .collect();
            state.load_change(Change::SetTraits(id, list));
        }
        Step::Change(change) => state.load_change(change),
        Step::Consumer(raw) => {
            let RawConsumer {
                uuid,
                project,
                user,
                kind,
                generation,
                created_at,
                updated_at,
                allocations,
                known_new,
            } = raw;
            if let Some(text) = project {
                palette.project = Some(text.into());
            }
            if let Some(text) = user {
                palette.user = Some(text.into());
            }
            if let Some(text) = kind {
                palette.kind = text.map(Into::into);
            }
            let row = ConsumerRow {
                uuid,
                project_id: palette.project.clone().unwrap_or_default(),
                user_id: palette.user.clone().unwrap_or_default(),
                consumer_type: palette.kind.clone(),
                generation,
                created_at,
                updated_at,
            };
            let allocations = allocations
                .iter()
                .map(|(provider, class, used)| Allocation {
                    provider: *provider,
                    class: palette.classes[*class as usize].clone(),
                    used: *used,
                })
                .collect();
            state.load_consumer(row, allocations, known_new);
        }
    }
}

/// The reader's end of the load's queue: gathers steps into batches.
struct Steps {
    out: SyncSender<Vec<Step>>,
    batch: Vec<Step>,
}

impl Steps {
    fn push(&mut self, step: Step) -> Result<(), StoreError> {
        self.batch.push(step);
        if self.batch.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let full = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        // The receiving end goes only if the fold panicked; that panic is the news.
        self.out
            .send(full)
            .map_err(|_| StoreError::Io(std::io::Error::other("the view being loaded is gone")))
    }
}

/// The names (classes or traits) the load has met, in order: each is sent once,
/// then referred to by its place.
#[derive(Default)]
struct Names {
    list: Vec<Box<[u8]>>,
    places: HashMap<Box<[u8]>, u32>,
}

/// Below this many names, finding one by comparing it with each is quicker than
/// hashing it.
const FEW_NAMES: usize = 16;

impl Names {
    /// The place of `name` in the list, and the name as text if it is new there (to
    /// be sent before anything that refers to it).
    fn place(&mut self, name: &[u8]) -> Result<(u32, Option<Box<str>>), StoreError> {
        let found = if self.list.len() <= FEW_NAMES {
            self.list
                .iter()
                .position(|n| **n == *name)
                .map(|i| i as u32)
        } else {
            self.places.get(name).copied()
        };
        if let Some(i) = found {
            return Ok((i, None));
        }
        let text = std::str::from_utf8(name)
            .map_err(|e| StoreError::Corrupt(format!("name {name:?}: {e}")))?;
        let i = self.list.len() as u32;
        self.list.push(name.into());
        self.places.insert(name.into(), i);
        Ok((i, Some(text.into())))
    }
}

/// The place of the class `name`, announcing it first if it is new.
fn class_place(names: &mut Names, name: &[u8], out: &mut Steps) -> Result<u32, StoreError> {
    let (place, new) = names.place(name)?;
    if let Some(name) = new {
        out.push(Step::Class(name))?;
    }
    Ok(place)
}

/// The place of the trait `name`, announcing it first if it is new.
fn trait_place(names: &mut Names, name: &[u8], out: &mut Steps) -> Result<u32, StoreError> {
    let (place, new) = names.place(name)?;
    if let Some(name) = new {
        out.push(Step::Trait(name))?;
    }
    Ok(place)
}

/// The previous row's value of one text column: a row repeating it sends nothing.
#[derive(Default)]
struct Repeat(Option<Option<Vec<u8>>>);

impl Repeat {
    /// `None` if `value` repeats the previous row's, else the new value as text.
    fn changed(&mut self, value: Option<&[u8]>) -> Result<Option<Option<Box<str>>>, StoreError> {
        if let Some(previous) = &self.0 {
            if previous.as_deref() == value {
                return Ok(None);
            }
        }
        let text = value
            .map(|b| std::str::from_utf8(b).map(Box::from))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("text {value:?}: {e}")))?;
        self.0 = Some(value.map(<[u8]>::to_vec));
        Ok(Some(text))
    }

    /// As [`Repeat::changed`], for a column that may not be NULL.
    fn changed_text(&mut self, value: &[u8]) -> Result<Option<Box<str>>, StoreError> {
        Ok(self.changed(Some(value))?.flatten())
    }
}

/// How many rows a table has.
fn count(source: &impl Source, table: &str) -> Result<usize, StoreError> {
    source.rows(
        &format!("SELECT count(*) FROM {table}"),
        |rows| match rows.next()? {
            Some(r) => Ok(r.int(0)? as usize),
            None => Err(StoreError::Corrupt(format!("no count of {table}"))),
        },
    )
}

/// Every row of `sql` through `each` (for the small tables: a call through `dyn`
/// per column costs nothing there).
fn each_row(
    source: &impl Source,
    sql: &str,
    mut each: impl FnMut(&dyn Cells) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    source.rows(sql, |rows| {
        while let Some(r) = rows.next()? {
            each(&r)?;
        }
        Ok(())
    })
}

/// The load's reader: every row, decoded, in the order the view is built in.
fn read(source: &impl Source, out: SyncSender<Vec<Step>>) -> Result<(), StoreError> {
    let mut out = Steps {
        out,
        batch: Vec::with_capacity(BATCH),
    };
    let (mut classes, mut traits) = (Names::default(), Names::default());
    out.push(Step::Reserve {
        consumers: count(source, "consumers")?,
    })?;
    // Trusted, in each of these: only names the core checked are ever written.
    read_classes(source, &mut out)?;
    read_traits(source, &mut out)?;
    read_provider_tables(source, (&mut classes, &mut traits), &mut out)?;
    out.push(Step::ProvidersLoaded)?;
    read_consumer_tables(source, &mut classes, &mut out)?;
    // Groups before claims: a member's claims are then indexed as they come.
    read_server_groups(source, &mut out)?;
    read_claims(source, &mut out)?;
    read_drains(source, &mut out)?;
    read_revoked_sessions(source, &mut out)?;
    read_shapes(source, &mut out)?;
    out.flush()
}

/// The custom classes, then their metadata.
fn read_classes(source: &impl Source, out: &mut Steps) -> Result<(), StoreError> {
    each_row(
        source,
        "SELECT name, created_at, updated_at FROM resource_classes",
        |r| {
            out.push(Step::Change(Change::PutClass {
                record: ClassRecord {
                    name: ResourceClass::new_unchecked(r.string(0)?),
                    created_at: r.int(1)?,
                    updated_at: r.int(2)?,
                },
                old_name: None,
            }))
        },
    )?;
    // After the classes, so that each row's class is in the view when it is folded.
    each_row(
        source,
        "SELECT name, units, display_name, description FROM class_metadata",
        |r| {
            let metadata = ClassMetadata {
                units: r.opt_string(1)?.map(Into::into),
                display_name: r.opt_string(2)?.map(Into::into),
                description: r.opt_string(3)?.map(Into::into),
            };
            out.push(Step::Change(Change::SetClassMetadata(
                ResourceClass::new_unchecked(r.string(0)?),
                Some(metadata),
            )))
        },
    )
}

/// The custom traits.
fn read_traits(source: &impl Source, out: &mut Steps) -> Result<(), StoreError> {
    each_row(source, "SELECT name, created_at FROM traits", |r| {
        out.push(Step::Change(Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked(r.string(0)?),
            created_at: r.int(1)?,
        })))
    })
}

/// The providers' four queries, open side by side ([`read_providers`]).
fn read_provider_tables(
    source: &impl Source,
    names: (&mut Names, &mut Names),
    out: &mut Steps,
) -> Result<(), StoreError> {
    source.rows(
        "SELECT id, uuid, name, generation, parent_id, root_id, created_at, updated_at
         FROM providers ORDER BY id",
        |providers| {
            source.rows(
                "SELECT provider_id, resource_class, total, reserved, min_unit, max_unit,
                        step_size, allocation_ratio
                 FROM inventories ORDER BY provider_id",
                |inventories| {
                    source.rows(
                        "SELECT provider_id, trait FROM provider_traits ORDER BY provider_id",
                        |provider_traits| {
                            source.rows(
                                "SELECT provider_id, aggregate FROM provider_aggregates
                                 ORDER BY provider_id",
                                |aggregates| {
                                    read_providers(
                                        providers,
                                        inventories,
                                        provider_traits,
                                        aggregates,
                                        names,
                                        out,
                                    )
                                },
                            )
                        },
                    )
                },
            )
        },
    )
}

/// The consumers' two queries, open side by side ([`read_consumers`]).
fn read_consumer_tables(
    source: &impl Source,
    classes: &mut Names,
    out: &mut Steps,
) -> Result<(), StoreError> {
    source.rows(
        "SELECT id, uuid, project_id, user_id, consumer_type, generation, created_at, updated_at
         FROM consumers ORDER BY id",
        |consumers| {
            source.rows(
                "SELECT consumer_id, provider_id, resource_class, used FROM allocations
                 ORDER BY consumer_id",
                |allocations| read_consumers(consumers, allocations, classes, out),
            )
        },
    )
}

/// Server groups, each with its members (few: gathered first).
fn read_server_groups(source: &impl Source, out: &mut Steps) -> Result<(), StoreError> {
    let mut members: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    each_row(
        source,
        "SELECT group_uuid, consumer_uuid FROM server_group_members",
        |r| {
            members
                .entry(r.uuid(0, "server group")?)
                .or_default()
                .push(r.uuid(1, "member")?);
            Ok(())
        },
    )?;
    each_row(
        source,
        "SELECT uuid, name, project_id, user_id, policy, max_per_domain, scope, scope_prefix,
                enforce_on_allocations, created_at, updated_at
         FROM server_groups",
        |r| {
            let uuid = r.uuid(0, "server group")?;
            let corrupt = |what: &str| StoreError::Corrupt(format!("server group {uuid}: {what}"));
            let policy = Policy::parse(r.string(4)?).ok_or_else(|| corrupt("policy"))?;
            let scope = Scope::from_columns(r.string(6)?, r.opt_string(7)?)
                .ok_or_else(|| corrupt("scope"))?;
            let mut members = members.remove(&uuid).unwrap_or_default();
            members.sort_unstable();
            let group = ServerGroup {
                uuid,
                name: r.string(1)?.to_owned(),
                project_id: r.string(2)?.to_owned(),
                user_id: r.string(3)?.to_owned(),
                policy,
                max_per_domain: u32::try_from(r.count(5)?).map_err(|_| corrupt("max"))?,
                scope,
                enforce_on_allocations: r.int(8)? != 0,
                members,
                created_at: r.int(9)?,
                updated_at: r.int(10)?,
            };
            out.push(Step::Change(Change::PutServerGroup(Box::new(group))))
        },
    )
}

/// The web UI sessions logged out before their end (few).
fn read_revoked_sessions(source: &impl Source, out: &mut Steps) -> Result<(), StoreError> {
    each_row(source, "SELECT hash, ends_at FROM revoked_sessions", |r| {
        out.push(Step::Change(Change::RevokeSession {
            hash: r.string(0)?.to_owned(),
            until: r.int(1)?,
            // Forgets none of those loaded.
            now: i64::MIN,
        }))
    })
}

/// The named shapes (few).
fn read_shapes(source: &impl Source, out: &mut Steps) -> Result<(), StoreError> {
    each_row(
        source,
        "SELECT name, request, created_at, updated_at FROM shapes",
        |r| {
            let name = r.string(0)?;
            let name = ShapeName::parse(name)
                .ok_or_else(|| StoreError::Corrupt(format!("shape name {name:?}")))?;
            let shape = Shape {
                name,
                request: r.string(1)?.to_owned(),
                created_at: r.int(2)?,
                updated_at: r.int(3)?,
            };
            out.push(Step::Change(Change::PutShape(Box::new(shape))))
        },
    )
}

/// Drains, each with its roots and claims (few: gathered first), after the
/// providers their roots name.
fn read_drains(source: &impl Source, out: &mut Steps) -> Result<(), StoreError> {
    let mut roots: HashMap<Uuid, (Vec<Uuid>, Vec<Uuid>)> = HashMap::new();
    each_row(
        source,
        "SELECT drain_uuid, root_uuid, disabled FROM drain_roots",
        |r| {
            let (all, disabled) = roots.entry(r.uuid(0, "drain")?).or_default();
            let root = r.uuid(1, "root")?;
            all.push(root);
            if r.int(2)? != 0 {
                disabled.push(root);
            }
            Ok(())
        },
    )?;
    let mut claims: HashMap<Uuid, Vec<(i64, DrainClaim)>> = HashMap::new();
    each_row(
        source,
        "SELECT drain_uuid, position, consumer_uuid, claim_uuid FROM drain_claims",
        |r| {
            let claim = DrainClaim {
                consumer: r.uuid(2, "consumer")?,
                claim: r.uuid(3, "claim")?,
            };
            claims
                .entry(r.uuid(0, "drain")?)
                .or_default()
                .push((r.int(1)?, claim));
            Ok(())
        },
    )?;
    each_row(
        source,
        "SELECT uuid, state, created_at, ended_at FROM drains ORDER BY created_at, uuid",
        |r| {
            let uuid = r.uuid(0, "drain")?;
            let state = r.string(1)?;
            let state = DrainState::parse(state)
                .ok_or_else(|| StoreError::Corrupt(format!("drain {uuid}: state {state:?}")))?;
            let (mut all, mut disabled) = roots.remove(&uuid).unwrap_or_default();
            all.sort_unstable();
            disabled.sort_unstable();
            let mut placed = claims.remove(&uuid).unwrap_or_default();
            placed.sort_unstable_by_key(|(position, _)| *position);
            let drain = Drain {
                uuid,
                roots: all,
                disabled,
                claims: placed.into_iter().map(|(_, c)| c).collect(),
                state,
                created_at: r.int(2)?,
                ended_at: r.opt_int(3)?,
            };
            out.push(Step::Change(Change::PutDrain(Box::new(drain))))
        },
    )
}

/// Pending claims, after the providers they are indexed on. Few (they live for
/// minutes), so their amounts are gathered first and each claim taken whole.
fn read_claims(source: &impl Source, out: &mut Steps) -> Result<(), StoreError> {
    let mut amounts: HashMap<Uuid, Vec<ClaimAmount>> = HashMap::new();
    each_row(
        source,
        "SELECT claim_uuid, provider_uuid, resource_class, amount FROM claim_allocations",
        |r| {
            amounts
                .entry(r.uuid(0, "claim")?)
                .or_default()
                .push(ClaimAmount {
                    provider: r.uuid(1, "provider")?,
                    class: ResourceClass::new_unchecked(r.string(2)?),
                    amount: r.count(3)?,
                });
            Ok(())
        },
    )?;
    each_row(
        source,
        "SELECT uuid, consumer_uuid, project_id, user_id, consumer_type, tag, state,
                created_at, expires_at, ended_at
         FROM claims",
        |r| {
            let uuid = r.uuid(0, "claim")?;
            let state = r.string(6)?;
            let state = ClaimState::parse(state)
                .ok_or_else(|| StoreError::Corrupt(format!("claim state {state:?}")))?;
            let mut allocations = amounts.remove(&uuid).unwrap_or_default();
            allocations.sort();
            let claim = Claim {
                uuid,
                consumer: r.uuid(1, "consumer")?,
                project_id: Text::from(r.string(2)?),
                user_id: Text::from(r.string(3)?),
                consumer_type: r.opt_string(4)?.map(Text::from),
                tag: r.opt_string(5)?.map(Text::from),
                allocations: allocations.into_boxed_slice(),
                state,
                created_at: r.int(7)?,
                expires_at: r.opt_int(8)?,
                ended_at: r.opt_int(9)?,
            };
            out.push(Step::Change(Change::PutClaim(Box::new(claim))))
        },
    )
}

/// Runs `body` on each row of `rows` (a query sorted by provider id in column 0,
/// whose next row is `ahead`) that belongs to provider `key`, leaving `ahead` at the
/// first row of a later provider. Rows before `key` belong to no provider read and
/// are skipped. A macro, not a function: `ahead` borrows from `rows`, and moving it
/// on while the caller keeps it is what a function cannot express.
macro_rules! rows_of {
    ($ahead:ident, $rows:ident, $key:expr, |$row:ident| $body:block) => {
        while let Some($row) = $ahead {
            let of = $row.int(0)?.cmp(&$key);
            if of.is_gt() {
                break;
            }
            if of.is_eq() $body
            $ahead = $rows.next()?;
        }
    };
}

/// Providers, and with each its inventories, traits and aggregates: the four
/// queries are read side by side in provider id order, so that each provider's rows
/// are folded right after it (while its record is in the cache). Rows of no
/// provider (the writes never leave any) are skipped, as applying them would do.
fn read_providers(
    providers: &mut impl Rows,
    inventories: &mut impl Rows,
    provider_traits: &mut impl Rows,
    aggregates: &mut impl Rows,
    (classes, traits): (&mut Names, &mut Names),
    out: &mut Steps,
) -> Result<(), StoreError> {
    let (mut inventory, mut provider_trait, mut aggregate) = (
        inventories.next()?,
        provider_traits.next()?,
        aggregates.next()?,
    );
    let mut held = Vec::new();
    while let Some(r) = providers.next()? {
        let key = r.int(0)?;
        let id = ProviderId(key as u64);
        out.push(Step::Provider(ProviderRow {
            id,
            uuid: r.uuid(1, "provider")?,
            name: r.string(2)?.to_owned(),
            generation: r.count(3)?,
            parent: r.opt_int(4)?.map(|p| ProviderId(p as u64)),
            root: ProviderId(r.count(5)?),
            created_at: r.int(6)?,
            updated_at: r.int(7)?,
        }))?;
        let mut list = Vec::new();
        rows_of!(inventory, inventories, key, |i| {
            list.push((
                class_place(classes, i.text(1)?, out)?,
                Inventory {
                    total: i.count(2)?,
                    reserved: i.count(3)?,
                    min_unit: i.count(4)?,
                    max_unit: i.count(5)?,
                    step_size: NonZeroU64::new(i.count(6)?)
                        .ok_or_else(|| StoreError::Corrupt("column 6: step_size of 0".into()))?,
                    allocation_ratio: i.float(7)?,
                },
            ));
        });
        if !list.is_empty() {
            out.push(Step::Inventories(id, list))?;
        }
        let mut list = Vec::new();
        rows_of!(provider_trait, provider_traits, key, |t| {
            list.push(trait_place(traits, t.text(1)?, out)?);
        });
        if !list.is_empty() {
            out.push(Step::Traits(id, list))?;
        }
        rows_of!(aggregate, aggregates, key, |g| {
            held.push(g.uuid(1, "aggregate")?);
        });
        if !held.is_empty() {
            // Exactly as long as needed: the view keeps the list as it is.
            let list = held.to_vec();
            held.clear();
            out.push(Step::Change(Change::SetAggregates(id, list)))?;
        }
    }
    Ok(())
}

/// Consumers and their allocations, read side by side in the order of the
/// consumers' numbers (both queries are sorted by it), so that each consumer comes
/// with its allocations.
fn read_consumers(
    consumers: &mut impl Rows,
    allocations: &mut impl Rows,
    classes: &mut Names,
    out: &mut Steps,
) -> Result<(), StoreError> {
    let mut pending = allocations.next()?;
    let (mut project, mut user, mut kind) =
        (Repeat::default(), Repeat::default(), Repeat::default());
    let mut held = Vec::new();
    let mut canonical = true;
    while let Some(r) = consumers.next()? {
        let id = r.int(0)?;
        let key = r.key(1)?;
        let uuid = key.uuid("consumer")?;
        // The uuids are distinct (unique in the table); spelled the one way allot
        // writes a uuid, distinct spellings are distinct uuids, so none is in the
        // view yet. Once another spelling has been met (a hand-edited row), every
        // consumer takes the search.
        canonical = canonical && key.is_canonical();
        let consumer = RawConsumer {
            uuid,
            project: project.changed_text(r.text(2)?)?,
            user: user.changed_text(r.text(3)?)?,
            kind: kind.changed(r.opt_text(4)?)?,
            generation: r.count(5)?,
            created_at: r.int(6)?,
            updated_at: r.int(7)?,
            allocations: Vec::new(),
            known_new: canonical,
        };
        // Allocation rows up to this consumer's number; any before it name no
        // consumer (the writes never leave such rows) and are skipped, as applying
        // them would do.
        while let Some(a) = pending {
            let of = a.int(0)?.cmp(&id);
            if of.is_gt() {
                break;
            }
            if of.is_eq() {
                let class = class_place(classes, a.text(2)?, out)?;
                held.push((ProviderId(a.count(1)?), class, a.count(3)?));
            }
            pending = allocations.next()?;
        }
        out.push(Step::Consumer(RawConsumer {
            // Exactly as long as needed.
            allocations: held.to_vec(),
            ..consumer
        }))?;
        held.clear();
    }
    Ok(())
}
