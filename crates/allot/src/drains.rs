//! `allot drain ROOT...` and `allot drains list|show|confirm|abandon`: draining hosts
//! through a running allot (issue 44; `docs/api.md`, "Draining a host"). A drain
//! places every consumer of the roots elsewhere, as one plan, holding each target
//! with a pending claim while the moves happen; `confirm` moves them all in one
//! write, `abandon` puts everything back.

use allot_client::drains::{Drain, NewDrain};
use allot_client::ClaimExpiry;
use anyhow::Context;
use clap::{Args, Subcommand};
use uuid::Uuid;

use crate::claims::{connect, json_text, table};
use crate::classes::{Format, Remote};
use crate::server_groups::joined;

/// `allot drain ROOT...`.
#[derive(Args, Debug)]
pub struct DrainArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
    /// The roots to drain (uuids).
    #[arg(required = true)]
    roots: Vec<Uuid>,
    /// Only these consumers (repeat; every consumer there when left out).
    #[arg(long = "consumer")]
    consumers: Vec<Uuid>,
    /// A trait every target root must have (repeat).
    #[arg(long = "required")]
    required: Vec<String>,
    /// Place what fits and name the others (else all or none).
    #[arg(long)]
    partial: bool,
    /// `pack`, `spread` or `random`.
    #[arg(long)]
    sort: Option<String>,
    /// Preferred traits, comma-separated.
    #[arg(long)]
    prefer: Option<String>,
    /// Seconds until the claims expire (never when left out).
    #[arg(long)]
    expires_in: Option<u64>,
    /// Set COMPUTE_STATUS_DISABLED on the roots while the drain is open (disable
    /// the compute services in Nova too: nova-compute resets the trait).
    #[arg(long)]
    disable: bool,
}

/// `allot drains ...`.
#[derive(Args, Debug)]
pub struct DrainsArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table, global = true)]
    format: Format,
    #[command(subcommand)]
    command: Option<DrainsCommand>,
}

#[derive(Subcommand, Debug)]
enum DrainsCommand {
    /// List the drains (the default).
    List,
    /// Show a drain and its claims as they are now.
    Show {
        /// The drain.
        uuid: Uuid,
    },
    /// Confirm every claim still pending in one write: the consumers move, the
    /// roots open again.
    Confirm {
        /// The drain.
        uuid: Uuid,
    },
    /// Abandon a drain: its pending claims released, its roots open again.
    Abandon {
        /// The drain.
        uuid: Uuid,
    },
}

/// Runs `allot drain` to completion.
pub fn run_drain(args: DrainArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let new = NewDrain {
        roots: args.roots,
        consumers: (!args.consumers.is_empty()).then_some(args.consumers),
        required: args.required,
        partial: args.partial.then_some(true),
        sort: args.sort,
        prefer: args.prefer,
        expires_in: args
            .expires_in
            .map_or(ClaimExpiry::ServerDefault, ClaimExpiry::After),
        disable: args.disable.then_some(true),
        ..NewDrain::default()
    };
    let drain = runtime
        .block_on(client.create_drain(&new))
        .context("POST /drains")?;
    print!("{}", render(&drain, args.format));
    Ok(())
}

/// Runs an `allot drains` command to completion.
pub fn run_drains(args: DrainsArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let out = runtime.block_on(async {
        Ok::<_, anyhow::Error>(match args.command.unwrap_or(DrainsCommand::List) {
            DrainsCommand::List => {
                let drains = client.drains().await.context("GET /drains")?;
                match args.format {
                    Format::Json => json_text(&serde_json::json!({ "drains": drains })),
                    Format::Table => table(
                        ["uuid", "state", "roots", "claims", "created_at"],
                        drains.iter().map(|d| {
                            [
                                d.uuid.to_string(),
                                d.state.clone(),
                                joined(&d.roots),
                                d.claims.len().to_string(),
                                d.created_at.clone(),
                            ]
                        }),
                    ),
                }
            }
            DrainsCommand::Show { uuid } => render(
                &client.drain(&uuid).await.context("GET /drains")?,
                args.format,
            ),
            DrainsCommand::Confirm { uuid } => {
                let drain = client.confirm_drain(&uuid).await.context("confirm")?;
                render(&drain, args.format)
            }
            DrainsCommand::Abandon { uuid } => {
                client
                    .abandon_drain(&uuid)
                    .await
                    .context("DELETE /drains")?;
                match args.format {
                    Format::Json => String::new(),
                    Format::Table => format!("abandoned drain {uuid}\n"),
                }
            }
        })
    })?;
    print!("{out}");
    Ok(())
}

/// A drain as printed: its fields, then each consumer's target and claim state,
/// then the consumers left with why.
fn render(drain: &Drain, format: Format) -> String {
    if format == Format::Json {
        return json_text(drain);
    }
    let mut out = table(
        ["field", "value"],
        [
            ["uuid".into(), drain.uuid.to_string()],
            ["state".into(), drain.state.clone()],
            ["roots".into(), joined(&drain.roots)],
            ["disabled".into(), joined(&drain.disabled)],
            ["created_at".into(), drain.created_at.clone()],
            [
                "ended_at".into(),
                drain.ended_at.clone().unwrap_or_else(|| "-".into()),
            ],
        ],
    );
    out.push('\n');
    out.push_str(&table(
        ["consumer", "claim", "state", "target"],
        drain.claims.iter().map(|c| {
            [
                c.consumer_uuid.to_string(),
                c.uuid.to_string(),
                c.state.as_str().to_owned(),
                joined(&c.allocations.keys().collect::<Vec<_>>()),
            ]
        }),
    ));
    if !drain.unplaced.is_empty() {
        out.push('\n');
        out.push_str(&table(
            ["unplaced consumer", "reason"],
            drain
                .unplaced
                .iter()
                .map(|u| [u.consumer_uuid.to_string(), u.reason.clone()]),
        ));
    }
    out
}
