//! `allot shapes`: a running allot's named shapes (an allot extension, issue 47;
//! `docs/api.md`, "Named shapes") for operators and scripts.
//!
//! - `list` (the default), `show NAME`, `set NAME QUERY` and `delete NAME`: the
//!   routes of `/shapes`, one request each.
//! - `headroom [NAME...] [--with QUERY]`: how many more of each shape fit (every
//!   shape's when none is named), one line each, `QUERY` added to each shape's
//!   request as `GET /headroom?shape=NAME&QUERY` adds it.
//! - `import FILE` (`-` for stdin): Nova's flavors, as `openstack flavor list --long
//!   -f json` prints them, each mapped by [`crate::flavors::map`] and written as the
//!   shape of the flavor's name: created, replaced, or left alone when its request is
//!   already the one written (so that a rerun changes nothing, `updated_at` included).
//!   Every extra spec the mapping does not read is named. A flavor that cannot be a
//!   shape (Nova would refuse it, its name is no shape's, the server refuses it) is
//!   named with why and skipped, and the command fails at the end, after the others:
//!   a script notices. `--dry-run` says what it would write and writes nothing;
//!   `--prune` deletes the shapes no flavor of the file is named after.
//!
//! Like the other remote commands it talks HTTP through `allot-client` only, with
//! `--url` and `--token` (`ALLOT_URL`, `ALLOT_TOKEN`); tables for people, and with
//! `-f json` the JSON the API answered (or, for `headroom` and `import`, one document
//! for the whole run).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use allot_client::shapes::Shape;
use allot_client::Client;
use allot_server::request::shapes::name_in_path;
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::json;

use crate::claims::{connect, json_text, table};
use crate::classes::{Format, Remote};
use crate::flavors::{self, Mapped};

/// `allot shapes ...`.
#[derive(Args, Debug)]
pub struct ShapesArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table, global = true)]
    format: Format,
    #[command(subcommand)]
    command: Option<ShapesCommand>,
}

#[derive(Subcommand, Debug)]
enum ShapesCommand {
    /// List every shape with its request, by name (the default).
    List,
    /// Show a shape: its request, when it was made and last written.
    Show {
        /// The shape's name.
        name: String,
    },
    /// Make a shape, or replace its request.
    Set {
        /// The shape's name (1 to 255 characters, no control character, no '/').
        name: String,
        /// The query string of GET /allocation_candidates for one instance, e.g.
        /// 'resources=VCPU:2,MEMORY_MB:4096&required=HW_CPU_X86_AVX2'.
        request: String,
    },
    /// Delete a shape.
    Delete {
        /// The shape's name.
        name: String,
    },
    /// How many more of each shape fit now, one line each (GET /headroom?shape=NAME).
    Headroom {
        /// The shapes (every shape when none is named).
        names: Vec<String>,
        /// Query parameters added to each shape's request, e.g.
        /// 'member_of=AGGREGATE' or 'required=CUSTOM_GOLD'.
        #[arg(long = "with")]
        with: Option<String>,
    },
    /// Write Nova's flavors as shapes, from what `openstack flavor list --all --long
    /// -f json` prints.
    ///
    /// Each flavor becomes the shape of its name, with the request Nova's scheduler
    /// would send Placement for it; the extra specs that request does not carry are
    /// named. A flavor that cannot be a shape is named with why and skipped, and the
    /// command fails after writing the others.
    Import(ImportArgs),
}

/// The options of `allot shapes import`.
#[derive(Args, Debug)]
struct ImportArgs {
    /// The file (`-`: standard input).
    file: String,
    /// Say what would be written, and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also delete every shape that no flavor of the file is named after (shapes
    /// set by hand too).
    #[arg(long)]
    prune: bool,
}

/// Runs a shapes command to completion.
pub fn run(args: ShapesArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let format = args.format;
    runtime.block_on(async {
        match args.command.unwrap_or(ShapesCommand::List) {
            ShapesCommand::List => {
                let shapes = client.shapes().await.context("GET /shapes")?;
                print!("{}", render_list(&shapes, format));
            }
            ShapesCommand::Show { name } => {
                let shape = client.shape(&name).await?;
                print!("{}", render_shape(&shape, format));
            }
            ShapesCommand::Set { name, request } => {
                let (shape, new) = client.put_shape(&name, &request).await?;
                print!("{}", render_set(&shape, new, format));
            }
            ShapesCommand::Delete { name } => {
                client.delete_shape(&name).await?;
                if format == Format::Table {
                    // The API answers 204, no body: JSON prints nothing.
                    println!("deleted shape {name:?}");
                }
            }
            ShapesCommand::Headroom { names, with } => {
                headroom(&client, names, with.as_deref().unwrap_or(""), format).await?;
            }
            ShapesCommand::Import(import_args) => import(&client, &import_args, format).await?,
        }
        Ok(())
    })
}

/// `allot shapes list`.
fn render_list(shapes: &[Shape], format: Format) -> String {
    match format {
        Format::Json => json_text(&json!({ "shapes": shapes })),
        Format::Table => table(
            ["name", "request"],
            shapes.iter().map(|s| [s.name.clone(), s.request.clone()]),
        ),
    }
}

/// `allot shapes show`.
fn render_shape(shape: &Shape, format: Format) -> String {
    match format {
        Format::Json => json_text(shape),
        Format::Table => table(
            ["field", "value"],
            [
                ["name".into(), shape.name.clone()],
                ["request".into(), shape.request.clone()],
                ["created_at".into(), shape.created_at.clone()],
                ["updated_at".into(), shape.updated_at.clone()],
            ],
        ),
    }
}

/// `allot shapes set`: one line saying whether the shape is new.
fn render_set(shape: &Shape, new: bool, format: Format) -> String {
    match format {
        Format::Json => json_text(shape),
        Format::Table => format!(
            "{} shape {:?}: {}\n",
            if new { "created" } else { "replaced" },
            shape.name,
            shape.request
        ),
    }
}

/// One shape's headroom as `allot shapes headroom` prints it.
#[derive(Debug, Serialize)]
struct Count {
    shape: String,
    headroom: u64,
}

/// `allot shapes headroom`: each shape counted in turn (every shape's, by name, when
/// `names` is empty); a shape the server refuses to count is named on stderr, and the
/// command fails after counting the others.
async fn headroom(
    client: &Client,
    names: Vec<String>,
    with: &str,
    format: Format,
) -> anyhow::Result<()> {
    let names = if names.is_empty() {
        let shapes = client.shapes().await.context("GET /shapes")?;
        shapes.into_iter().map(|s| s.name).collect()
    } else {
        names
    };
    let mut counts = Vec::new();
    let mut failed = 0;
    for name in &names {
        match client.shape_headroom(name, with).await {
            Ok(answer) => counts.push(Count {
                shape: name.clone(),
                headroom: answer.headroom,
            }),
            Err(e) => {
                eprintln!("shape {name:?}: {e}");
                failed += 1;
            }
        }
    }
    match format {
        Format::Json => print!("{}", json_text(&json!({ "headroom": counts }))),
        Format::Table => print!(
            "{}",
            table(
                ["shape", "headroom"],
                counts
                    .iter()
                    .map(|c| [c.shape.clone(), c.headroom.to_string()]),
            )
        ),
    }
    if failed > 0 {
        bail!(
            "{failed} of {} shapes not counted (above, and why)",
            names.len()
        );
    }
    Ok(())
}

/// What an import does, or did, with one flavor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    /// A new shape.
    Created,
    /// A shape of that name with another request: the request replaced.
    Replaced,
    /// A shape of that name with this very request: nothing written.
    Unchanged,
    /// Not written, and why.
    Refused,
}

/// One flavor of an import: what it maps to and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Entry {
    /// The flavor's name, the shape's.
    name: String,
    /// What became of it (what would, in a dry run).
    outcome: Outcome,
    /// The request it maps to (none when it maps to none).
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<String>,
    /// The request its shape had, when replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    was: Option<String>,
    /// The extra specs the request does not carry, by key.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    unmapped: BTreeMap<String, String>,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl Entry {
    /// A flavor refused, and why.
    fn refused(name: &str, reason: String) -> Entry {
        Entry {
            name: name.to_owned(),
            outcome: Outcome::Refused,
            request: None,
            was: None,
            unmapped: BTreeMap::new(),
            reason: Some(reason),
        }
    }
}

/// What an import will do, worked out from the file and the shapes there are before
/// anything is written: each flavor's entry in the file's order (`Created`,
/// `Replaced` and `Unchanged` to be confirmed by the write), and the shapes to
/// delete with `--prune`, by name.
fn plan(
    flavors: &[flavors::Flavor],
    existing: &BTreeMap<String, Shape>,
    prune: bool,
) -> (Vec<Entry>, Vec<String>) {
    let mut seen = BTreeSet::new();
    let mut entries = Vec::with_capacity(flavors.len());
    for flavor in flavors {
        let name = &flavor.name;
        // Nova's flavor names are unique; a file that repeats one was edited, and
        // the later flavor would silently replace the earlier.
        if !seen.insert(name.as_str()) {
            let why = "another flavor of this name comes before it in the file";
            entries.push(Entry::refused(name, format!("flavor {name:?}: {why}")));
            continue;
        }
        // The server's own rule, so that a dry run refuses what the write would.
        if let Err(e) = name_in_path(name) {
            entries.push(Entry::refused(
                name,
                format!("flavor {name:?}: {}", e.message),
            ));
            continue;
        }
        match flavors::map(flavor) {
            Ok(Mapped {
                request, unmapped, ..
            }) => {
                let was = existing.get(name).map(|s| s.request.clone());
                let outcome = match &was {
                    None => Outcome::Created,
                    Some(old) if *old == request => Outcome::Unchanged,
                    Some(_) => Outcome::Replaced,
                };
                entries.push(Entry {
                    name: name.clone(),
                    outcome,
                    was: was.filter(|_| outcome == Outcome::Replaced),
                    request: Some(request),
                    unmapped: unmapped.into_iter().collect(),
                    reason: None,
                });
            }
            Err(reason) => entries.push(Entry::refused(name, reason)),
        }
    }
    let pruned = if prune {
        existing
            .keys()
            .filter(|name| !seen.contains(name.as_str()))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    (entries, pruned)
}

/// The flavor list's text: the file, or standard input for `-`.
fn read_input(file: &str) -> anyhow::Result<String> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(file).with_context(|| format!("reading {file}"))
}

/// `allot shapes import FILE`: the plan, then each write in the file's order, a line
/// for each flavor as it goes (refusals on stderr), then the deletions of
/// `--prune`; a failure at the end if any flavor was refused.
async fn import(client: &Client, args: &ImportArgs, format: Format) -> anyhow::Result<()> {
    let text = read_input(&args.file)?;
    let flavors = flavors::parse_flavor_list(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("reading {}", args.file))?;
    if args.prune && flavors.is_empty() {
        // What a failed `openstack flavor list` upstream of a pipe may leave: every
        // shape would go.
        bail!(
            "{}: no flavor in the list; --prune would delete every shape",
            args.file
        );
    }
    let existing: BTreeMap<String, Shape> = client
        .shapes()
        .await
        .context("GET /shapes")?
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    let (mut entries, pruned) = plan(&flavors, &existing, args.prune);
    for entry in &mut entries {
        if !args.dry_run {
            write(client, entry).await;
        }
        if format == Format::Table {
            print_entry(entry, args.dry_run);
        }
    }
    let mut deleted = Vec::new();
    for name in pruned {
        let done = if args.dry_run {
            Ok(())
        } else {
            client.delete_shape(&name).await
        };
        match done {
            Ok(()) => {
                if format == Format::Table {
                    let verb = if args.dry_run {
                        "would delete"
                    } else {
                        "deleted"
                    };
                    println!("{verb} shape {name:?}: no flavor of that name");
                }
                deleted.push(name);
            }
            // Deleted meanwhile (404) or refused: said, and the run fails.
            Err(e) => eprintln!("not deleted: shape {name:?}: {e}"),
        }
    }
    finish(&entries, &deleted, args, format)
}

/// Writes one planned entry (unless it is unchanged or refused), turning it into a
/// refusal when the server refuses it, and into what the server says it did (a
/// shape made or deleted since the plan changes `Created` into `Replaced` or back).
async fn write(client: &Client, entry: &mut Entry) {
    let Some(request) = entry.request.clone() else {
        return;
    };
    if matches!(entry.outcome, Outcome::Unchanged | Outcome::Refused) {
        return;
    }
    match client.put_shape(&entry.name, &request).await {
        Ok((_, new)) => {
            entry.outcome = if new {
                Outcome::Created
            } else {
                Outcome::Replaced
            };
        }
        Err(e) => {
            entry.outcome = Outcome::Refused;
            entry.reason = Some(format!("flavor {:?}: {e}", entry.name));
        }
    }
}

/// An entry's lines: what became of it on stdout (with each extra spec not mapped),
/// a refusal on stderr.
fn print_entry(entry: &Entry, dry_run: bool) {
    let name = &entry.name;
    let request = entry.request.as_deref().unwrap_or("");
    match (entry.outcome, dry_run) {
        (Outcome::Refused, _) => {
            eprintln!(
                "not imported: {}",
                entry.reason.as_deref().unwrap_or("refused")
            );
            return;
        }
        (Outcome::Unchanged, _) => println!("unchanged shape {name:?}: {request}"),
        (Outcome::Created, false) => println!("created shape {name:?}: {request}"),
        (Outcome::Created, true) => println!("would create shape {name:?}: {request}"),
        (Outcome::Replaced, dry) => println!(
            "{} shape {name:?}: {request} (was {})",
            if dry { "would replace" } else { "replaced" },
            entry.was.as_deref().unwrap_or("another request")
        ),
    }
    for (key, value) in &entry.unmapped {
        println!("flavor {name:?}: not mapped: {key}={value}");
    }
}

/// The import's summary (or, with `-f json`, its one document), and its failure
/// when a flavor was refused or a shape to prune was not deleted.
fn finish(
    entries: &[Entry],
    deleted: &[String],
    args: &ImportArgs,
    format: Format,
) -> anyhow::Result<()> {
    let count = |outcome| entries.iter().filter(|e| e.outcome == outcome).count();
    let refused = count(Outcome::Refused);
    match format {
        Format::Json => print!(
            "{}",
            json_text(&json!({
                "dry_run": args.dry_run, "flavors": entries,
                "deleted": args.prune.then_some(deleted),
            }))
        ),
        Format::Table => {
            let mut line = format!(
                "{}{} flavors: {} created, {} replaced, {} unchanged, {refused} not imported",
                if args.dry_run {
                    "dry run, nothing written: "
                } else {
                    ""
                },
                entries.len(),
                count(Outcome::Created),
                count(Outcome::Replaced),
                count(Outcome::Unchanged),
            );
            if args.prune {
                line.push_str(&format!("; {} shapes deleted", deleted.len()));
            }
            println!("{line}");
        }
    }
    if refused > 0 {
        bail!(
            "{refused} of {} flavors not imported (above, and why)",
            entries.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// The subcommand as `main` declares it, for parsing tests.
    #[derive(Parser, Debug)]
    enum Cli {
        Shapes(ShapesArgs),
    }

    fn parse(args: &[&str]) -> Result<Option<ShapesCommand>, clap::Error> {
        let all = ["allot", "shapes"].into_iter().chain(args.iter().copied());
        Cli::try_parse_from(all).map(|Cli::Shapes(a)| a.command)
    }

    #[test]
    fn the_command_line_checks_its_shape() {
        assert!(matches!(parse(&[]), Ok(None)));
        assert!(matches!(
            parse(&["list", "-f", "json"]),
            Ok(Some(ShapesCommand::List))
        ));
        assert!(parse(&["show"]).is_err());
        assert!(parse(&["set", "m1.small"]).is_err());
        let Ok(Some(ShapesCommand::Set { name, request })) =
            parse(&["set", "GPU large", "resources=VGPU:1"])
        else {
            panic!("set");
        };
        assert_eq!(
            (name.as_str(), request.as_str()),
            ("GPU large", "resources=VGPU:1")
        );
        let Ok(Some(ShapesCommand::Headroom { names, with })) =
            parse(&["headroom", "a", "b", "--with", "member_of=x"])
        else {
            panic!("headroom");
        };
        assert_eq!(
            (names, with.as_deref()),
            (vec!["a".to_owned(), "b".to_owned()], Some("member_of=x"))
        );
        let Ok(Some(ShapesCommand::Import(import))) =
            parse(&["import", "-", "--dry-run", "--prune"])
        else {
            panic!("import");
        };
        assert_eq!(
            (import.file.as_str(), import.dry_run, import.prune),
            ("-", true, true)
        );
        assert!(parse(&["import"]).is_err());
    }

    fn flavor(name: &str, vcpus: u64, specs: &[(&str, &str)]) -> flavors::Flavor {
        flavors::Flavor {
            id: name.to_owned(),
            name: name.to_owned(),
            vcpus,
            ram_mb: 1024,
            disk_gb: 10,
            ephemeral_gb: 0,
            swap_mb: 0,
            extra_specs: specs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn shape(name: &str, request: &str) -> (String, Shape) {
        let at = "2026-11-29T10:00:00Z".to_owned();
        let shape = Shape {
            created_at: at.clone(),
            name: name.to_owned(),
            request: request.to_owned(),
            updated_at: at,
        };
        (name.to_owned(), shape)
    }

    #[test]
    fn the_plan_sorts_flavors_into_created_replaced_unchanged_and_refused() {
        let flavors = [
            flavor("new", 1, &[("hw:mem_page_size", "large")]),
            flavor("same", 2, &[]),
            flavor("other", 4, &[]),
            flavor("bad", 1, &[("resources:VCPU", "two")]),
            flavor("a/b", 1, &[]),
            flavor("..", 1, &[]),
            flavor("same", 8, &[]),
        ];
        let existing = BTreeMap::from([
            shape("same", "resources=DISK_GB:10,MEMORY_MB:1024,VCPU:2"),
            shape("other", "resources=VCPU:1"),
            shape("bad", "resources=VCPU:1"),
            shape("hand-made", "resources=VCPU:3"),
        ]);
        let (entries, pruned) = plan(&flavors, &existing, true);
        let outcomes: Vec<_> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.outcome))
            .collect();
        assert_eq!(
            outcomes,
            [
                ("new", Outcome::Created),
                ("same", Outcome::Unchanged),
                ("other", Outcome::Replaced),
                ("bad", Outcome::Refused),
                ("a/b", Outcome::Refused),
                ("..", Outcome::Refused),
                ("same", Outcome::Refused),
            ]
        );
        assert_eq!(
            entries[0].unmapped,
            BTreeMap::from([("hw:mem_page_size".to_owned(), "large".to_owned())])
        );
        assert_eq!(
            entries[2].request.as_deref(),
            Some("resources=DISK_GB:10,MEMORY_MB:1024,VCPU:4")
        );
        assert_eq!(entries[2].was.as_deref(), Some("resources=VCPU:1"));
        assert_eq!(entries[1].was, None);
        assert!(entries[3]
            .reason
            .as_deref()
            .unwrap()
            .contains("resources:VCPU=two"));
        assert!(entries[4]
            .reason
            .as_deref()
            .unwrap()
            .contains("Invalid shape name \"a/b\""));
        assert!(entries[5]
            .reason
            .as_deref()
            .unwrap()
            .contains("not '.' or '..'"));
        assert!(entries[6]
            .reason
            .as_deref()
            .unwrap()
            .contains("comes before it"));
        // A refused flavor's shape is still a flavor's: only the hand-made one goes.
        assert_eq!(pruned, ["hand-made"]);
        assert!(plan(&flavors, &existing, false).1.is_empty());
    }
}
