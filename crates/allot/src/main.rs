//! The `allot` binary: `allot serve` runs the Placement API on the embedded store;
//! `allot bench` times an endpoint; `allot classes` lists a running allot's resource
//! classes with their metadata; `allot claims` and `allot pending` show and manage its
//! pending claims; `allot server-groups` its server groups (and imports Nova's);
//! `allot drain` and `allot drains` drain hosts; `allot consumers` lists who holds
//! what and `allot audit` finds what no live workload accounts for; `allot dry-run`
//! shows what a write would do; `allot shapes` keeps named shapes (and imports Nova's
//! flavors as shapes); `allot export` and `allot import` move a deployment between
//! databases; `allot db migrate` (alias `sync`) brings a database's schema up to date;
//! `allot policy list` shows the authorization rules in force; `allot verify` compares
//! a Placement with the allot that is to replace it; `allot status` shows running
//! nodes at a glance.
//!
//! Settings come from flags, then environment variables (`ALLOT_*`), then an optional
//! TOML file (`--config`), then Placement's `placement.conf` (`--placement-conf`), then
//! defaults, in that order of precedence (see `config`).

mod allocator;
mod audit;
mod bench;
mod claims;
mod classes;
mod config;
mod drains;
mod dry_run;
mod dump;
mod flavors;
mod policy;
mod serve;
mod server_groups;
mod shapes;
mod status;
mod token;
mod verify;

use anyhow::Context;
use clap::{Parser, Subcommand};

use config::ServeArgs;

/// allot: a resource placement service that speaks the OpenStack Placement API.
#[derive(Parser, Debug)]
#[command(name = "allot", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the Placement API server (on 127.0.0.1:8778 with an embedded SQLite
    /// database by default).
    Serve(ServeArgs),
    /// Seed and time the reference workloads against a Placement endpoint (allot or
    /// OpenStack Placement).
    Bench(bench::BenchArgs),
    /// List a running allot's resource classes with their metadata (`-f json` for
    /// scripts), or set a custom class's metadata (`allot classes set`).
    Classes(classes::ClassesArgs),
    /// List, show, create, confirm or release a running allot's pending claims
    /// (`-f json` for scripts).
    Claims(claims::ClaimsArgs),
    /// What live pending claims hold on a provider (a uuid or a name), or for a
    /// consumer or project.
    Pending(claims::PendingArgs),
    /// List, show, create, delete or change the members of a running allot's server
    /// groups, or import Nova's (`-f json` for scripts).
    #[command(name = "server-groups")]
    ServerGroups(server_groups::ServerGroupsArgs),
    /// Drain hosts: place every consumer of the roots elsewhere, as one plan, each
    /// target held by a pending claim (`allot drains confirm` moves them).
    Drain(drains::DrainArgs),
    /// List, show, confirm or abandon a running allot's drains.
    Drains(drains::DrainsArgs),
    /// The consumers that hold allocations or pending claims, with their totals
    /// and providers, filtered (`-f json` for scripts).
    Consumers(audit::ConsumersArgs),
    /// Find the consumers that hold resources and are not among the live workloads
    /// listed (a file or standard input, one uuid a line); `--delete` removes them.
    Audit(audit::AuditArgs),
    /// What an inventory write, a reshape or a provider delete would answer and leave
    /// over capacity on a running allot, with nothing changed (POST /dry_run).
    #[command(name = "dry-run")]
    DryRun(dry_run::DryRunArgs),
    /// Write a whole deployment from a database to a portable JSON dump (no server
    /// needed; stop the one using the database first).
    Export(dump::ExportArgs),
    /// Load a dump written by `allot export` into an empty database, checked first
    /// and written in one transaction.
    Import(dump::ImportArgs),
    /// Database maintenance: `allot db migrate` (or `allot db sync`, the name
    /// `placement-manage db sync` has) brings a database's schema up to date (as
    /// `allot serve` does on start) and exits; `allot db vacuum` rewrites an SQLite
    /// database compactly in allot's page size.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Add, list or revoke the static tokens of `allot serve --auth tokens` (the file
    /// stores only their hashes; a running server rereads it on SIGHUP).
    Token(token::TokenArgs),
    /// Ask a running OpenStack Placement and an allot serving its imported data the
    /// same GETs at several microversions, and show every difference (exit status 1
    /// on one docs/api.md does not document).
    Verify(verify::VerifyArgs),
    /// One screen on one or several running allot nodes: version, store and schema,
    /// health, the view's lag, counts, requests and claims since the start.
    Status(status::StatusArgs),
    /// List, show, set or delete a running allot's named shapes, count how many more
    /// of each fit, or import Nova's flavors as shapes (`-f json` for scripts).
    Shapes(shapes::ShapesArgs),
    /// How many more instances of a shape fit now, in all and per root, aggregate or
    /// trait group (GET /headroom).
    Headroom(claims::HeadroomArgs),
    /// Why a candidate query finds what it finds: per group, how many providers each
    /// stage leaves, the nearest misses, and the stage that emptied the answer.
    Explain(claims::ExplainArgs),
    /// Show the authorization rules: `allot policy list` prints every rule with the
    /// check in force (a policy file's, or the mode's built-in default).
    Policy(policy::PolicyArgs),
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Create or migrate the schema of a database (sqlite:PATH, postgres://... or
    /// mysql://...; with --placement-conf, allot's database beside Placement's); run
    /// again, it changes nothing.
    #[command(visible_alias = "sync")]
    Migrate(config::DatabaseArgs),
    /// Rewrite an SQLite database compactly, in the 1 KiB pages allot now creates
    /// databases with (one made by an older allot has 4 KiB pages, and a slower
    /// tail under claim storms at a million providers). Stop the server first: it
    /// is refused while one runs. Needs free space for a second copy of the file.
    Vacuum(config::DatabaseArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::serve(args),
        Command::Bench(args) => bench::run(args),
        Command::Classes(args) => classes::run(args),
        Command::Claims(args) => claims::run(args),
        Command::Pending(args) => claims::run_pending(args),
        Command::ServerGroups(args) => server_groups::run(args),
        Command::Drain(args) => drains::run_drain(args),
        Command::Drains(args) => drains::run_drains(args),
        Command::Consumers(args) => audit::run_consumers(args),
        Command::Audit(args) => audit::run_audit(args),
        Command::DryRun(args) => dry_run::run(args),
        Command::Export(args) => dump::run_export(args),
        Command::Import(args) => dump::run_import(args),
        // Opening a store migrates it: that is all there is to do.
        Command::Db {
            command: DbCommand::Migrate(args),
        } => {
            let database = args.resolve(&config::process_env)?;
            allot_store::Store::open(&database)
                .map(|_| println!("the database schema is up to date"))
                .with_context(|| format!("migrating database {}", allot_store::redacted(&database)))
        }
        Command::Db {
            command: DbCommand::Vacuum(args),
        } => {
            let database = args.resolve(&config::process_env)?;
            let Some(path) = allot_store::sqlite_file(&database)? else {
                anyhow::bail!(
                    "allot db vacuum rewrites SQLite databases (sqlite:PATH); {} is not one \
                     (PostgreSQL has its own VACUUM)",
                    allot_store::redacted(&database)
                );
            };
            let done =
                allot_store::vacuum_sqlite(path).with_context(|| format!("vacuuming {path}"))?;
            println!(
                "rewrote {path}: pages of {} bytes, now {}; {} bytes, now {}",
                done.page_before, done.page_after, done.bytes_before, done.bytes_after
            );
            Ok(())
        }
        Command::Token(args) => token::run(args),
        Command::Policy(args) => policy::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Status(args) => status::run(args),
        Command::Shapes(args) => shapes::run(args),
        Command::Headroom(args) => claims::run_headroom(args),
        Command::Explain(args) => claims::run_explain(args),
    }
}
