//! The view saved beside an SQLite file at a clean stop and while the server runs,
//! and read back at the next start instead of the tables when the file has not
//! changed since, or only by commits its change log still holds (issue 25: a
//! restart at a million providers ready in under 2 s, after a crash too).
//!
//! Reading the tables costs two cores for seconds at that size: SQLite steps through
//! some fourteen million rows while a second thread folds them into the view, and the
//! fold derives each provider's usage from the consumers' allocations, one provider
//! at a random place per consumer. The saved view holds the same records, and each
//! provider's usage beside them, in a compact binary form (postcard, the serde format
//! of the `postcard` crate: varints, no field names), so that the load is two threads
//! that never meet until the end: this one reads the providers with their usage, a
//! second one the consumers into a table of their own ([`State::consumer_table`]),
//! and the two are joined.
//!
//! **When it is used.** Only when nothing can have written the database since it was
//! saved: the file's identity (device, inode, size, and modification and change
//! times to the nanosecond as the kernel keeps them) is what was recorded after the
//! last connection closed, no write-ahead log is left beside it, and the change log's
//! head and the schema version are those saved, and by the build that saved it
//! ([`Stamp`]). A change time cannot be set back by hand (`touch` and `cp` over the
//! file both move it), and every allot write moves the log's head. Anything else (no
//! file, another build, a checksum that fails, a record that does not decode) is a
//! load from the tables, as without a saved view; a saved view that no longer
//! matches is removed.
//!
//! **Saved while the server ran** ([`Origin::running`]), it is read after a crash:
//! when the file is the same one (device and inode), the schema version is the
//! same, and the change log still holds the commit it was saved at, with the
//! record's CRC-32 as saved (so the log read now continues the history the view was
//! saved from); the log's commits after it are then applied to it, as a node
//! follows the log. The log keeps the last 10,000 commits: a view older than that is
//! not read. What this cannot see is a program other than allot writing the tables
//! between the crash and the start (at a clean stop the file's change time tells);
//! allot's file is allot's to write.
//!
//! **When it is written.** By the host's writer after its last commit, once the
//! connections are closed (SQLite then checkpoints the WAL into the file and removes
//! it) and while the process still holds the file's lock, so no other process can
//! write in between; and while the server runs, every `--save-view-every` seconds
//! when anything was written since, on a thread of its own, from a published version
//! of the view that no write changes (`crate::host`). Either way to `PATH-view.tmp`,
//! renamed over `PATH-view`. Not fsynced: each block carries a CRC-32, so a file cut
//! short by a crash is refused, not misread, and the next start reads the tables.
//!
//! **Layout.** 16 bytes of magic and the offsets of the consumers' section and of
//! the head (u64 each, little endian), then blocks: the providers' blocks, an empty
//! block, the consumers' blocks, an empty block, and the head (last, so that the
//! records are written in one pass, naming each class and text by the place the
//! head lists it at), which begins with the writing build's [`Stamp`]. A block is its length, its CRC-32 and its record count (three
//! u32, little endian), then that many records.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use allot_core::{
    Allocation, Change, ConsumerRow, Inventory, ProviderId, ProviderRow, ResourceClass, State,
    Text, TraitName, Uuid,
};
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// The first bytes of a saved view.
const MAGIC: &[u8; 16] = b"allot saved view";

/// The layout this build writes and reads; any other is not read.
const FORMAT: u32 = 1;

/// The bytes before the first block: the magic, then where the consumers' section
/// and the head begin (u64 each, little endian).
const START: usize = 32;

/// Records per block: enough that a block's header costs nothing, few enough that a
/// block stays in the cache while its records are folded.
const BLOCK: usize = 1024;

/// Where the view of the database at `database` is saved.
pub(crate) fn path_of(database: &str) -> PathBuf {
    PathBuf::from(format!("{database}-view"))
}

/// `path` with `suffix` after its name.
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Where a view is written before it is renamed over `saved`.
fn tmp_path(saved: &Path) -> PathBuf {
    suffixed(saved, ".tmp")
}

/// Where the consumers' section is written before it is appended.
fn tmp_consumers_path(saved: &Path) -> PathBuf {
    suffixed(saved, ".tmp.consumers")
}

/// Removes what a save cut short (a second signal, a kill) left beside `saved`.
pub(crate) fn remove_leftovers(saved: &Path) {
    let _ = std::fs::remove_file(tmp_path(saved));
    let _ = std::fs::remove_file(tmp_consumers_path(saved));
}

/// What a database file was when its view was saved: what any write to it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    pub(crate) fn of(path: &Path) -> std::io::Result<Identity> {
        let m = std::fs::metadata(path)?;
        Ok(Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Whether `other` is the same file (device and inode), whatever was written to
    /// it since.
    pub(crate) fn same_file(&self, other: &Identity) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

/// What a view was saved from: the database as it was, at which commit, by which
/// schema. A view saved at a clean stop is read only where all three are as they
/// are now; one saved while the server ran (`running`), where the file is the same
/// one and its log still holds that commit and every one after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Origin {
    pub(crate) database: Identity,
    pub(crate) cursor: i64,
    pub(crate) schema: u64,
    /// For a view saved while the server ran: the CRC-32 of commit `cursor`'s
    /// record in the change log, which proves that the log read at the next start
    /// continues the history this view was saved from. `None` for one saved at a
    /// clean stop.
    pub(crate) running: Option<u32>,
}

/// The first block: what the view was saved from, and what is few enough to be
/// read before the two threads start.
#[derive(Serialize, Deserialize)]
struct Head {
    origin: Origin,
    /// The class names the providers refer to by place.
    classes: Vec<String>,
    /// The trait names the providers refer to by place.
    traits: Vec<String>,
    /// The class names the consumers refer to by place (each section's own list:
    /// the two are written side by side).
    consumer_classes: Vec<String>,
    /// The projects, users and types the consumers refer to by place.
    texts: Vec<String>,
    /// Custom classes, their metadata and custom traits, as the change log writes
    /// them (`crate::log`).
    catalogue: Vec<u8>,
    /// The server groups, the claims, the drains and the web UI's revoked
    /// sessions and the named shapes, likewise, as `Change::PutServerGroup`s,
    /// `Change::PutClaim`s, `Change::PutDrain`s, `Change::RevokeSession`s and
    /// `Change::PutShape`s (groups first: a member's claims are indexed as they
    /// come).
    claims: Vec<u8>,
    providers: u64,
    consumers: u64,
}

/// Which build wrote a saved view, first in its head block: the layout number,
/// allot's version, and a sample of each record as the build encodes it. postcard
/// writes no field names, so a record type that gained, lost or reordered a field
/// would otherwise be misread; such a build encodes the samples otherwise, and its
/// saved views are not read (the tables are, once, after an upgrade).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Stamp {
    format: u32,
    version: String,
    layout: Vec<u8>,
}

impl Stamp {
    fn this_build() -> Stamp {
        let uuid = |n| Uuid::from_u128(n);
        let head = Head {
            origin: Origin {
                database: Identity {
                    dev: 1,
                    ino: 2,
                    size: 3,
                    mtime: (4, 5),
                    ctime: (6, 7),
                },
                cursor: 8,
                schema: 9,
                running: Some(9),
            },
            classes: vec!["10".into()],
            traits: vec!["11".into()],
            consumer_classes: vec!["11.5".into()],
            texts: vec!["12".into()],
            catalogue: vec![13],
            claims: vec![14],
            providers: 15,
            consumers: 16,
        };
        let provider = SavedProvider {
            row: ProviderRow {
                id: ProviderId(17),
                uuid: uuid(18),
                name: "19".into(),
                generation: 20,
                parent: Some(ProviderId(21)),
                root: ProviderId(22),
                created_at: 23,
                updated_at: 24,
            },
            inventories: vec![(
                25,
                Inventory {
                    total: 26,
                    reserved: 27,
                    min_unit: 28,
                    max_unit: 29,
                    step_size: std::num::NonZeroU64::new(30).expect("not 0"),
                    allocation_ratio: 31.5,
                },
            )],
            traits: vec![32],
            aggregates: vec![uuid(33)],
            used: vec![(34, 35)],
            consumers: vec![uuid(36)],
        };
        let consumer = SavedConsumer {
            uuid: uuid(37),
            project: 38,
            user: 39,
            kind: Some(40),
            generation: 41,
            created_at: 42,
            updated_at: 43,
            allocations: vec![(ProviderId(44), 45, 46)],
        };
        let layout =
            postcard::to_stdvec(&(head, provider, consumer)).expect("plain records encode");
        Stamp {
            format: FORMAT,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            layout,
        }
    }
}

/// A provider as saved: its row, what it holds, and its usage.
#[derive(Serialize, Deserialize)]
struct SavedProvider {
    row: ProviderRow,
    inventories: Vec<(u32, Inventory)>,
    traits: Vec<u32>,
    aggregates: Vec<Uuid>,
    /// Its usage index: per class, and the consumers holding anything here.
    used: Vec<(u32, u64)>,
    consumers: Vec<Uuid>,
}

/// A consumer as saved, its texts and classes by place.
#[derive(Serialize, Deserialize)]
struct SavedConsumer {
    uuid: Uuid,
    project: u32,
    user: u32,
    kind: Option<u32>,
    generation: u64,
    created_at: i64,
    updated_at: i64,
    allocations: Vec<(ProviderId, u32, u64)>,
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("saved view: {what}"))
}

/// Why a saved view that no longer matches its database is not read.
pub(crate) fn changed() -> StoreError {
    corrupt("the database has changed since the view was saved")
}

/// Names (or texts) by place, as the writer hands them out.
#[derive(Default)]
struct Places<'a> {
    list: Vec<&'a str>,
    places: std::collections::HashMap<&'a str, u32>,
    /// The addresses of the last few texts asked for, and their places: the view
    /// holds one copy of each name, so nearly every question is one of these, and
    /// answered without hashing.
    recent: [(usize, usize, u32); 4],
    next: usize,
}

impl<'a> Places<'a> {
    fn of(&mut self, name: &'a str) -> u32 {
        let key = (name.as_ptr() as usize, name.len());
        if let Some(&(_, _, place)) = self.recent.iter().find(|r| (r.0, r.1) == key) {
            return place;
        }
        let place = *self.places.entry(name).or_insert_with(|| {
            self.list.push(name);
            (self.list.len() - 1) as u32
        });
        self.recent[self.next] = (key.0, key.1, place);
        self.next = (self.next + 1) % self.recent.len();
        place
    }

    fn owned(&self) -> Vec<String> {
        self.list.iter().map(|s| (*s).to_owned()).collect()
    }
}

/// Gathers records into blocks and writes them.
struct Blocks<W: Write> {
    out: W,
    block: Vec<u8>,
    count: u32,
}

impl<W: Write> Blocks<W> {
    fn push(&mut self, record: &impl Serialize) -> Result<(), StoreError> {
        let block = std::mem::take(&mut self.block);
        self.block = postcard::to_extend(record, block).map_err(corrupt)?;
        self.count += 1;
        if self.count as usize >= BLOCK {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what is gathered as a block (an empty one ends a section).
    fn flush(&mut self) -> Result<(), StoreError> {
        let len = u32::try_from(self.block.len()).map_err(|_| corrupt("a block over 4 GiB"))?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out
            .write_all(&crc32fast::hash(&self.block).to_le_bytes())?;
        self.out.write_all(&self.count.to_le_bytes())?;
        self.out.write_all(&self.block)?;
        self.block.clear();
        self.count = 0;
        Ok(())
    }
}

/// A provider as written: as [`SavedProvider`] is read, borrowing its row.
#[derive(Serialize)]
struct ProviderOut<'a> {
    row: &'a ProviderRow,
    inventories: Vec<(u32, Inventory)>,
    traits: Vec<u32>,
    aggregates: &'a [Uuid],
    used: Vec<(u32, u64)>,
    consumers: &'a [Uuid],
}

/// Writes `view`, saved from `origin`, to `path` (through a temporary file renamed
/// over it). Returns the bytes written.
///
/// The consumers' section is written by a second thread into a file of its own and
/// appended after the providers' (a copy in the kernel): the two halves take about
/// as long, and the stop waits for the save.
pub(crate) fn save(path: &Path, view: &State, origin: Origin) -> Result<u64, StoreError> {
    let (tmp, tmp_consumers) = (tmp_path(path), tmp_consumers_path(path));
    let written = std::thread::scope(|scope| {
        let consumers = std::thread::Builder::new()
            .name("allot-save".into())
            .spawn_scoped(scope, || write_consumers(&tmp_consumers, view))?;
        let providers = write_providers(&tmp, view);
        let consumers = match consumers.join() {
            Ok(written) => written,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        finish(&tmp, &tmp_consumers, view, origin, providers?, consumers?)
    });
    let _ = std::fs::remove_file(&tmp_consumers);
    match written {
        Ok(bytes) => {
            std::fs::rename(&tmp, path)?;
            Ok(bytes)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Creates `path` for writing, readable by this process's user alone: it holds what
/// the database holds, whatever the database file's own mode.
fn create(path: &Path) -> Result<File, StoreError> {
    Ok(std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?)
}

/// What one section's writing gave: its file, how many records, and the names its
/// records refer to by place.
struct Section {
    file: File,
    count: u64,
    names: [Vec<String>; 2],
}

/// Writes the start's room and the providers' section to `path`.
fn write_providers(path: &Path, view: &State) -> Result<Section, StoreError> {
    let (mut classes, mut traits) = (Places::default(), Places::default());
    let mut file = create(path)?;
    file.write_all(&[0; START])?;
    let (file, count) = write_section(
        file,
        view.providers().map(|p| ProviderOut {
            row: &p.row,
            inventories: p
                .inventories
                .iter()
                .map(|(class, inventory)| (classes.of(class.as_str()), *inventory))
                .collect(),
            traits: p.traits.iter().map(|t| traits.of(t.as_str())).collect(),
            aggregates: p.aggregates.as_slice(),
            used: p
                .usage
                .by_class
                .iter()
                .map(|(class, used)| (classes.of(class.as_str()), *used))
                .collect(),
            consumers: p.usage.consumers.as_slice(),
        }),
    )?;
    Ok(Section {
        file,
        count,
        names: [classes.owned(), traits.owned()],
    })
}

/// Writes the consumers' section to a file of its own at `path`.
fn write_consumers(path: &Path, view: &State) -> Result<Section, StoreError> {
    let (mut classes, mut texts) = (Places::default(), Places::default());
    let (file, count) = write_section(
        create(path)?,
        view.consumers().map(|c| SavedConsumer {
            uuid: c.row.uuid,
            project: texts.of(&c.row.project_id),
            user: texts.of(&c.row.user_id),
            kind: c.row.consumer_type.as_deref().map(|k| texts.of(k)),
            generation: c.row.generation,
            created_at: c.row.created_at,
            updated_at: c.row.updated_at,
            allocations: c
                .allocations
                .iter()
                .map(|a| (a.provider, classes.of(a.class.as_str()), a.used))
                .collect(),
        }),
    )?;
    Ok(Section {
        file,
        count,
        names: [classes.owned(), texts.owned()],
    })
}

/// Writes `records` at the end of `file` as a section: their blocks, then the empty
/// block that ends it. Returns the file and how many records.
fn write_section<R: Serialize>(
    file: File,
    records: impl Iterator<Item = R>,
) -> Result<(File, u64), StoreError> {
    let mut blocks = Blocks {
        out: BufWriter::with_capacity(1 << 20, file),
        block: Vec::new(),
        count: 0,
    };
    let mut count = 0u64;
    for record in records {
        blocks.push(&record)?;
        count += 1;
    }
    blocks.flush()?;
    blocks.flush()?;
    let file = blocks.out.into_inner().map_err(|e| e.into_error())?;
    Ok((file, count))
}

/// Appends the consumers' section and the head to the providers' file at `tmp`, and
/// writes the start. Returns the file's length.
fn finish(
    tmp: &Path,
    tmp_consumers: &Path,
    view: &State,
    origin: Origin,
    providers: Section,
    consumers: Section,
) -> Result<u64, StoreError> {
    let mut out = providers.file;
    let consumers_at = out.stream_position()?;
    std::io::copy(&mut File::open(tmp_consumers)?, &mut out)?;
    let head_at = out.stream_position()?;
    let [classes, traits] = providers.names;
    let [consumer_classes, texts] = consumers.names;
    let head = head(
        view,
        origin,
        [classes, traits, consumer_classes, texts],
        (providers.count, consumers.count),
    );
    let mut blocks = Blocks {
        out: &mut out,
        block: Vec::new(),
        count: 0,
    };
    blocks.push(&(Stamp::this_build(), head))?;
    blocks.flush()?;
    let end = out.stream_position()?;
    let mut start = [0; START];
    start[..16].copy_from_slice(MAGIC);
    start[16..24].copy_from_slice(&consumers_at.to_le_bytes());
    start[24..].copy_from_slice(&head_at.to_le_bytes());
    // Until the file's times say it was written after the database's last write: a
    // write to the database after this one then shows in its times however coarse
    // the kernel's file clock (a tick, on some file systems).
    loop {
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&start)?;
        if Identity::of(tmp)?.mtime > origin.database.mtime {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Ok(end)
}

/// The head of a saved view of `view`: what it was saved from, the names its
/// records refer to by place, and what is few.
fn head(
    view: &State,
    origin: Origin,
    [classes, traits, consumer_classes, texts]: [Vec<String>; 4],
    (providers, consumers): (u64, u64),
) -> Head {
    // The catalogue in the order the tables' load folds it: classes, their metadata,
    // traits.
    let mut catalogue: Vec<Change> = view
        .custom_classes()
        .map(|record| Change::PutClass {
            record: record.clone(),
            old_name: None,
        })
        .collect();
    catalogue.extend(
        view.class_metadata_entries()
            .map(|(name, m)| Change::SetClassMetadata(name.clone(), Some(m.clone()))),
    );
    catalogue.extend(view.custom_traits().cloned().map(Change::PutTrait));
    let groups = view
        .server_groups()
        .map(|g| Change::PutServerGroup(Box::new(g.clone())));
    let drains = view.drains().map(|d| Change::PutDrain(Box::new(d.clone())));
    let revoked = view
        .session_revocations()
        .map(|(hash, until)| Change::RevokeSession {
            hash: hash.to_owned(),
            until,
            now: i64::MIN,
        });
    let shapes = view.shapes().map(|s| Change::PutShape(Box::new(s.clone())));
    let claims: Vec<Change> = groups
        .chain(view.claims().map(|c| Change::PutClaim(Box::new(c.clone()))))
        .chain(drains)
        .chain(revoked)
        .chain(shapes)
        .collect();
    Head {
        origin,
        classes,
        traits,
        consumer_classes,
        texts,
        catalogue: crate::log::encode(&catalogue),
        claims: crate::log::encode(&claims),
        providers,
        consumers,
    }
}

/// Reads a section's blocks, one at a time.
struct Reader {
    file: BufReader<File>,
    block: Vec<u8>,
    /// The bytes after the reader's place: no block is longer (a damaged length
    /// is refused before anything is allocated for it).
    left: u64,
}

impl Reader {
    fn open(path: &Path, at: u64) -> Result<Reader, StoreError> {
        let mut file = File::open(path)?;
        let left = file
            .metadata()?
            .len()
            .checked_sub(at)
            .ok_or_else(|| corrupt("an offset past the end"))?;
        file.seek(SeekFrom::Start(at))?;
        Ok(Reader {
            file: BufReader::with_capacity(1 << 20, file),
            block: Vec::new(),
            left,
        })
    }

    /// The next block's records (as bytes) and their count, checked against the
    /// block's CRC; `None` at the empty block that ends a section.
    fn next(&mut self) -> Result<Option<(&[u8], u32)>, StoreError> {
        let mut header = [0u8; 12];
        self.file
            .read_exact(&mut header)
            .map_err(|e| corrupt(format!("cut short: {e}")))?;
        let word = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes"));
        let (len, crc, count) = (word(0), word(4), word(8));
        if len == 0 && count == 0 {
            return Ok(None);
        }
        self.left = self
            .left
            .checked_sub(header.len() as u64 + u64::from(len))
            .ok_or_else(|| corrupt("a block longer than the file"))?;
        self.block.resize(len as usize, 0);
        self.file
            .read_exact(&mut self.block)
            .map_err(|e| corrupt(format!("cut short: {e}")))?;
        if crc32fast::hash(&self.block) != crc {
            return Err(corrupt("a block's checksum does not match"));
        }
        Ok(Some((&self.block, count)))
    }
}

/// Decodes the `count` records of `bytes`, one at a time, to `each`.
fn records<'b, T: Deserialize<'b>>(
    mut bytes: &'b [u8],
    count: u32,
    mut each: impl FnMut(T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    for _ in 0..count {
        let (record, rest) = postcard::take_from_bytes(bytes).map_err(corrupt)?;
        each(record)?;
        bytes = rest;
    }
    if !bytes.is_empty() {
        return Err(corrupt("a block longer than its records"));
    }
    Ok(())
}

/// The view saved at `path`, and what it was saved from, if `accept` takes its
/// origin (see the module's doc); `Ok(None)` if there is no saved view, an error if
/// it cannot be used (`accept`'s own among them).
pub(crate) fn load(
    path: &Path,
    accept: impl FnOnce(&Origin) -> Result<(), StoreError>,
) -> Result<Option<(State, Origin)>, StoreError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut start = [0u8; START];
    file.read_exact(&mut start)
        .map_err(|e| corrupt(format!("cut short: {e}")))?;
    if &start[..16] != MAGIC {
        return Err(corrupt("not a saved view"));
    }
    let offset = |i: usize| u64::from_le_bytes(start[i..i + 8].try_into().expect("8 bytes"));
    let (consumers_at, head_at) = (offset(16), offset(24));
    drop(file);
    let mut reader = Reader::open(path, head_at)?;
    let Some((bytes, 1)) = reader.next()? else {
        return Err(corrupt("no head"));
    };
    // The stamp first: a head laid out by another build is not decoded at all.
    let (stamp, rest) = postcard::take_from_bytes::<Stamp>(bytes).map_err(corrupt)?;
    let this = Stamp::this_build();
    if stamp != this {
        return Err(corrupt(format!(
            "written by allot {} (layout {}), read by allot {} (layout {}), whose \
             records are laid out otherwise",
            stamp.version, stamp.format, this.version, this.format
        )));
    }
    let head: Head = postcard::from_bytes(rest).map_err(corrupt)?;
    accept(&head.origin)?;
    let mut providers = Reader::open(path, START as u64)?;

    let mut state = State::new();
    for change in crate::log::decode(&head.catalogue)? {
        if !matches!(
            change,
            Change::PutClass { .. } | Change::SetClassMetadata(..) | Change::PutTrait(_)
        ) {
            return Err(corrupt(
                "a change in the catalogue that is not a class or trait",
            ));
        }
        state.load_change(change);
    }
    let table = state.consumer_table(head.consumers as usize);
    let (state, table, texts) = std::thread::scope(|scope| {
        let consumers = std::thread::Builder::new()
            .name("allot-load".into())
            .spawn_scoped(scope, || read_consumers(path, consumers_at, &head, table))?;
        let state = read_providers(&mut providers, &head, state);
        let consumers = match consumers.join() {
            Ok(read) => read,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let (table, texts) = consumers?;
        Ok::<_, StoreError>((state?, table, texts))
    })?;
    let mut state = state;
    if table.len() as u64 != head.consumers {
        return Err(corrupt("fewer consumers than its head says"));
    }
    state.join_consumers(table, texts);
    for change in crate::log::decode(&head.claims)? {
        if !matches!(
            change,
            Change::PutClaim(_)
                | Change::PutServerGroup(_)
                | Change::PutDrain(_)
                | Change::RevokeSession { .. }
                | Change::PutShape(_)
        ) {
            return Err(corrupt(
                "a change among the claims that is not a claim, a server group, a drain, a \
                 revoked session or a shape",
            ));
        }
        state.load_change(change);
    }
    Ok(Some((state, head.origin)))
}

/// The name (or text) at `place` in a head's list of `what`.
fn by_place<T: Clone>(list: &[T], place: u32, what: &str) -> Result<T, StoreError> {
    list.get(place as usize)
        .cloned()
        .ok_or_else(|| corrupt(format!("{what} {place} of {}", list.len())))
}

/// This thread's half of a load: the providers, with their usage.
fn read_providers(reader: &mut Reader, head: &Head, mut state: State) -> Result<State, StoreError> {
    let classes: Vec<ResourceClass> = head
        .classes
        .iter()
        .map(|n| ResourceClass::new_unchecked(n.as_str()))
        .collect();
    let traits: Vec<TraitName> = head
        .traits
        .iter()
        .map(|n| TraitName::new_unchecked(n.as_str()))
        .collect();
    let mut count = 0u64;
    while let Some((bytes, n)) = reader.next()? {
        records(bytes, n, |p: SavedProvider| {
            let id = p.row.id;
            state.load_provider(p.row);
            if !p.inventories.is_empty() {
                let list = p
                    .inventories
                    .into_iter()
                    .map(|(c, inventory)| Ok((by_place(&classes, c, "class")?, inventory)))
                    .collect::<Result<_, StoreError>>()?;
                state.load_change(Change::SetInventories(id, list));
            }
            if !p.traits.is_empty() {
                let list = p
                    .traits
                    .into_iter()
                    .map(|t| by_place(&traits, t, "trait"))
                    .collect::<Result<_, StoreError>>()?;
                state.load_change(Change::SetTraits(id, list));
            }
            if !p.aggregates.is_empty() {
                state.load_change(Change::SetAggregates(id, p.aggregates));
            }
            if !p.used.is_empty() || !p.consumers.is_empty() {
                let used = p
                    .used
                    .into_iter()
                    .map(|(c, used)| Ok((by_place(&classes, c, "class")?, used)))
                    .collect::<Result<_, StoreError>>()?;
                state.load_usage(id, used, p.consumers);
            }
            count += 1;
            Ok(())
        })?;
    }
    if count != head.providers {
        return Err(corrupt("fewer providers than its head says"));
    }
    state.providers_loaded();
    Ok(state)
}

/// The other thread's half: the consumers, into a table of their own, and the texts
/// they share.
fn read_consumers(
    path: &Path,
    at: u64,
    head: &Head,
    mut table: allot_core::ConsumerTable,
) -> Result<(allot_core::ConsumerTable, Vec<Text>), StoreError> {
    // This thread's own copies, so that the two threads never count references on
    // one cache line (see `State::join_consumers`).
    let classes: Vec<ResourceClass> = head
        .consumer_classes
        .iter()
        .map(|n| ResourceClass::new_unchecked(n.as_str()))
        .collect();
    let texts: Vec<Text> = head.texts.iter().map(|t| Text::from(t.as_str())).collect();
    let text = |i: u32| by_place(&texts, i, "text");
    let mut reader = Reader::open(path, at)?;
    // A block's consumers are gathered first, so that their slots are warmed
    // together (see `ConsumerTable::warm`).
    let mut batch: Vec<SavedConsumer> = Vec::with_capacity(BLOCK);
    while let Some((bytes, n)) = reader.next()? {
        records(bytes, n, |c: SavedConsumer| {
            batch.push(c);
            Ok(())
        })?;
        let warmth: usize = batch.iter().map(|c| table.warm(&c.uuid)).sum();
        std::hint::black_box(warmth);
        for c in batch.drain(..) {
            let row = ConsumerRow {
                uuid: c.uuid,
                project_id: text(c.project)?,
                user_id: text(c.user)?,
                consumer_type: c.kind.map(text).transpose()?,
                generation: c.generation,
                created_at: c.created_at,
                updated_at: c.updated_at,
            };
            let allocations = c
                .allocations
                .into_iter()
                .map(|(provider, class, used)| {
                    Ok(Allocation {
                        provider,
                        class: by_place(&classes, class, "class")?,
                        used,
                    })
                })
                .collect::<Result<_, StoreError>>()?;
            table.insert(row, allocations);
        }
    }
    Ok((table, texts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A saved view whose head says another build wrote it (another version, or
    /// records laid out otherwise) is refused before its head is decoded; the same
    /// file with this build's stamp is read.
    #[test]
    fn a_view_another_build_saved_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("allot.db");
        std::fs::write(&database, b"a database").unwrap();
        let origin = Origin {
            database: Identity::of(&database).unwrap(),
            cursor: 7,
            schema: 6,
            running: None,
        };
        let same = |o: &Origin| if *o == origin { Ok(()) } else { Err(changed()) };
        let saved = path_of(database.to_str().unwrap());
        save(&saved, &State::new(), origin).unwrap();
        assert!(load(&saved, same).unwrap().is_some());

        // The head block again, with `stamp` in front of the same head.
        let restamp = |stamp: &Stamp| {
            let mut bytes = std::fs::read(&saved).unwrap();
            let head_at = u64::from_le_bytes(bytes[24..32].try_into().unwrap()) as usize;
            let payload = bytes[head_at + 12..].to_vec();
            let (_, head) = postcard::take_from_bytes::<Stamp>(&payload).unwrap();
            let mut block = postcard::to_stdvec(stamp).unwrap();
            block.extend_from_slice(head);
            bytes.truncate(head_at);
            bytes.extend_from_slice(&(block.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32fast::hash(&block).to_le_bytes());
            bytes.extend_from_slice(&1u32.to_le_bytes());
            bytes.extend_from_slice(&block);
            std::fs::write(&saved, bytes).unwrap();
        };
        let this = Stamp::this_build();
        restamp(&this);
        assert!(
            load(&saved, same).unwrap().is_some(),
            "restamping is faithful"
        );
        for other in [
            Stamp {
                version: "0.0.1-other".into(),
                ..Stamp::this_build()
            },
            Stamp {
                layout: this.layout[1..].to_vec(),
                ..Stamp::this_build()
            },
            Stamp {
                format: FORMAT + 1,
                ..Stamp::this_build()
            },
        ] {
            restamp(&other);
            let refused = load(&saved, same).unwrap_err().to_string();
            assert!(refused.contains("laid out otherwise"), "{refused}");
        }
    }
}
