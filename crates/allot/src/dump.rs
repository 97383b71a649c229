//! `allot export` and `allot import`: a whole deployment to a portable, versioned
//! JSON dump and back, to move it between stores (the embedded SQLite store and,
//! later, PostgreSQL). They open the database directly, not a running allot; the
//! format and the checks are `allot_store::dump`'s, described in `docs/dump.md`.
//!
//! Errors end the process with one line on stderr and exit status 1 (an import
//! refused for its content lists each problem on a line of its own after it).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use allot_store::dump::{self, ImportError};
use allot_store::Store;
use anyhow::{anyhow, Context};
use clap::Args;

/// `allot export`.
#[derive(Args, Debug)]
#[command(after_help = "\
The database is read in one go; nothing is written to it (but an older schema is \
migrated on opening, as a server would). Stop the allot server \
that uses it first: allot's SQLite engine holds its file exclusively while it runs, \
so an export from a database in use fails with \"database is locked\" rather than \
read a moving target. The dump holds every provider, inventory, trait, aggregate, \
custom class (with its metadata), custom trait, consumer, allocation and pending \
claim; see docs/dump.md for the format.")]
pub struct ExportArgs {
    /// The database to read, e.g. sqlite:/var/lib/allot/allot.db. It must exist.
    #[arg(long)]
    database: String,
    /// Where to write the dump (`-`: standard output). A file is written beside its
    /// final name and renamed into place once complete.
    #[arg(long, short = 'o', default_value = "-")]
    output: String,
}

/// `allot import`.
#[derive(Args, Debug)]
#[command(after_help = "\
The target must be empty (no provider, consumer, claim, custom class or custom \
trait): it is created if it does not exist. The dump is checked as a whole first \
(format and version, unknown fields, duplicates, missing parents and cycles, \
unknown classes and traits, allocations and claims on providers not in the dump), \
and every problem found is listed; then everything is written in one transaction \
and read back. Allocations above their inventory's capacity, or outside its \
min_unit/max_unit/step_size, are kept with a warning: a real deployment can hold \
them after an inventory changed. Stop any allot server on the target first.")]
pub struct ImportArgs {
    /// The database to write into, e.g. sqlite:/var/lib/allot/allot.db.
    #[arg(long)]
    database: String,
    /// The dump to read (`-`: standard input).
    #[arg(long, short = 'i', default_value = "-")]
    input: String,
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
    match import(&args) {
        Ok(()) => Ok(()),
        Err(Failure::Invalid(problems)) => {
            eprintln!(
                "allot import: refused, nothing was written: the dump has {} integrity problem(s):",
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
    let mut store = open(&args.database)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let dump = dump::export_store(&mut store, now)
        .with_context(|| format!("reading {}", args.database))?;
    drop(store);
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
    eprintln!("allot export: {counts} from {}", args.database);
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
    let mut store = open(&args.database)?;
    let report = match dump::import(&mut store, &dump) {
        Ok(report) => report,
        Err(ImportError::Invalid(problems)) => return Err(Failure::Invalid(problems)),
        Err(e) => return Err(anyhow!("into {}: {e}", args.database).into()),
    };
    for w in &report.warnings {
        eprintln!("allot import: warning: {w}");
    }
    eprintln!(
        "allot import: {} into {} (written in one transaction and read back)",
        report.counts, args.database
    );
    Ok(())
}

/// Opens a store, saying what to do about the usual reason it cannot be.
fn open(url: &str) -> anyhow::Result<Store> {
    Store::open(url).map_err(|e| {
        let hint = if e.to_string().contains("locked") {
            " (is an allot server running on it? stop it first)"
        } else {
            ""
        };
        anyhow!("opening database {url}: {e}{hint}")
    })
}
