//! `allot consumers` and `allot audit`: which consumers hold what across a running
//! allot, and which of them no live workload accounts for (issue 47; docs/api.md,
//! "Consumers and the audit"; docs/operations.md, "Leaked allocations").
//!
//! The audit reads the uuids of the workloads that exist (what `openstack server
//! list --all-projects -f value -c ID` prints, plus the migrations in flight), sorts
//! them and sends them in ranges of at most [`CHUNK`] uuids: each request says "these
//! are all the live workloads between A and B", so the comparison runs on the server
//! without any request needing another's. It reports by default; `--delete` removes
//! what it reported in one write, which leaves (and names) whatever changed since.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::SystemTime;

use allot_client::consumers::{AuditRange, Holder, HolderQuery, Removal, ToRemove};
use anyhow::{bail, Context};
use clap::Args;
use uuid::Uuid;

use crate::claims::{connect, json_text, table};
use crate::classes::{Format, Remote};

/// The most uuids one audit request carries: 37 bytes each in JSON, about 7.4 MB, half
/// the server's body limit.
pub const CHUNK: usize = 200_000;

/// `allot consumers`.
#[derive(Args, Debug)]
pub struct ConsumersArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Only this project's.
    #[arg(long)]
    project: Option<String>,
    /// Only this user's.
    #[arg(long)]
    user: Option<String>,
    /// Only this consumer type's (`INSTANCE`, `MIGRATION`, ...).
    #[arg(long = "type")]
    consumer_type: Option<String>,
    /// Only those holding something on this provider (uuid).
    #[arg(long)]
    provider: Option<Uuid>,
    /// Only those holding something in this provider's tree (uuid).
    #[arg(long)]
    tree: Option<Uuid>,
    /// Only this server group's members.
    #[arg(long)]
    server_group: Option<Uuid>,
    /// `allocations`, `pending` or `both` (either when left out).
    #[arg(long)]
    holding: Option<String>,
    /// Consumers per request (every page is read).
    #[arg(long, default_value_t = 1000)]
    page: usize,
}

/// `allot audit`.
#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Files of live workload uuids, one a line (`-`, or none: standard input).
    lists: Vec<String>,
    /// Remove what the audit finds (a report only without it).
    #[arg(long)]
    delete: bool,
    /// When the lists were taken (RFC 3339, UTC): nothing created or changed since
    /// is removed. By default the oldest list file's time, or when reading standard
    /// input began.
    #[arg(long)]
    listed_at: Option<String>,
    /// Consumer types `--delete` may remove, comma-separated (`none`: consumers
    /// without a type).
    #[arg(long, default_value = "INSTANCE,MIGRATION")]
    types: String,
    /// The most of all consumers holding resources one `--delete` may remove.
    #[arg(long, default_value_t = 0.05)]
    max_share: f64,
    /// Remove past `--max-share`.
    #[arg(long)]
    force: bool,
}

/// Runs `allot consumers` to completion: every page.
pub fn run_consumers(args: ConsumersArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let mut query = HolderQuery {
        project_id: args.project,
        user_id: args.user,
        consumer_type: args.consumer_type,
        resource_provider: args.provider,
        in_tree: args.tree,
        server_group: args.server_group,
        holding: args.holding,
        limit: Some(args.page.max(1)),
        marker: None,
    };
    let mut all = Vec::new();
    loop {
        let page = runtime
            .block_on(client.consumers(&query))
            .context("GET /consumers")?;
        let done = page.consumers.len() < args.page.max(1);
        query.marker = page.consumers.last().map(|h| h.consumer_uuid);
        all.extend(page.consumers);
        if done {
            break;
        }
    }
    match args.format {
        Format::Json => print!("{}", json_text(&serde_json::json!({ "consumers": all }))),
        Format::Table => print!("{}", holders_table(&all)),
    }
    Ok(())
}

/// Runs `allot audit` to completion.
pub fn run_audit(args: AuditArgs) -> anyhow::Result<()> {
    let (listed, listed_at) = read_lists(&args.lists)?;
    let listed_at = args.listed_at.clone().unwrap_or(listed_at);
    let (runtime, client) = connect(&args.remote)?;
    let mut holding = 0;
    let mut leaked: Vec<Holder> = Vec::new();
    for range in ranges(&listed) {
        let report = runtime
            .block_on(client.audit(&range))
            .context("POST /audit")?;
        holding += report.consumers_in_range;
        leaked.extend(report.leaked);
    }
    let mut out = match args.format {
        Format::Json => String::new(),
        Format::Table => report_text(&leaked, holding, listed.len()),
    };
    let mut removed = None;
    if args.delete {
        let removal = Removal {
            // A consumer holding only pending claims has no allocations to remove:
            // its claims expire, or `allot claims release --consumer` ends them.
            consumers: leaked
                .iter()
                .filter_map(|h| {
                    h.consumer_generation.map(|g| ToRemove {
                        consumer_generation: g,
                        consumer_uuid: h.consumer_uuid,
                    })
                })
                .collect(),
            consumer_types: Some(types(&args.types)),
            force: args.force,
            listed_at,
            max_share: Some(args.max_share),
        };
        let answer = runtime
            .block_on(client.audit_delete(&removal))
            .context("POST /audit/delete")?;
        if args.format == Format::Table {
            out.push_str(&removal_text(&answer));
        }
        removed = Some(answer);
    }
    if args.format == Format::Json {
        out = json_text(&serde_json::json!({
            "consumers_holding": holding, "listed": listed.len(), "leaked": leaked,
            "removal": removed,
        }));
    }
    print!("{out}");
    Ok(())
}

/// The uuids of the lists, sorted, each once, and the time the lists were taken.
fn read_lists(lists: &[String]) -> anyhow::Result<(Vec<Uuid>, String)> {
    let now = SystemTime::now();
    let mut taken = now;
    let mut uuids = Vec::new();
    let stdin = ["-".to_owned()];
    let lists = if lists.is_empty() { &stdin[..] } else { lists };
    for name in lists {
        let text = if name == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        } else {
            let modified = std::fs::metadata(name)
                .and_then(|m| m.modified())
                .with_context(|| format!("reading {name}"))?;
            taken = taken.min(modified);
            std::fs::read_to_string(name).with_context(|| format!("reading {name}"))?
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            // A line that is no uuid means a list in another shape (a table, a
            // header): refused, as a wrong list would report live workloads leaked.
            match line.parse::<Uuid>() {
                Ok(uuid) => uuids.push(uuid),
                Err(_) => bail!("{name}:{}: {line:?} is not a uuid", n + 1),
            }
        }
    }
    uuids.sort_unstable();
    uuids.dedup();
    let secs = taken
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Ok((uuids, allot_server::auth::format_utc(secs)))
}

/// The audit's requests: consecutive ranges of at most [`CHUNK`] listed uuids that
/// cover every uuid there is, the first open below, the last above.
fn ranges(listed: &[Uuid]) -> Vec<AuditRange> {
    let chunks: Vec<&[Uuid]> = listed.chunks(CHUNK).collect();
    if chunks.is_empty() {
        return vec![AuditRange::default()];
    }
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| AuditRange {
            from: (i > 0).then(|| chunk[0]),
            to: chunks.get(i + 1).map(|next| next[0]),
            consumers: chunk.to_vec(),
        })
        .collect()
}

/// `--types`: `none` stands for consumers without a type.
fn types(text: &str) -> Vec<Option<String>> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| (t != "none").then(|| t.to_owned()))
        .collect()
}

/// The report: each leaked consumer, grouped by project then provider, and a summary.
fn report_text(leaked: &[Holder], holding: usize, listed: usize) -> String {
    let mut by_place: BTreeMap<(&str, String), Vec<&Holder>> = BTreeMap::new();
    for h in leaked {
        let providers = h
            .resource_providers
            .iter()
            .map(Uuid::to_string)
            .collect::<Vec<_>>()
            .join(",");
        by_place
            .entry((h.project_id.as_str(), providers))
            .or_default()
            .push(h);
    }
    let rows = by_place.iter().flat_map(|((project, providers), holders)| {
        holders.iter().map(move |h| {
            [
                project.to_string(),
                providers.clone(),
                h.consumer_uuid.to_string(),
                h.consumer_type.clone().unwrap_or_else(|| "-".into()),
                amounts(&h.allocations),
                amounts(&h.pending),
            ]
        })
    });
    let mut out = table(
        [
            "project",
            "providers",
            "consumer",
            "type",
            "allocations",
            "pending",
        ],
        rows,
    );
    out.push_str(&format!(
        "\n{holding} consumers hold resources; {listed} live workloads listed; {} not \
         among them{}\n",
        leaked.len(),
        if leaked.is_empty() {
            ""
        } else {
            " (a report: --delete removes them)"
        }
    ));
    out
}

/// What `--delete` did.
fn removal_text(answer: &allot_client::consumers::Removed) -> String {
    let mut out = format!("\nremoved {} consumers\n", answer.removed.len());
    if !answer.left.is_empty() {
        out.push_str(&table(
            ["left consumer", "reason"],
            answer
                .left
                .iter()
                .map(|l| [l.consumer_uuid.to_string(), l.reason.clone()]),
        ));
    }
    out
}

/// The table of `allot consumers`.
fn holders_table(holders: &[Holder]) -> String {
    table(
        [
            "consumer",
            "project",
            "user",
            "type",
            "allocations",
            "pending",
            "providers",
        ],
        holders.iter().map(|h| {
            [
                h.consumer_uuid.to_string(),
                h.project_id.clone(),
                h.user_id.clone(),
                h.consumer_type.clone().unwrap_or_else(|| "-".into()),
                amounts(&h.allocations),
                amounts(&h.pending),
                h.resource_providers.len().to_string(),
            ]
        }),
    )
}

/// `VCPU=2,MEMORY_MB=512`, or `-`.
fn amounts(sums: &BTreeMap<String, u64>) -> String {
    if sums.is_empty() {
        return "-".into();
    }
    sums.iter()
        .map(|(c, n)| format!("{c}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranges cover every uuid, each listed uuid in the range of its chunk.
    #[test]
    fn ranges_cover_every_uuid() {
        assert_eq!(ranges(&[]), [AuditRange::default()]);
        let listed: Vec<Uuid> = (1..=(CHUNK as u128 + 2)).map(Uuid::from_u128).collect();
        let got = ranges(&listed);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].from, got[0].to), (None, Some(listed[CHUNK])));
        assert_eq!((got[1].from, got[1].to), (Some(listed[CHUNK]), None));
        assert_eq!(
            got[0].consumers.len() + got[1].consumers.len(),
            listed.len()
        );
        assert_eq!(types("INSTANCE, none"), [Some("INSTANCE".to_owned()), None]);
    }
}
