//! `allot bench`: seeds the reference workloads of `shared/BENCHMARKS.md` and times
//! their allocation candidate queries, through the public Placement HTTP API only
//! (`allot-client`), so the same run works against allot and OpenStack Placement.
//!
//! - `shapes`: the workloads as pure data (providers, load, queries).
//! - `seed`: creates a shape with bounded concurrency; resumable.
//! - `query`: warm-up, then timed runs of each query; p50/p99, optionally against a
//!   second server request by request, and the server's RSS.
//! - `claims`: concurrent claims on a seeded `flat` (a write storm, or scheduler
//!   loops); throughput, p50/p99, refusals.
//! - `mass_start`: many instances started at once, Nova's way (candidates, weigh,
//!   claim, retry) or allot's pick-and-claim; wall time, requests, conflicts,
//!   over-commit.
//! - `groups`: instances in anti-affinity server groups started at once, Nova's way
//!   (a shared record of the groups' hosts, candidates, filter, weigh, claim, retry)
//!   or allot's pick-and-claim naming the group; wall time, requests, retries, and
//!   the rule's violations read back afterwards.
//! - `drain`: hosts drained, Nova's way (per instance: allocations, candidates,
//!   filter, move, retry) or allot's (a drain per host and its confirm); wall time,
//!   requests, retries, unplaced, and the groups' violations read back.
//! - `held`: the read-back of the claims and mass-start runs: the server must hold
//!   exactly what it accepted.
//!
//! The commands run their own tokio runtime: they share nothing with `allot serve`.

mod claims;
mod drain;
mod groups;
mod held;
mod mass_start;
mod query;
mod seed;
pub mod shapes;

use clap::{Args, Subcommand};

/// `allot bench ...`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Create a reference shape on a Placement endpoint (resumable: what exists is
    /// kept).
    Seed(seed::SeedArgs),
    /// Time the shape's allocation candidate queries (p50, p99), optionally against a
    /// second endpoint request by request (a ratio only where both return as many
    /// candidates).
    Query(query::QueryArgs),
    /// Concurrent claims on a seeded flat shape: a write storm, or scheduler loops
    /// (candidates, pick, claim); throughput, p50/p99, refusals; then checks that the
    /// server holds exactly the claims it accepted.
    Claims(claims::ClaimsArgs),
    /// Many instances of `small` started at once on a seeded flat shape: Nova's way
    /// (candidates, weigh, PUT, retry on 409) or allot's pick-and-claim (one request
    /// per instance, or one for all); wall time, requests, conflicts and retries,
    /// then checks that what was accepted is held and nothing is over capacity.
    MassStart(mass_start::MassStartArgs),
    /// `groups` scenario `anti`: instances of `small` in anti-affinity server groups
    /// (1,000 in 200 groups of 5), started at once on a seeded flat shape: Nova's
    /// way (a shared record of the groups' hosts, candidates, filter, weigh, PUT,
    /// retry on 409) or allot's (the groups made on the server, one pick-and-claim
    /// per instance naming its group); wall time, requests, 409s and retries, and
    /// the rule's violations read back afterwards.
    GroupsAnti(groups::GroupsAntiArgs),
    /// Hosts drained on a seeded flat shape, half their instances in anti-affinity
    /// groups with members elsewhere: Nova's way (per instance: allocations,
    /// candidates, filter, move, retry on 409) or allot's (one drain per host, then
    /// its confirm); wall time, requests, retries, unplaced, violations read back.
    Drain(drain::DrainArgs),
}

/// Where the endpoint is and how to talk to it.
#[derive(Args, Debug, Clone)]
struct Endpoint {
    /// The Placement endpoint, e.g. http://127.0.0.1:8778 (https:// trusts the
    /// system's roots, or those of SSL_CERT_FILE).
    #[arg(long)]
    url: String,
    /// The token (allot's default policy and Placement's noauth2 want `admin`).
    #[arg(long, default_value = "admin")]
    token: String,
    /// The header the token goes in.
    #[arg(long, default_value = "x-auth-token")]
    token_header: String,
    /// The microversion to request.
    #[arg(long, default_value = "1.39")]
    microversion: String,
}

impl Endpoint {
    fn client(&self, url: &str, token: &str) -> anyhow::Result<allot_client::Client> {
        let config = allot_client::Config {
            url: url.to_owned(),
            token_header: self.token_header.clone(),
            token: token.to_owned(),
            microversion: self.microversion.clone(),
            tls: allot_tls::ClientTls::default(),
        };
        Ok(allot_client::Client::new(&config)?)
    }
}

/// Runs a bench command to completion.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match args.command {
            BenchCommand::Seed(args) => seed::seed(args).await,
            BenchCommand::Query(args) => query::query(args).await,
            BenchCommand::Claims(args) => claims::claims(args).await,
            BenchCommand::MassStart(args) => mass_start::mass_start(args).await,
            BenchCommand::GroupsAnti(args) => groups::groups_anti(args).await,
            BenchCommand::Drain(args) => drain::run(args).await,
        }
    })
}
