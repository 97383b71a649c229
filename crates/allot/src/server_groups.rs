//! `allot server-groups`: a running allot's server groups (an allot extension, issue
//! 44; `docs/api.md`, "Server groups") for operators and scripts.
//!
//! - `list` (the default) with the API's filters, every page unless `--limit` asks for
//!   one; `show` (members with where each is, and `violations`), `create`, `delete
//!   [--force]`, and `members` (`--add`, `--remove`; neither: the members shown).
//! - `import FILE` (`-` for stdin): the groups a Nova cloud holds, as `openstack server
//!   group list --all-projects --long -f json` prints them, each made or replaced whole
//!   by `PUT /server_groups/{uuid}` with Nova's uuid, name, owners, policy, rules and
//!   members. A group allot cannot hold (several policies, an unknown one, no project)
//!   is reported and skipped, and the command fails at the end, after the others. A
//!   group Nova already holds broken (forced moves, evacuations) is imported and said
//!   so: the writes after it may not make it worse.
//!
//! Like `allot claims` it talks HTTP through `allot-client` only, with `--url` and
//! `--token` (`ALLOT_URL`, `ALLOT_TOKEN`); tables for people, and with `-f json` the
//! JSON the API answered (a listing of several pages as one `{"server_groups": [...]}`).

use std::collections::BTreeMap;
use std::io::Read;

use allot_client::server_groups::{Members, NewServerGroup, Rules, ServerGroup, ServerGroupFilter};
use allot_client::Client;
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::claims::{connect, json_text, table};
use crate::classes::{Format, Remote};

/// Nova's policy names, the only ones a group may have.
const POLICIES: [&str; 4] = [
    "affinity",
    "anti-affinity",
    "soft-affinity",
    "soft-anti-affinity",
];

/// Groups per page when every page is fetched.
const PAGE: u64 = 1000;

/// `allot server-groups ...`.
#[derive(Args, Debug)]
pub struct ServerGroupsArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table, global = true)]
    format: Format,
    #[command(subcommand)]
    command: Option<ServerGroupsCommand>,
}

#[derive(Subcommand, Debug)]
enum ServerGroupsCommand {
    /// List server groups by uuid (the default: every group).
    List(ListArgs),
    /// Show one group: its members, where each is, and how broken its rule is.
    Show {
        /// The group's uuid.
        uuid: Uuid,
    },
    /// Make a group, without members (a claim naming it adds them).
    Create(CreateArgs),
    /// Delete a group (refused while it has members, unless --force); the members
    /// stay consumers.
    Delete {
        /// The group's uuid.
        uuid: Uuid,
        /// Delete it even with members.
        #[arg(long)]
        force: bool,
    },
    /// Add or remove members (with neither, show them).
    Members {
        /// The group's uuid.
        uuid: Uuid,
        /// A consumer to add (repeat for more).
        #[arg(long = "add")]
        add: Vec<Uuid>,
        /// A consumer to remove (repeat for more).
        #[arg(long = "remove")]
        remove: Vec<Uuid>,
    },
    /// Make or replace Nova's groups as `openstack server group list --all-projects
    /// --long -f json` prints them.
    ///
    /// Each keeps Nova's uuid, name, project, user, policy, rules and members, and
    /// never refuses Placement's allocation writes (`enforce_on_allocations` false).
    /// Also read: `openstack server group show ID -f json` of several groups, one
    /// after another (which, unlike the list, prints the rules). A group allot cannot
    /// hold is named and skipped, and the command fails after importing the others.
    Import {
        /// The file (`-`: standard input).
        file: String,
    },
}

/// The filters of `allot server-groups list`.
#[derive(Args, Debug, Default)]
struct ListArgs {
    /// Groups of this project.
    #[arg(long)]
    project: Option<String>,
    /// Groups of this policy.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(POLICIES))]
    policy: Option<String>,
    /// At most this many (one page; without it every page is fetched).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
}

/// The options of `allot server-groups create`.
#[derive(Args, Debug)]
struct CreateArgs {
    /// The group's name.
    name: String,
    /// Its project.
    #[arg(long)]
    project: String,
    /// Its user (the caller's when left out).
    #[arg(long)]
    user: Option<String>,
    /// Nova's policy.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(POLICIES))]
    policy: String,
    /// Nova's `max_server_per_host` (anti-affinity policies only; the server's
    /// default is 1): how many members one host, or domain, may hold.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_per_host: Option<u32>,
    /// What members are kept apart or together in: root (a host, the default),
    /// aggregate, or trait:PREFIX (e.g. trait:CUSTOM_RACK_).
    #[arg(long)]
    scope: Option<String>,
    /// Have Placement's own allocation writes (PUT and POST /allocations) answer to
    /// the rule too.
    #[arg(long)]
    enforce_on_allocations: bool,
    /// The group's uuid (drawn by the server when left out).
    #[arg(long)]
    uuid: Option<Uuid>,
}

impl CreateArgs {
    fn body(self) -> NewServerGroup {
        NewServerGroup {
            uuid: self.uuid,
            name: self.name,
            project_id: self.project,
            user_id: self.user,
            policy: self.policy,
            rules: self.max_per_host.map(|max| Rules {
                max_server_per_host: Some(max),
            }),
            scope: self.scope,
            enforce_on_allocations: self.enforce_on_allocations.then_some(true),
            members: None,
        }
    }
}

/// Runs a server-groups command to completion.
pub fn run(args: ServerGroupsArgs) -> anyhow::Result<()> {
    let (runtime, client) = connect(&args.remote)?;
    let format = args.format;
    let command = args
        .command
        .unwrap_or(ServerGroupsCommand::List(ListArgs::default()));
    if let ServerGroupsCommand::Import { file } = command {
        return runtime.block_on(import(&client, &file, format));
    }
    let text = runtime.block_on(async {
        Ok::<_, anyhow::Error>(match command {
            ServerGroupsCommand::List(list) => {
                let filter = ServerGroupFilter {
                    project_id: list.project,
                    policy: list.policy,
                    limit: list.limit,
                    marker: None,
                };
                let groups = match filter.limit {
                    Some(_) => client.server_groups(&filter).await?,
                    None => all_groups(&client, filter).await?,
                };
                render_groups(&groups, format)
            }
            ServerGroupsCommand::Show { uuid } => {
                render_group(&client.server_group(&uuid).await?, format)
            }
            ServerGroupsCommand::Create(create) => {
                render_group(&client.create_server_group(&create.body()).await?, format)
            }
            ServerGroupsCommand::Delete { uuid, force } => {
                client.delete_server_group(&uuid, force).await?;
                match format {
                    Format::Table => format!("deleted server group {uuid}\n"),
                    // The API answers 204, no body.
                    Format::Json => String::new(),
                }
            }
            ServerGroupsCommand::Members { uuid, add, remove } => {
                let group = if add.is_empty() && remove.is_empty() {
                    client.server_group(&uuid).await?
                } else {
                    let members = Members { add, remove };
                    client.server_group_members(&uuid, &members).await?
                };
                render_group(&group, format)
            }
            // Handled above: it prints as it goes.
            ServerGroupsCommand::Import { .. } => String::new(),
        })
    })?;
    print!("{text}");
    Ok(())
}

/// Every page of `GET /server_groups`, following the marker until a short page.
async fn all_groups(
    client: &Client,
    mut filter: ServerGroupFilter,
) -> anyhow::Result<Vec<ServerGroup>> {
    filter.limit = Some(PAGE);
    let mut all = Vec::new();
    loop {
        let page = client.server_groups(&filter).await?;
        let full = page.len() as u64 >= PAGE;
        let last = page.last().map(|g| g.uuid);
        all.extend(page);
        match last {
            // A server that ignored the marker would hand the same page back forever.
            Some(last) if full && filter.marker != Some(last) => filter.marker = Some(last),
            _ => return Ok(all),
        }
    }
}

/// Items joined with `, `, or `-` for none (also `allot drains`').
pub(crate) fn joined<T: ToString>(items: &[T]) -> String {
    match items.is_empty() {
        true => "-".into(),
        false => items
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn max_per_host(group: &ServerGroup) -> String {
    group
        .rules
        .max_server_per_host
        .map_or_else(|| "-".into(), |n| n.to_string())
}

/// A list of groups: a table, or the API's `{"server_groups": [...]}`.
fn render_groups(groups: &[ServerGroup], format: Format) -> String {
    match format {
        Format::Json => json_text(&json!({ "server_groups": groups })),
        Format::Table => table(
            [
                "UUID",
                "NAME",
                "PROJECT",
                "POLICY",
                "MAX PER HOST",
                "SCOPE",
                "MEMBERS",
            ],
            groups.iter().map(|g| {
                [
                    g.uuid.to_string(),
                    g.name.clone(),
                    g.project_id.clone(),
                    g.policy.clone(),
                    max_per_host(g),
                    g.scope.clone(),
                    g.members.len().to_string(),
                ]
            }),
        ),
    }
}

/// One group: its fields one per line, then its members with where each is (when
/// the answer says); or the API's group object.
fn render_group(group: &ServerGroup, format: Format) -> String {
    if format == Format::Json {
        return json_text(group);
    }
    let mut fields = vec![
        ("uuid", group.uuid.to_string()),
        ("name", group.name.clone()),
        ("project", group.project_id.clone()),
        ("user", group.user_id.clone()),
        ("policy", group.policy.clone()),
        ("max per host", max_per_host(group)),
        ("scope", group.scope.clone()),
        (
            "enforce on allocations",
            group.enforce_on_allocations.to_string(),
        ),
        ("created at", group.created_at.clone()),
        ("updated at", group.updated_at.clone()),
        ("members", group.members.len().to_string()),
    ];
    if let Some(violations) = group.violations {
        fields.push(("violations", violations.to_string()));
    }
    let mut out = String::new();
    for (name, value) in fields {
        out.push_str(&format!("{:<24}{value}\n", format!("{name}:")));
    }
    if !group.members.is_empty() {
        out.push('\n');
        let places = group.placement.clone().unwrap_or_default();
        out.push_str(&table(
            ["MEMBER", "ROOTS", "DOMAINS"],
            group.members.iter().map(|m| {
                let place = places.get(m).cloned().unwrap_or_default();
                [m.to_string(), joined(&place.roots), joined(&place.domains)]
            }),
        ));
    }
    out
}

/// A group of Nova's, read from `openstack server group list -f json`, as allot's
/// `PUT /server_groups/{uuid}` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NovaGroup {
    uuid: Uuid,
    body: NewServerGroup,
}

/// A group of the file that is not imported, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Skipped {
    id: String,
    name: String,
    reason: String,
}

/// Reads what `openstack server group list --long -f json` prints: an array of rows
/// titled as the client titles its columns (`ID`, `Name`, `Policies` before compute
/// microversion 2.64 or `Policy` from it, `Members`, `Project Id`, `User Id`). Also
/// taken: a single object, several documents one after the other (a loop of
/// `openstack server group show -f json`, whose keys are `id`, `policy`, `rules`,
/// ...), and keys in any case. Each row is a group or the reason it is skipped; only
/// a file that is no such JSON at all is an error.
fn read_nova(text: &str) -> anyhow::Result<Vec<Result<NovaGroup, Skipped>>> {
    let mut rows = Vec::new();
    for document in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let document = document.context(
            "not JSON: give what `openstack server group list --all-projects --long -f json` \
             prints",
        )?;
        match document {
            Value::Array(items) => rows.extend(items),
            object @ Value::Object(_) => rows.push(object),
            other => bail!("expected a list of server groups, found {other}"),
        }
    }
    rows.iter()
        .enumerate()
        .map(|(i, row)| match row {
            Value::Object(row) => Ok(nova_group(row)),
            other => bail!("entry {} is not a server group: {other}", i + 1),
        })
        .collect()
}

/// One row, by its keys lower-cased with spaces and dashes as `_` (`Project Id`
/// and `project_id` alike).
fn nova_group(row: &Map<String, Value>) -> Result<NovaGroup, Skipped> {
    let keys: BTreeMap<String, &Value> = row
        .iter()
        .map(|(k, v)| (k.to_lowercase().replace([' ', '-'], "_"), v))
        .collect();
    // Null and "" mean a column with nothing in it, as the client prints one.
    let field = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| keys.get(*n).copied())
            .filter(|v| !v.is_null() && v.as_str() != Some(""))
    };
    let text =
        |names: &[&str]| field(names).map(|v| v.as_str().map_or(v.to_string(), str::to_owned));
    let id = text(&["id", "uuid"]).unwrap_or_default();
    let name = text(&["name"]).unwrap_or_default();
    let skip = |reason: String| Skipped {
        id: id.clone(),
        name: name.clone(),
        reason,
    };
    let uuid: Uuid = id
        .parse()
        .map_err(|_| skip(format!("{id:?} is not a uuid")))?;
    let policy = nova_policy(field(&["policy"]), field(&["policies"])).map_err(&skip)?;
    let rules = match field(&["rules"]) {
        Some(rules) => nova_rules(rules).map_err(&skip)?,
        None => None,
    };
    let members = match field(&["members", "member_ids"]) {
        Some(members) => text_list(members)
            .map_err(|e| skip(format!("members: {e}")))?
            .iter()
            .map(|m| {
                m.parse()
                    .map_err(|_| skip(format!("member {m:?} is not a uuid")))
            })
            .collect::<Result<Vec<Uuid>, _>>()?,
        None => Vec::new(),
    };
    let project = text(&["project_id"]).ok_or_else(|| {
        skip(
            "no project (Nova shows it from compute microversion 2.13: list with \
              --os-compute-api-version 2.13 or later)"
                .into(),
        )
    })?;
    Ok(NovaGroup {
        uuid,
        body: NewServerGroup {
            // The path names it; PUT's body has no uuid.
            uuid: None,
            name,
            project_id: project,
            user_id: text(&["user_id"]),
            policy,
            rules: rules.map(|max| Rules {
                max_server_per_host: Some(max),
            }),
            scope: None,
            // Nova keeps its groups on its own moves, and an admin may force one:
            // Placement's allocation writes are never refused for an imported group.
            enforce_on_allocations: Some(false),
            members: Some(members),
        },
    })
}

/// The one policy of a group: `Policy` (2.64 on) or the only one of `Policies`
/// (before 2.64: a list, or the older client's comma-joined text).
fn nova_policy(policy: Option<&Value>, policies: Option<&Value>) -> Result<String, String> {
    let names = match (policy, policies) {
        (Some(policy), _) => text_list(policy)?,
        (None, Some(policies)) => text_list(policies)?,
        (None, None) => Vec::new(),
    };
    match names.as_slice() {
        [one] if POLICIES.contains(&one.as_str()) => Ok(one.clone()),
        [one] => Err(format!(
            "unknown policy {one:?} (allot keeps {})",
            POLICIES.join(", ")
        )),
        [] => Err("no policy".into()),
        many => Err(format!(
            "{} policies ({}): allot keeps one per group",
            many.len(),
            many.join(", ")
        )),
    }
}

/// `max_server_per_host`, from the rules as a JSON object (`{"max_server_per_host":
/// 2}`, the number maybe as text) or as the client's table shows a dict
/// (`max_server_per_host='2'`). Another rule is not one allot can keep.
fn nova_rules(rules: &Value) -> Result<Option<u32>, String> {
    let pairs: Vec<(String, String)> = match rules {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), str::to_owned)))
            .collect(),
        Value::String(text) => text
            .split(',')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("rules {text:?} are not key='value', ..."))?;
                Ok((
                    k.trim().to_owned(),
                    v.trim().trim_matches(['\'', '"']).to_owned(),
                ))
            })
            .collect::<Result<_, String>>()?,
        other => return Err(format!("rules {other} are neither an object nor text")),
    };
    let mut max = None;
    for (key, value) in pairs {
        if key != "max_server_per_host" {
            return Err(format!("unknown rule {key:?}"));
        }
        let n: u32 = value
            .parse()
            .map_err(|_| format!("max_server_per_host {value:?} is not a whole number"))?;
        max = Some(n);
    }
    Ok(max)
}

/// A list of texts: a JSON list of strings, or one text of items joined by commas
/// (how the client printed lists before it gave JSON lists).
fn text_list(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.trim().to_owned()),
                other => Err(format!("{other} is not text")),
            })
            .collect(),
        Value::String(text) => Ok(text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()),
        Value::Null => Ok(Vec::new()),
        other => Err(format!("{other} is neither a list nor text")),
    }
}

/// `allot server-groups import FILE`: every group of the file put as Nova holds it,
/// a line for each; the skipped and refused ones on stderr, and a failure at the end
/// if there were any.
async fn import(client: &Client, file: &str, format: Format) -> anyhow::Result<()> {
    let text = match file {
        "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading standard input")?;
            text
        }
        path => std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
    };
    let rows = read_nova(&text).with_context(|| format!("reading {file}"))?;
    let total = rows.len();
    let mut imported = Vec::new();
    let mut skipped = Vec::new();
    for row in rows {
        let nova = match row {
            Ok(nova) => nova,
            Err(skip) => {
                eprintln!("skipped {} {:?}: {}", skip.id, skip.name, skip.reason);
                skipped.push(skip);
                continue;
            }
        };
        match client.put_server_group(&nova.uuid, &nova.body).await {
            Ok(group) => {
                if format == Format::Table {
                    println!("{}", imported_line(&group));
                }
                imported.push(group);
            }
            Err(e) => {
                eprintln!("refused {} {:?}: {e}", nova.uuid, nova.body.name);
                skipped.push(Skipped {
                    id: nova.uuid.to_string(),
                    name: nova.body.name,
                    reason: e.to_string(),
                });
            }
        }
    }
    if format == Format::Json {
        print!(
            "{}",
            json_text(&json!({"server_groups": imported, "skipped": skipped}))
        );
    }
    if !skipped.is_empty() {
        bail!(
            "{} of {total} server groups not imported (above, and why)",
            skipped.len()
        );
    }
    Ok(())
}

/// What an import prints for one group it put.
fn imported_line(group: &ServerGroup) -> String {
    let mut line = format!(
        "imported {} {:?}: {}, {} member{}",
        group.uuid,
        group.name,
        group.policy,
        group.members.len(),
        if group.members.len() == 1 { "" } else { "s" }
    );
    if let Some(n) = group.violations.filter(|&n| n > 0) {
        line.push_str(&format!("; held broken by Nova: {n}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_client::server_groups::MemberPlace;
    use clap::Parser;

    const WEB: &str = "0d1b4e8e-3c2f-4f5b-9a1e-2b7c6d5e4f30";
    const DB: &str = "5c1e7a90-8d2b-4e6f-a1b3-c4d5e6f7a8b9";
    const ODD: &str = "a7f3c2d1-0e9b-48a7-b6c5-d4e3f2a1b0c9";
    const VM1: &str = "8a2c6b32-5f7e-4c55-9f3f-8a1f8c0f6a01";
    const VM2: &str = "8a2c6b32-5f7e-4c55-9f3f-8a1f8c0f6a02";
    const PROJECT: &str = "6f70656e737461636b20342065766572";
    const USER: &str = "9b2f4e0c7d1a4c3e8f5b6a7d8e9f0a1b";

    /// The rows read, the skipped ones as their reasons.
    fn read(text: &str) -> Vec<Result<NovaGroup, String>> {
        read_nova(text)
            .unwrap()
            .into_iter()
            .map(|row| row.map_err(|s| format!("{} {}: {}", s.id, s.name, s.reason)))
            .collect()
    }

    fn group(
        uuid: &str,
        name: &str,
        policy: &str,
        max: Option<u32>,
        members: &[&str],
    ) -> NovaGroup {
        NovaGroup {
            uuid: uuid.parse().unwrap(),
            body: NewServerGroup {
                uuid: None,
                name: name.into(),
                project_id: PROJECT.into(),
                user_id: Some(USER.into()),
                policy: policy.into(),
                rules: max.map(|m| Rules {
                    max_server_per_host: Some(m),
                }),
                scope: None,
                enforce_on_allocations: Some(false),
                members: Some(members.iter().map(|m| m.parse().unwrap()).collect()),
            },
        }
    }

    #[test]
    fn nova_before_2_64_lists_policies() {
        // python-openstackclient since late 2020 (format_columns.ListColumn): lists.
        let text = format!(
            r#"[
  {{
    "ID": "{WEB}",
    "Name": "web",
    "Policies": [
      "anti-affinity"
    ],
    "Members": [
      "{VM1}",
      "{VM2}"
    ],
    "Project Id": "{PROJECT}",
    "User Id": "{USER}"
  }},
  {{
    "ID": "{ODD}",
    "Name": "odd",
    "Policies": [
      "affinity",
      "anti-affinity"
    ],
    "Members": [],
    "Project Id": "{PROJECT}",
    "User Id": "{USER}"
  }},
  {{
    "ID": "{DB}",
    "Name": "db",
    "Policies": [
      "soft-affinity"
    ],
    "Members": [],
    "Project Id": "{PROJECT}",
    "User Id": "{USER}"
  }}
]
"#
        );
        let rows = read(&text);
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[0],
            Ok(group(WEB, "web", "anti-affinity", None, &[VM1, VM2]))
        );
        assert_eq!(
            rows[1],
            Err(format!(
                "{ODD} odd: 2 policies (affinity, anti-affinity): allot keeps one per group"
            ))
        );
        assert_eq!(rows[2], Ok(group(DB, "db", "soft-affinity", None, &[])));
    }

    #[test]
    fn nova_before_2_64_from_an_older_client_joins_lists_with_commas() {
        // python-openstackclient before late 2020 (utils.format_list): one text, the
        // items sorted and joined by ", "; and before compute 2.13, no project.
        let text = format!(
            r#"[
  {{"ID": "{WEB}", "Name": "web", "Policies": "anti-affinity",
    "Members": "{VM1}, {VM2}", "Project Id": "{PROJECT}", "User Id": "{USER}"}},
  {{"ID": "{ODD}", "Name": "odd", "Policies": "affinity, anti-affinity",
    "Members": "", "Project Id": "{PROJECT}", "User Id": "{USER}"}},
  {{"ID": "{DB}", "Name": "db", "Policies": "affinity", "Members": "",
    "Project Id": "", "User Id": ""}}
]"#
        );
        let rows = read(&text);
        assert_eq!(
            rows[0],
            Ok(group(WEB, "web", "anti-affinity", None, &[VM1, VM2]))
        );
        assert!(
            rows[1].as_ref().unwrap_err().contains("2 policies"),
            "{rows:?}"
        );
        assert!(
            rows[2].as_ref().unwrap_err().contains("no project"),
            "{rows:?}"
        );
    }

    #[test]
    fn nova_from_2_64_has_one_policy_and_maybe_rules() {
        // `list --long` at 2.64 prints `Policy` and no rules; a `Rules` column, as
        // `show` has it, is taken as an object or as the table's text.
        let text = format!(
            r#"[
  {{"ID": "{WEB}", "Name": "web", "Policy": "anti-affinity",
    "Members": ["{VM1}", "{VM2}"], "Project Id": "{PROJECT}", "User Id": "{USER}"}},
  {{"ID": "{DB}", "Name": "db", "Policy": "anti-affinity",
    "Rules": {{"max_server_per_host": 2}}, "Members": ["{VM1}"],
    "Project Id": "{PROJECT}", "User Id": "{USER}"}},
  {{"ID": "{ODD}", "Name": "odd", "Policy": "soft-anti-affinity",
    "Rules": "max_server_per_host='3'", "Members": [],
    "Project Id": "{PROJECT}", "User Id": "{USER}"}}
]"#
        );
        let rows = read(&text);
        assert_eq!(
            rows,
            [
                Ok(group(WEB, "web", "anti-affinity", None, &[VM1, VM2])),
                Ok(group(DB, "db", "anti-affinity", Some(2), &[VM1])),
                Ok(group(ODD, "odd", "soft-anti-affinity", Some(3), &[])),
            ]
        );
        // An affinity group's empty rules are none.
        let text = format!(
            r#"{{"ID": "{WEB}", "Name": "web", "Policy": "affinity", "Rules": {{}},
                "Members": [], "Project Id": "{PROJECT}", "User Id": "{USER}"}}"#
        );
        assert_eq!(read(&text), [Ok(group(WEB, "web", "affinity", None, &[]))]);
    }

    #[test]
    fn show_output_one_document_after_another() {
        // `for id in ...; do openstack server group show $id -f json; done`: objects
        // one after the other, keys as the resource names them, rules kept.
        let text = format!(
            r#"{{
  "id": "{WEB}",
  "members": ["{VM1}"],
  "name": "web",
  "policy": "anti-affinity",
  "project_id": "{PROJECT}",
  "rules": {{"max_server_per_host": "2"}},
  "user_id": "{USER}"
}}
{{
  "id": "{DB}",
  "members": [],
  "name": "db",
  "policy": "affinity",
  "project_id": "{PROJECT}",
  "rules": {{}},
  "user_id": "{USER}"
}}
"#
        );
        assert_eq!(
            read(&text),
            [
                Ok(group(WEB, "web", "anti-affinity", Some(2), &[VM1])),
                Ok(group(DB, "db", "affinity", None, &[])),
            ]
        );
    }

    #[test]
    fn what_cannot_be_kept_is_skipped_with_its_reason() {
        let row = |fields: &str| {
            let text = format!(
                r#"[{{"ID": "{WEB}", "Name": "web", "Project Id": "{PROJECT}", {fields}}}]"#
            );
            read(&text).remove(0).unwrap_err()
        };
        assert!(row(r#""Policy": "strict""#).contains("unknown policy \"strict\""));
        assert!(row(r#""Policies": []"#).contains("no policy"));
        assert!(row(r#""Policy": "affinity", "Members": ["vm-1"]"#)
            .contains("member \"vm-1\" is not a uuid"));
        assert!(
            row(r#""Policy": "anti-affinity", "Rules": {"max_server_per_host": "two"}"#)
                .contains("is not a whole number")
        );
        assert!(
            row(r#""Policy": "anti-affinity", "Rules": "max_cores='2'""#)
                .contains("unknown rule \"max_cores\"")
        );
        let text = format!(
            r#"[{{"ID": "web", "Name": "web", "Policy": "affinity", "Project Id": "{PROJECT}"}}]"#
        );
        assert!(read(&text)[0]
            .as_ref()
            .unwrap_err()
            .contains("\"web\" is not a uuid"));
        // A file that is not such JSON at all is an error, before any group is put.
        assert!(read_nova("ID  Name  Policy").is_err());
        assert!(read_nova("[1]").is_err());
        assert!(read_nova("42").is_err());
        assert!(read_nova("[]").unwrap().is_empty());
    }

    fn answer() -> ServerGroup {
        let vm1: Uuid = VM1.parse().unwrap();
        let vm2: Uuid = VM2.parse().unwrap();
        let root = Uuid::from_u128(0xa);
        ServerGroup {
            created_at: "2024-05-01T10:00:00Z".into(),
            enforce_on_allocations: false,
            members: vec![vm1, vm2],
            name: "web".into(),
            policy: "anti-affinity".into(),
            project_id: "demo".into(),
            rules: Rules {
                max_server_per_host: Some(1),
            },
            scope: "root".into(),
            updated_at: "2024-05-01T10:01:00Z".into(),
            user_id: "admin".into(),
            uuid: WEB.parse().unwrap(),
            violations: Some(1),
            placement: Some(BTreeMap::from([
                (
                    vm1,
                    MemberPlace {
                        roots: vec![root],
                        domains: vec![root.to_string()],
                    },
                ),
                (vm2, MemberPlace::default()),
            ])),
        }
    }

    #[test]
    fn a_group_as_a_table_and_as_json() {
        let text = render_group(&answer(), Format::Table);
        assert!(
            text.starts_with(&format!("uuid:                   {WEB}\n")),
            "{text}"
        );
        assert!(text.contains("\nmax per host:           1\n"), "{text}");
        assert!(text.contains("\nviolations:             1\n"), "{text}");
        let root = Uuid::from_u128(0xa);
        assert!(
            text.ends_with(&format!(
                "\nMEMBER{s30}  ROOTS{s31}  DOMAINS\n{VM1}  {root}  {root}\n{VM2}  -{s35}  -\n",
                s30 = " ".repeat(30),
                s31 = " ".repeat(31),
                s35 = " ".repeat(35),
            )),
            "{text}"
        );
        let value: Value = serde_json::from_str(&render_group(&answer(), Format::Json)).unwrap();
        assert_eq!(value["violations"], 1);
        assert_eq!(value["placement"][VM1]["roots"], json!([root]));
        let list = render_groups(&[answer()], Format::Table);
        assert_eq!(
            list,
            format!(
                "UUID{s32}  NAME  PROJECT  POLICY         MAX PER HOST  SCOPE  MEMBERS\n\
                 {WEB}  web   demo     anti-affinity  1             root   2\n",
                s32 = " ".repeat(32)
            )
        );
        let value: Value = serde_json::from_str(&render_groups(&[answer()], Format::Json)).unwrap();
        assert_eq!(value["server_groups"][0]["uuid"], WEB);
    }

    #[test]
    fn an_import_line_says_when_nova_held_the_group_broken() {
        let mut group = answer();
        assert_eq!(
            imported_line(&group),
            format!("imported {WEB} \"web\": anti-affinity, 2 members; held broken by Nova: 1")
        );
        group.violations = Some(0);
        group.members.truncate(1);
        assert_eq!(
            imported_line(&group),
            format!("imported {WEB} \"web\": anti-affinity, 1 member")
        );
    }

    /// The subcommand as `main` declares it, for parsing tests.
    #[derive(Parser, Debug)]
    enum Cli {
        #[command(name = "server-groups")]
        ServerGroups(ServerGroupsArgs),
    }

    #[test]
    fn the_command_line_checks_its_shape() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(
                ["allot", "server-groups"]
                    .into_iter()
                    .chain(args.iter().copied()),
            )
        };
        assert!(parse(&[]).is_ok());
        assert!(parse(&["list", "--policy", "anti-affinity", "-f", "json"]).is_ok());
        assert!(parse(&["list", "--policy", "strict"]).is_err());
        assert!(parse(&["show", "web"]).is_err());
        assert!(parse(&["create", "web", "--project", "p"]).is_err());
        assert!(parse(&["create", "web", "--policy", "affinity"]).is_err());
        let ok = [
            "create",
            "web",
            "--project",
            "p",
            "--policy",
            "anti-affinity",
        ];
        assert!(parse(&ok).is_ok());
        let with = |more: &[&'static str]| [&ok[..], more].concat();
        assert!(parse(&with(&["--max-per-host", "0"])).is_err());
        assert!(parse(&with(&[
            "--max-per-host",
            "2",
            "--scope",
            "trait:CUSTOM_RACK_"
        ]))
        .is_ok());
        assert!(parse(&with(&["--enforce-on-allocations", "--uuid", WEB])).is_ok());
        assert!(parse(&["delete", WEB, "--force"]).is_ok());
        assert!(parse(&["members", WEB, "--add", VM1, "--add", VM2, "--remove", VM1]).is_ok());
        assert!(parse(&["members", WEB, "--add", "vm1"]).is_err());
        assert!(parse(&["import", "-"]).is_ok());
        assert!(parse(&["import"]).is_err());
        // The body create sends: rules only when given, enforcement only when asked.
        let Cli::ServerGroups(args) = parse(&ok).unwrap();
        let Some(ServerGroupsCommand::Create(create)) = args.command else {
            panic!("not create");
        };
        assert_eq!(
            serde_json::to_value(create.body()).unwrap(),
            json!({"name": "web", "project_id": "p", "policy": "anti-affinity"})
        );
    }
}
