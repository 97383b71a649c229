//! `allot export` and `allot import`: a whole deployment to a portable, versioned
//! JSON dump and back, to move it between stores (SQLite, PostgreSQL, MariaDB, and
//! OpenStack Placement's own database). They open the database directly, not
//! through a running allot: an export reads one read-only snapshot beside any server
//! running on it (`Store::read_only_snapshot`), an import needs the target to itself;
//! the format and the checks are `allot_store::dump`'s, described in `docs/dump.md`.
//!
//! Why the export reads the database rather than asking the server (a `GET
//! /export` streaming the dump from one version of the view): a read-only snapshot
//! is consistent on every engine (SQLite's WAL, a repeatable-read transaction on
//! the others), costs the server's writer nothing (no lock it waits on, no lease, no
//! migration), and works the same whether a server runs or not, with no route,
//! policy rule or credentials to add, and no dump of a whole cloud built in the
//! server's memory beside its view.
//!
//! Errors end the process with one line on stderr and exit status 1 (an import
//! refused for its content lists each problem on a line of its own after it).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use allot_store::dump::{self, ImportError};
use allot_store::Store;
use anyhow::{anyhow, Context};
use clap::Args;

use allot_placement_db as placement;

/// `allot export`.
#[derive(Args, Debug)]
#[command(after_help = "\
The database is read in one consistent, read-only snapshot, while any allot server \
on it keeps serving: nothing is written to it, no lock or lease is taken, and the \
server's writes do not wait for the export (on SQLite, one WAL read transaction that \
goes around the server's PATH-lock, which keeps out only a second writer; on \
PostgreSQL and MariaDB, one repeatable-read transaction). The database must be at \
this build's schema version (`allot db migrate` brings an older one up to date). \
The dump holds every provider, inventory, trait, aggregate, \
custom class (with its metadata), custom trait, consumer, allocation and pending \
claim; see docs/dump.md for the format.")]
pub struct ExportArgs {
    /// The database to read, e.g. sqlite:/var/lib/allot/allot.db. It must exist.
    #[arg(long)]
    database: String,
    /// Where to write the dump (`-`: standard output). A file is written beside its
    /// final name and renamed into place once complete.
    #[arg(
        long,
        short = 'o',
        default_value = "-",
        conflicts_with = "to_placement"
    )]
    output: String,
    /// Write into an empty OpenStack Placement database instead (made by Placement
    /// 16's `placement-manage db sync`), as `[placement_database] connection` names
    /// it, in one transaction: the way back after `allot import --from-placement`.
    #[arg(long, value_name = "URL", group = "placement")]
    to_placement: Option<String>,
    /// With --to-placement: leave out what Placement cannot hold (pending claims and
    /// custom classes' metadata) instead of refusing.
    #[arg(long, requires = "to_placement")]
    drop_extensions: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// How long connecting to a Placement database may take: for --from-placement and
/// --to-placement (both in the group `placement`).
#[derive(Args, Debug)]
pub struct ConnectArgs {
    /// How many seconds connecting to the Placement database may take before its
    /// host is called unreachable.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = placement::CONNECT_TIMEOUT.as_secs(),
        requires = "placement",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    connect_timeout: u64,
}

impl ConnectArgs {
    /// The Placement database `url` names, connected to with this timeout.
    fn placement(&self, url: &str) -> anyhow::Result<placement::PlacementUrl> {
        Ok(placement::PlacementUrl::parse(url)?
            .with_connect_timeout(std::time::Duration::from_secs(self.connect_timeout)))
    }
}

/// `allot import`.
#[derive(Args, Debug)]
#[command(after_help = "\
The target must be empty (no provider, consumer, claim, custom class or custom \
trait): it is created if it does not exist. The dump is checked as a whole first \
(format and version, unknown fields, duplicates, missing parents and cycles, \
unknown classes and traits, allocations and claims on providers not in the dump), \
and every problem found is listed; then everything is written in one transaction \
(on MariaDB, in transactions of 5,000 changes, within the server's packet and \
Galera's write-set limits) and read back. Allocations above their inventory's capacity, or outside its \
min_unit/max_unit/step_size, are kept with a warning: a real deployment can hold \
them after an inventory changed. Stop any allot server on the target first.")]
pub struct ImportArgs {
    /// The database to write into, e.g. sqlite:/var/lib/allot/allot.db.
    #[arg(long)]
    database: String,
    /// The dump to read (`-`: standard input).
    #[arg(
        long,
        short = 'i',
        default_value = "-",
        conflicts_with = "from_placement"
    )]
    input: String,
    /// Read a live OpenStack Placement database instead of a dump, as
    /// `[placement_database] connection` names it (mysql+pymysql://user:pass@host/placement,
    /// postgresql+psycopg2://..., mysql://, postgres://), in one read-only snapshot.
    #[arg(long, value_name = "URL", group = "placement")]
    from_placement: Option<String>,
    #[command(flatten)]
    connect: ConnectArgs,
    /// The project Placement gives consumers it knows no owner of (`[placement]
    /// incomplete_consumer_project_id`).
    #[arg(long, default_value = allot_core::ops::allocations::INCOMPLETE_CONSUMER_ID)]
    incomplete_consumer_project_id: String,
    /// The user Placement gives consumers it knows no owner of (`[placement]
    /// incomplete_consumer_user_id`).
    #[arg(long, default_value = allot_core::ops::allocations::INCOMPLETE_CONSUMER_ID)]
    incomplete_consumer_user_id: String,
}

/// Runs `allot export`; on failure prints one line and exits 1.
pub fn run_export(args: ExportArgs) -> anyhow::Result<()> {
    if let Err(e) = export(&args) {
        eprintln!("allot export: {e:#}");
        std::process::exit(1);
    }
    Ok(())
}

/// Runs `allot import`; on failure prints what went wrong and exits 1.
pub fn run_import(args: ImportArgs) -> anyhow::Result<()> {
    let done = match &args.from_placement {
        Some(url) => import_placement(&args, url),
        None => import(&args),
    };
    match done {
        Ok(()) => Ok(()),
        Err(Failure::Invalid(problems)) => {
            let source = if args.from_placement.is_some() {
                "the Placement database"
            } else {
                "the dump"
            };
            eprintln!(
                "allot import: refused, nothing was written: {source} has {} integrity problem(s):",
                problems.len()
            );
            for p in problems {
                eprintln!("  - {p}");
            }
            std::process::exit(1);
        }
        Err(Failure::Other(e)) => {
            eprintln!("allot import: {e:#}");
            std::process::exit(1);
        }
    }
}

fn export(args: &ExportArgs) -> anyhow::Result<()> {
    // Opening a SQLite file that is not there would create an empty database and
    // export nothing from it: a typo in the path must not look like an empty dump.
    if let Some(path) = allot_store::sqlite_path(&args.database).filter(|p| !p.is_empty()) {
        if !Path::new(path).exists() {
            return Err(anyhow!("no database at {path}"));
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (state, _) = Store::read_only_snapshot(&args.database)
        .with_context(|| format!("reading {}", allot_store::redacted(&args.database)))?;
    let dump = dump::export(&state, now);
    drop(state);
    if let Some(url) = &args.to_placement {
        return export_placement(args, url, dump);
    }
    let counts = dump.counts();
    if args.output == "-" {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        dump::write(&dump, &mut out)
            .and_then(|()| out.flush())
            .context("writing the dump to standard output")?;
    } else {
        let path = PathBuf::from(&args.output);
        let partial = path.with_extension("partial");
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&partial)?);
            dump::write(&dump, &mut out)?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&partial, &path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&partial);
            return Err(anyhow!("writing {}: {e}", path.display()));
        }
    }
    eprintln!(
        "allot export: {counts} from {}",
        allot_store::redacted(&args.database)
    );
    Ok(())
}

/// `allot export --to-placement`: the dump of the database, less what Placement
/// cannot hold (refused unless `--drop-extensions`), into an empty Placement database.
fn export_placement(args: &ExportArgs, url: &str, mut dump: dump::Dump) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let db = args.connect.placement(url)?;
    let with_metadata = dump
        .resource_classes
        .iter()
        .filter(|c| c.metadata.is_some())
        .count();
    let pending = dump.claims.iter().filter(|c| c.state == "pending").count();
    let ended = dump.claims.len() - pending;
    let (groups, drains, shapes) = (
        dump.server_groups.len(),
        dump.drains.len(),
        dump.shapes.len(),
    );
    if with_metadata + dump.claims.len() + groups + drains + shapes > 0 {
        let what = format!(
            "{pending} pending claim(s), {ended} ended claim(s), {with_metadata} custom \
             class(es) with metadata, {groups} server group(s) (Nova keeps its own), \
             {drains} drain(s) and {shapes} named shape(s)"
        );
        if !args.drop_extensions {
            return Err(anyhow!(
                "the database holds {what}, which Placement cannot hold; nothing was written \
                 (--drop-extensions leaves them out)"
            ));
        }
        eprintln!("allot export: leaving out {what} (--drop-extensions)");
        dump.claims.clear();
        dump.server_groups.clear();
        dump.drains.clear();
        dump.shapes.clear();
        for c in &mut dump.resource_classes {
            c.metadata = None;
        }
    }
    placement::write(&db, &dump)?;
    eprintln!(
        "allot export: {} from {} into {db} (one transaction) in {:.1}s",
        dump.counts(),
        allot_store::redacted(&args.database),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Why an import did not happen: integrity problems (listed) or anything else.
enum Failure {
    Invalid(Vec<String>),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

fn import(args: &ImportArgs) -> Result<(), Failure> {
    let (bytes, source) = if args.input == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("reading the dump from standard input")?;
        (bytes, "standard input")
    } else {
        let bytes =
            std::fs::read(&args.input).with_context(|| format!("reading {}", args.input))?;
        (bytes, args.input.as_str())
    };
    let dump = dump::parse(&bytes).map_err(|e| anyhow!("{source}: {e}"))?;
    load(&dump, &args.database)
}

/// `allot import --from-placement`: Placement's tables become a dump, which goes
/// the way of any other (checked as a whole, then one transaction). Placement is
/// read before the target is opened, so that a refused source touches nothing.
fn import_placement(args: &ImportArgs, url: &str) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let db = args.connect.placement(url)?;
    let placeholders = placement::Placeholders {
        project_id: args.incomplete_consumer_project_id.clone(),
        user_id: args.incomplete_consumer_user_id.clone(),
    };
    let read = placement::read(&db, &placeholders)?;
    if read.incomplete > 0 {
        eprintln!(
            "allot import: {} incomplete consumer(s) (no consumer row, or its project or \
             user gone) given project {:?} and user {:?}, as Placement's online migration does",
            read.incomplete, placeholders.project_id, placeholders.user_id
        );
    }
    load(&read.dump, &args.database)?;
    eprintln!(
        "allot import: from {db} (revision {}) in {:.1}s",
        read.revision,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Writes a dump into an empty database through the checked import.
fn load(dump: &dump::Dump, database: &str) -> Result<(), Failure> {
    let mut store = open(database)?;
    let database = allot_store::redacted(database);
    let report = match dump::import(&mut store, dump) {
        Ok(report) => report,
        Err(ImportError::Invalid(problems)) => return Err(Failure::Invalid(problems)),
        Err(e) => return Err(anyhow!("into {database}: {e}").into()),
    };
    for w in &report.warnings {
        eprintln!("allot import: warning: {w}");
    }
    let how = if store.kind().engine == "mariadb" {
        format!(
            "written in transactions of {} changes",
            allot_store::LARGE_WRITE_PART
        )
    } else {
        "written in one transaction".to_owned()
    };
    eprintln!(
        "allot import: {} into {database} ({how} and read back)",
        report.counts
    );
    Ok(())
}

/// Opens a store, saying what to do about the usual reason it cannot be.
fn open(url: &str) -> anyhow::Result<Store> {
    Store::open(url).map_err(|e| {
        let hint = if matches!(e, allot_store::StoreError::Locked(_)) {
            " (is an allot server running on it? stop it first; an export may be taken \
             while it runs)"
        } else {
            ""
        };
        anyhow!("opening database {}: {e}{hint}", allot_store::redacted(url))
    })
}
