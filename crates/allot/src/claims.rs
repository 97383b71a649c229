//! `allot claims` and `allot pending`: a running allot's pending claims (an allot
//! extension, issue 10; `docs/api.md`, "Pending claims") for operators and scripts.
//!
//! - `allot claims list` (the default) with the API's filters, every page unless
//!   `--limit` asks for one; `show`, `create`, `confirm [--replace]`, and `release`
//!   of one claim or of all of a consumer's (`--consumer`).
//! - `allot pending PROVIDER [--consumers]`: what live claims hold on a provider (a
//!   uuid or a name); `allot pending --consumer U | --project P`: a consumer's or a
//!   project's totals.
//!
//! Like `allot classes` it talks HTTP through `allot-client` only, with `--url` and
//! `--token` (`ALLOT_URL`, `ALLOT_TOKEN`); it prints aligned tables for people, and
//! with `-f json` the JSON the API answered (a listing of several pages as one
//! `{"claims": [...]}`). A refusal is a failing exit with the server's code and
//! detail on stderr.

use std::collections::BTreeMap;

use allot_client::{
    Claim, ClaimExpiry, ClaimFilter, ClaimResources, ClaimState, Client, Config, NewClaim,
    PickClaim, ProviderPending,
};
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use serde_json::json;
use uuid::Uuid;

use crate::classes::{Format, Remote};

/// `allot claims ...`.
#[derive(Args, Debug)]
pub struct ClaimsArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table, global = true)]
    format: Format,
    #[command(subcommand)]
    command: Option<ClaimsCommand>,
}

#[derive(Subcommand, Debug)]
enum ClaimsCommand {
    /// List claims, oldest first (the default: every claim).
    List(ListArgs),
    /// Show one claim, whatever its state.
    Show {
        /// The claim's uuid.
        uuid: Uuid,
    },
    /// Make a pending claim: all of it fits, or nothing is taken.
    Create(CreateArgs),
    /// Let the server choose: pending claims where a candidate query fits, one per
    /// instance, in one step (no race, no retry).
    Pick(PickArgs),
    /// Turn a pending claim into allocations of its consumer.
    Confirm {
        /// The claim's uuid.
        uuid: Uuid,
        /// Replace what the consumer holds instead of adding to it (a move or a
        /// resize).
        #[arg(long)]
        replace: bool,
    },
    /// Release a pending claim, or every pending claim of a consumer (harmless on
    /// claims that already ended).
    Release {
        /// The claim's uuid.
        #[arg(required_unless_present = "consumer", conflicts_with = "consumer")]
        uuid: Option<Uuid>,
        /// Release every pending claim of this consumer instead.
        #[arg(long)]
        consumer: Option<Uuid>,
    },
}

/// The filters of `allot claims list`.
#[derive(Args, Debug, Default)]
struct ListArgs {
    /// Claims of this consumer.
    #[arg(long)]
    consumer: Option<Uuid>,
    /// Claims with an amount on this provider (a uuid or a name).
    #[arg(long)]
    provider: Option<String>,
    /// Claims of this project.
    #[arg(long)]
    project: Option<String>,
    /// Claims whose consumer has this type.
    #[arg(long = "type")]
    consumer_type: Option<String>,
    /// Claims with this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Claims in this state: pending, confirmed, released or expired.
    #[arg(long)]
    state: Option<ClaimState>,
    /// Claims with an amount of this resource class.
    #[arg(long)]
    class: Option<String>,
    /// At most this many (one page; without it every page is fetched).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
}

/// Whose a new claim is, and how long it lasts: the options `allot claims create`
/// and `allot claims pick` share.
#[derive(Args, Debug)]
struct Owner {
    /// The consumer's project.
    #[arg(long)]
    project: String,
    /// The consumer's user.
    #[arg(long)]
    user: String,
    /// The consumer's type (e.g. INSTANCE, MIGRATION).
    #[arg(long = "type")]
    consumer_type: Option<String>,
    /// Free text for the caller.
    #[arg(long)]
    tag: Option<String>,
    /// Seconds until the claim expires, or `never` (the server's default when left
    /// out).
    #[arg(long, value_parser = parse_expiry)]
    expires_in: Option<ClaimExpiry>,
    /// The server group the consumer (every instance's) joins with its claim.
    #[arg(long)]
    server_group: Option<Uuid>,
}

/// The options of `allot claims create`.
#[derive(Args, Debug)]
struct CreateArgs {
    /// The consumer (a fresh uuid when left out; the claim shows it).
    #[arg(long)]
    consumer: Option<Uuid>,
    #[command(flatten)]
    owner: Owner,
    /// `PROVIDER:CLASS=N`, PROVIDER a uuid or a name; repeat for more classes or
    /// providers.
    #[arg(long = "resource", required = true, value_parser = parse_resource)]
    resources: Vec<ResourceArg>,
}

/// The options of `allot claims pick`.
#[derive(Args, Debug)]
struct PickArgs {
    /// The query string of GET /allocation_candidates, e.g.
    /// 'resources=VCPU:2,MEMORY_MB:4096&required=HW_CPU_X86_AVX2'.
    #[arg(long)]
    request: String,
    /// How many instances (a fresh consumer each) when no --consumer is given.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    count: u64,
    /// An instance's consumer (repeat for several).
    #[arg(long = "consumer")]
    consumers: Vec<Uuid>,
    /// The order candidates are taken in: pack, spread or random.
    #[arg(long)]
    sort: Option<String>,
    /// Traits that rank a candidate first, comma-separated.
    #[arg(long)]
    prefer: Option<String>,
    /// The instances' affinity rule: none, different_roots or same_root.
    #[arg(long)]
    affinity: Option<String>,
    /// Place as many instances as fit rather than all or none.
    #[arg(long)]
    partial: bool,
    #[command(flatten)]
    owner: Owner,
}

impl PickArgs {
    /// The body: one consumer's claim, or a mass start when there are several
    /// instances or a rule for them.
    fn body(self) -> PickClaim {
        let mut consumers = self.consumers;
        if consumers.is_empty() {
            consumers = (0..self.count).map(|_| Uuid::new_v4()).collect();
        }
        let single = consumers.len() == 1 && self.affinity.is_none() && !self.partial;
        PickClaim {
            consumer_uuid: single.then(|| consumers[0]),
            consumers: (!single).then(|| consumers.into_iter().map(|c| (c, None)).collect()),
            consumer_type: self.owner.consumer_type,
            project_id: self.owner.project,
            user_id: self.owner.user,
            request: self.request,
            sort: self.sort,
            prefer: self.prefer,
            affinity: self.affinity,
            partial: self.partial.then_some(true),
            expires_in: self.owner.expires_in.unwrap_or_default(),
            tag: self.owner.tag,
            server_group: self.owner.server_group,
        }
    }
}

/// One `--resource`: an amount of a class on a provider not yet resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourceArg {
    provider: String,
    class: String,
    amount: u64,
}

/// `allot pending ...`.
#[derive(Args, Debug)]
pub struct PendingArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
    /// The provider (a uuid or a name).
    #[arg(required_unless_present_any = ["consumer", "project", "by_root"], conflicts_with_all = ["consumer", "project", "by_root"])]
    provider: Option<String>,
    /// With the provider: the totals per consumer too.
    #[arg(long, conflicts_with_all = ["consumer", "project"])]
    consumers: bool,
    /// With the provider: what the providers below it hold pending too (a host
    /// with its NUMA nodes and devices).
    #[arg(long, conflicts_with_all = ["consumer", "project"])]
    tree: bool,
    /// Instead of a provider: this consumer's totals.
    #[arg(long)]
    consumer: Option<Uuid>,
    /// Instead of a provider: this project's totals (with `--consumer`: both must
    /// match).
    #[arg(long)]
    project: Option<String>,
    /// With `--consumer` or `--project`: this resource class's total alone.
    #[arg(long, conflicts_with = "provider")]
    class: Option<String>,
    /// Every root's totals, its tree summed (of `--consumer` or `--project` when
    /// given).
    #[arg(long)]
    by_root: bool,
}

fn parse_expiry(text: &str) -> Result<ClaimExpiry, String> {
    if text == "never" {
        return Ok(ClaimExpiry::Never);
    }
    text.parse()
        .map(ClaimExpiry::After)
        .map_err(|_| format!("{text:?} is neither a number of seconds nor `never`"))
}

fn parse_resource(text: &str) -> Result<ResourceArg, String> {
    // A class name has no `:`, a provider's name may: split at the last one.
    let bad = || format!("{text:?} is not PROVIDER:CLASS=N");
    let (provider, rest) = text.rsplit_once(':').ok_or_else(bad)?;
    let (class, amount) = rest.split_once('=').ok_or_else(bad)?;
    if provider.is_empty() || class.is_empty() {
        return Err(bad());
    }
    let amount = amount
        .parse()
        .map_err(|_| format!("{text:?}: {amount:?} is not a whole number"))?;
    Ok(ResourceArg {
        provider: provider.to_owned(),
        class: class.to_owned(),
        amount,
    })
}

/// A runtime and a client for the server `remote` names (every remote command's).
pub(crate) fn connect(remote: &Remote) -> anyhow::Result<(tokio::runtime::Runtime, Client)> {
    connect_at(remote, &Config::new("").microversion)
}

/// [`connect`], the client speaking at `microversion`.
pub(crate) fn connect_at(
    remote: &Remote,
    microversion: &str,
) -> anyhow::Result<(tokio::runtime::Runtime, Client)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let config = Config {
        token: remote.token.clone(),
        microversion: microversion.to_owned(),
        ..Config::new(remote.url.trim_end_matches('/'))
    };
    Ok((runtime, Client::new(&config)?))
}

/// A provider given as a uuid or a name, as its uuid.
async fn resolve_provider(client: &Client, provider: &str) -> anyhow::Result<Uuid> {
    if let Ok(uuid) = provider.parse() {
        return Ok(uuid);
    }
    client
        .provider_named(provider)
        .await?
        .ok_or_else(|| anyhow!("no resource provider is named {provider:?}"))
}

/// Runs a claims command to completion.
pub fn run(args: ClaimsArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let format = args.format;
    let text = runtime.block_on(async {
        let command = args
            .command
            .unwrap_or(ClaimsCommand::List(ListArgs::default()));
        Ok::<_, anyhow::Error>(match command {
            ClaimsCommand::List(list) => {
                let provider = match &list.provider {
                    Some(p) => Some(resolve_provider(&client, p).await?),
                    None => None,
                };
                let filter = ClaimFilter {
                    consumer_uuid: list.consumer,
                    resource_provider_uuid: provider,
                    project_id: list.project,
                    consumer_type: list.consumer_type,
                    tag: list.tag,
                    state: list.state,
                    resource_class: list.class,
                    limit: list.limit,
                    marker: None,
                };
                let claims = if filter.limit.is_some() {
                    client.claims(&filter).await?
                } else {
                    client.all_claims(&filter).await?
                };
                render_claims(&claims, format)
            }
            ClaimsCommand::Show { uuid } => render_claim(&client.claim(uuid).await?, format),
            ClaimsCommand::Create(create) => {
                let claim = new_claim(&client, create).await?;
                render_claim(&client.create_claim(&claim).await?, format)
            }
            ClaimsCommand::Pick(pick) => {
                let placed = client.pick_claims(&pick.body()).await?;
                match format {
                    Format::Json => json_text(&json!(placed)),
                    Format::Table => {
                        let mut text = render_claims(&placed.claims, format);
                        for consumer in &placed.unplaced {
                            text.push_str(&format!("unplaced: {consumer}\n"));
                        }
                        text
                    }
                }
            }
            ClaimsCommand::Confirm { uuid, replace } => {
                render_claim(&client.confirm_claim(uuid, replace).await?, format)
            }
            ClaimsCommand::Release { uuid, consumer } => match (uuid, consumer) {
                (Some(uuid), None) => {
                    client.release_claim(uuid).await?;
                    released(format, &format!("claim {uuid}"))
                }
                (None, Some(consumer)) => {
                    client.release_consumer_claims(consumer).await?;
                    released(
                        format,
                        &format!("the pending claims of consumer {consumer}"),
                    )
                }
                // clap lets exactly one through.
                _ => bail!("give a claim's uuid or --consumer, not both"),
            },
        })
    })?;
    print!("{text}");
    Ok(())
}

/// The `POST /claims` body `create` describes, its providers resolved.
async fn new_claim(client: &Client, create: CreateArgs) -> anyhow::Result<NewClaim> {
    let mut allocations: BTreeMap<Uuid, ClaimResources> = BTreeMap::new();
    for resource in &create.resources {
        let provider = resolve_provider(client, &resource.provider).await?;
        let amounts = &mut allocations.entry(provider).or_default().resources;
        if amounts
            .insert(resource.class.clone(), resource.amount)
            .is_some()
        {
            bail!(
                "--resource gives {} on {} twice",
                resource.class,
                resource.provider
            );
        }
    }
    Ok(NewClaim {
        consumer_uuid: create.consumer.unwrap_or_else(Uuid::new_v4),
        consumer_type: create.owner.consumer_type,
        project_id: create.owner.project,
        user_id: create.owner.user,
        allocations,
        expires_in: create.owner.expires_in.unwrap_or_default(),
        tag: create.owner.tag,
        server_group: create.owner.server_group,
    })
}

/// `allot headroom`.
#[derive(Args, Debug)]
pub struct HeadroomArgs {
    #[command(flatten)]
    remote: Remote,
    /// The shape, as GET /allocation_candidates's query string, e.g.
    /// 'resources=VCPU:2,MEMORY_MB:4096&required=HW_CPU_X86_AVX2'.
    request: String,
    /// A breakdown: root, aggregate or trait:PREFIX (e.g. trait:CUSTOM_RACK_).
    #[arg(long)]
    group_by: Option<String>,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Runs `allot headroom` to completion.
pub fn run_headroom(args: HeadroomArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let mut query = args.request.trim_start_matches('?').to_owned();
    if let Some(by) = &args.group_by {
        let by: String = form_urlencoded::byte_serialize(by.as_bytes()).collect();
        query = format!("{query}&group_by={by}");
    }
    let headroom = runtime.block_on(client.headroom(&query))?;
    let text = match args.format {
        Format::Json => json_text(&headroom),
        Format::Table => {
            let mut text = format!("headroom: {}\n", headroom.headroom);
            if let Some(groups) = &headroom.groups {
                text.push('\n');
                text.push_str(&table(
                    ["GROUP", "HEADROOM"],
                    groups.iter().map(|(k, n)| [k.clone(), n.to_string()]),
                ));
            }
            text
        }
    };
    print!("{text}");
    Ok(())
}

/// `allot explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    remote: Remote,
    /// The query, as GET /allocation_candidates's query string.
    request: String,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Runs `allot explain` to completion.
pub fn run_explain(args: ExplainArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let e = runtime.block_on(client.explain(&args.request))?;
    let text = match args.format {
        Format::Json => json_text(&e),
        Format::Table => {
            let mut text = format!(
                "allocation candidates: {}\nroots: {} ({} pass root_required)\n",
                e.allocation_candidates, e.roots, e.roots_allowed
            );
            if let Some(stage) = &e.emptied_by {
                text.push_str(&format!("emptied by: {stage}\n"));
            }
            for g in &e.groups {
                text.push_str(&format!("\ngroup '{}'\n", g.suffix));
                text.push_str(&table(
                    ["STAGE", "PROVIDERS"],
                    g.stages
                        .iter()
                        .map(|s| [s.stage.clone(), s.providers.to_string()]),
                ));
                if !g.nearest.is_empty() {
                    text.push_str(&table(
                        ["NEAREST MISS", "CLASS", "SHORT BY"],
                        g.nearest.iter().map(|m| {
                            [
                                m.resource_provider.to_string(),
                                m.resource_class.clone(),
                                m.short_by.to_string(),
                            ]
                        }),
                    ));
                }
            }
            text
        }
    };
    print!("{text}");
    Ok(())
}

/// Runs a pending command to completion.
pub fn run_pending(args: PendingArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let text = runtime.block_on(async {
        Ok::<_, anyhow::Error>(match &args.provider {
            Some(provider) => {
                let uuid = resolve_provider(&client, provider)
                    .await
                    .with_context(|| format!("finding provider {provider:?}"))?;
                render_pending(
                    &client
                        .provider_pending(uuid, args.consumers, args.tree)
                        .await?,
                    args.format,
                )
            }
            None if args.by_root => {
                let by_root = client
                    .pending_by_root(
                        args.consumer,
                        args.project.as_deref(),
                        args.class.as_deref(),
                    )
                    .await?;
                match args.format {
                    Format::Json => json_text(&by_root),
                    Format::Table => table(
                        ["root", "class", "pending"],
                        by_root.roots.iter().flat_map(|(root, sums)| {
                            sums.iter().map(move |(class, n)| {
                                [root.to_string(), class.clone(), n.to_string()]
                            })
                        }),
                    ),
                }
            }
            None => {
                let pending = client
                    .pending_totals(
                        args.consumer,
                        args.project.as_deref(),
                        args.class.as_deref(),
                    )
                    .await?;
                render_pending(
                    &ProviderPending {
                        pending,
                        consumers: None,
                    },
                    args.format,
                )
            }
        })
    })?;
    print!("{text}");
    Ok(())
}

/// What a release prints: a line for people; nothing in JSON, as the API answers 204
/// with no body.
fn released(format: Format, what: &str) -> String {
    match format {
        Format::Table => format!("released {what}\n"),
        Format::Json => String::new(),
    }
}

/// `value` as pretty JSON with a final newline.
pub(crate) fn json_text(value: &impl serde::Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("answers serialise");
    text.push('\n');
    text
}

/// Rows aligned under a header, two spaces between columns; the last column is not
/// padded (no trailing blanks).
pub(crate) fn table<const N: usize>(
    header: [&str; N],
    rows: impl IntoIterator<Item = [String; N]>,
) -> String {
    let mut lines = vec![header.map(str::to_owned)];
    lines.extend(rows);
    let mut widths = [0; N];
    for line in &lines {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &lines {
        for (i, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < N {
                out.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        out.push('\n');
    }
    out
}

fn or_dash(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "-".into())
}

/// A claim's amounts summed per class over its providers, `CLASS=N, ...`, with the
/// number of providers when there are several.
fn resources_summary(claim: &Claim) -> String {
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for amounts in claim.allocations.values() {
        for (class, amount) in &amounts.resources {
            *totals.entry(class).or_default() += amount;
        }
    }
    let mut text = totals
        .iter()
        .map(|(class, amount)| format!("{class}={amount}"))
        .collect::<Vec<_>>()
        .join(", ");
    if claim.allocations.len() > 1 {
        text.push_str(&format!(" on {} providers", claim.allocations.len()));
    }
    text
}

/// A list of claims: a table, or the API's `{"claims": [...]}`.
fn render_claims(claims: &[Claim], format: Format) -> String {
    match format {
        Format::Json => json_text(&json!({ "claims": claims })),
        Format::Table => table(
            [
                "UUID",
                "CONSUMER",
                "STATE",
                "PROJECT",
                "TYPE",
                "TAG",
                "EXPIRES AT",
                "RESOURCES",
            ],
            claims.iter().map(|c| {
                [
                    c.uuid.to_string(),
                    c.consumer_uuid.to_string(),
                    c.state.to_string(),
                    c.project_id.clone(),
                    or_dash(&c.consumer_type),
                    or_dash(&c.tag),
                    c.expires_at.clone().unwrap_or_else(|| "never".into()),
                    resources_summary(c),
                ]
            }),
        ),
    }
}

/// One claim: its fields one per line, then its amounts per provider and class; or
/// the API's claim object.
fn render_claim(claim: &Claim, format: Format) -> String {
    match format {
        Format::Json => json_text(claim),
        Format::Table => {
            let fields = [
                ("uuid", claim.uuid.to_string()),
                ("consumer", claim.consumer_uuid.to_string()),
                ("consumer type", or_dash(&claim.consumer_type)),
                ("project", claim.project_id.clone()),
                ("user", claim.user_id.clone()),
                ("tag", or_dash(&claim.tag)),
                ("state", claim.state.to_string()),
                ("created at", claim.created_at.clone()),
                (
                    "expires at",
                    claim.expires_at.clone().unwrap_or_else(|| "never".into()),
                ),
                ("ended at", or_dash(&claim.ended_at)),
            ];
            let mut out = String::new();
            for (name, value) in fields {
                out.push_str(&format!("{:<15}{value}\n", format!("{name}:")));
            }
            out.push('\n');
            out.push_str(&table(
                ["PROVIDER", "CLASS", "AMOUNT"],
                claim.allocations.iter().flat_map(|(provider, amounts)| {
                    amounts.resources.iter().map(move |(class, amount)| {
                        [provider.to_string(), class.clone(), amount.to_string()]
                    })
                }),
            ));
            out
        }
    }
}

/// Pending totals: per class, then per consumer and class when the answer has them;
/// or the API's object.
fn render_pending(pending: &ProviderPending, format: Format) -> String {
    match format {
        Format::Json => json_text(pending),
        Format::Table => {
            let mut out = table(
                ["CLASS", "PENDING"],
                pending
                    .pending
                    .iter()
                    .map(|(class, n)| [class.clone(), n.to_string()]),
            );
            if let Some(consumers) = &pending.consumers {
                out.push('\n');
                out.push_str(&table(
                    ["CONSUMER", "CLASS", "PENDING"],
                    consumers.iter().flat_map(|(consumer, amounts)| {
                        amounts.iter().map(move |(class, n)| {
                            [consumer.to_string(), class.clone(), n.to_string()]
                        })
                    }),
                ));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn claim(uuid: u128, providers: &[(u128, &[(&str, u64)])]) -> Claim {
        Claim {
            uuid: Uuid::from_u128(uuid),
            consumer_uuid: Uuid::from_u128(0xc0),
            consumer_type: Some("INSTANCE".into()),
            project_id: "proj".into(),
            user_id: "user".into(),
            allocations: providers
                .iter()
                .map(|(rp, amounts)| {
                    (
                        Uuid::from_u128(*rp),
                        ClaimResources {
                            resources: amounts.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
                        },
                    )
                })
                .collect(),
            tag: None,
            state: ClaimState::Pending,
            created_at: "2024-05-01T10:00:00Z".into(),
            expires_at: Some("2024-05-01T10:05:00Z".into()),
            ended_at: None,
            extra: Default::default(),
        }
    }

    fn claims() -> Vec<Claim> {
        let mut second = claim(2, &[(0xa, &[("VCPU", 2)]), (0xb, &[("VCPU", 1)])]);
        second.state = ClaimState::Released;
        second.consumer_type = None;
        second.tag = Some("evacuate cn1".into());
        second.expires_at = None;
        second.ended_at = Some("2024-05-01T10:01:00Z".into());
        vec![
            claim(1, &[(0xa, &[("VCPU", 4), ("MEMORY_MB", 2048)])]),
            second,
        ]
    }

    #[test]
    fn the_list_table_aligns_and_sums_resources() {
        let u = |n: u128| Uuid::from_u128(n).to_string();
        let expected = format!(
            "UUID{s32}  CONSUMER{s28}  STATE     PROJECT  TYPE      TAG           EXPIRES AT            RESOURCES\n\
             {}  {}  pending   proj     INSTANCE  -             2024-05-01T10:05:00Z  MEMORY_MB=2048, VCPU=4\n\
             {}  {}  released  proj     -         evacuate cn1  never                 VCPU=3 on 2 providers\n",
            u(1),
            u(0xc0),
            u(2),
            u(0xc0),
            s32 = " ".repeat(32),
            s28 = " ".repeat(28),
        );
        assert_eq!(render_claims(&claims(), Format::Table), expected);
        // No claims: the header alone.
        assert!(render_claims(&[], Format::Table).starts_with("UUID  CONSUMER  STATE"));
    }

    #[test]
    fn the_list_json_is_the_apis() {
        let value: serde_json::Value =
            serde_json::from_str(&render_claims(&claims(), Format::Json)).unwrap();
        let list = value["claims"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["state"], "pending");
        assert_eq!(list[1]["expires_at"], serde_json::Value::Null);
        assert_eq!(
            list[0]["allocations"][Uuid::from_u128(0xa).to_string()]["resources"]["MEMORY_MB"],
            2048
        );
        // What the server sent round-trips, unknown fields included.
        let mut claim = claims().remove(0);
        claim.extra.insert("note".into(), json!(1));
        let back: Claim = serde_json::from_str(&render_claim(&claim, Format::Json)).unwrap();
        assert_eq!(back, claim);
    }

    #[test]
    fn one_claim_shows_fields_then_amounts() {
        let text = render_claim(&claims()[1], Format::Table);
        let a = Uuid::from_u128(0xa);
        let b = Uuid::from_u128(0xb);
        assert!(text.contains("\nconsumer type: -\n"), "{text}");
        assert!(text.contains("\ntag:           evacuate cn1\n"), "{text}");
        assert!(text.contains("\nexpires at:    never\n"), "{text}");
        assert!(
            text.contains("\nended at:      2024-05-01T10:01:00Z\n"),
            "{text}"
        );
        assert!(
            text.ends_with(&format!(
                "\nPROVIDER{s30}  CLASS  AMOUNT\n{a}  VCPU   2\n{b}  VCPU   1\n",
                s30 = " ".repeat(28)
            )),
            "{text}"
        );
    }

    #[test]
    fn pending_tables_and_json() {
        let consumer = Uuid::from_u128(0xc0);
        let pending = ProviderPending {
            pending: BTreeMap::from([("MEMORY_MB".into(), 512), ("VCPU".into(), 2)]),
            consumers: Some(BTreeMap::from([(
                consumer,
                BTreeMap::from([("MEMORY_MB".into(), 512), ("VCPU".into(), 2)]),
            )])),
        };
        assert_eq!(
            render_pending(&pending, Format::Table),
            format!(
                "CLASS      PENDING\nMEMORY_MB  512\nVCPU       2\n\n\
                 CONSUMER{s28}  CLASS      PENDING\n\
                 {consumer}  MEMORY_MB  512\n{consumer}  VCPU       2\n",
                s28 = " ".repeat(28)
            )
        );
        let value: serde_json::Value =
            serde_json::from_str(&render_pending(&pending, Format::Json)).unwrap();
        assert_eq!(value["pending"]["VCPU"], 2);
        assert_eq!(value["consumers"][consumer.to_string()]["MEMORY_MB"], 512);
        // Totals without the detail have no `consumers` key, as the API's.
        let totals = ProviderPending::default();
        assert_eq!(
            render_pending(&totals, Format::Json),
            "{\n  \"pending\": {}\n}\n"
        );
        assert_eq!(render_pending(&totals, Format::Table), "CLASS  PENDING\n");
        assert_eq!(released(Format::Json, "claim x"), "");
        assert_eq!(released(Format::Table, "claim x"), "released claim x\n");
    }

    #[test]
    fn resource_and_expiry_arguments_parse() {
        assert_eq!(
            parse_resource("rack:1:CUSTOM_X=3"),
            Ok(ResourceArg {
                provider: "rack:1".into(),
                class: "CUSTOM_X".into(),
                amount: 3
            })
        );
        assert!(parse_resource("cn1:VCPU").is_err());
        assert!(parse_resource("VCPU=2").is_err());
        assert!(parse_resource(":VCPU=2").is_err());
        assert!(parse_resource("cn1:VCPU=-1").is_err());
        assert_eq!(parse_expiry("never"), Ok(ClaimExpiry::Never));
        assert_eq!(parse_expiry("60"), Ok(ClaimExpiry::After(60)));
        assert!(parse_expiry("soon").is_err());
    }

    /// The subcommands as `main` declares them, for parsing tests.
    #[derive(Parser, Debug)]
    enum Cli {
        Claims(Box<ClaimsArgs>),
        Pending(PendingArgs),
    }

    #[test]
    fn the_command_line_checks_its_shape() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("allot").chain(args.iter().copied()))
        };
        let rp = Uuid::from_u128(1).to_string();
        assert!(parse(&["claims"]).is_ok());
        assert!(parse(&["claims", "list", "--state", "expired", "-f", "json"]).is_ok());
        assert!(parse(&["claims", "list", "--state", "gone"]).is_err());
        assert!(parse(&["claims", "list", "--limit", "0"]).is_err());
        assert!(parse(&["claims", "show", "not-a-uuid"]).is_err());
        // release: a uuid or --consumer, exactly one.
        assert!(parse(&["claims", "release"]).is_err());
        assert!(parse(&["claims", "release", &rp, "--consumer", &rp]).is_err());
        assert!(parse(&["claims", "release", "--consumer", &rp]).is_ok());
        // create needs a project, a user and at least one resource.
        assert!(parse(&["claims", "create", "--project", "p", "--user", "u"]).is_err());
        let resource = format!("{rp}:VCPU=1");
        assert!(parse(&[
            "claims",
            "create",
            "--project",
            "p",
            "--user",
            "u",
            "--resource",
            &resource,
            "--expires-in",
            "never"
        ])
        .is_ok());
        // pending: a provider, or a consumer or project, not both.
        assert!(parse(&["pending"]).is_err());
        assert!(parse(&["pending", "cn1", "--consumers"]).is_ok());
        assert!(parse(&["pending", "cn1", "--project", "p"]).is_err());
        assert!(parse(&["pending", "--project", "p", "--consumers"]).is_err());
        assert!(parse(&["pending", "--project", "p", "-f", "json"]).is_ok());
    }
}
