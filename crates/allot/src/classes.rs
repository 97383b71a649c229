//! `allot classes`: the resource classes of a running allot with their metadata (an
//! allot extension, issue 10), as a table for people or JSON for scripts; and `allot
//! classes set` to give a custom class its metadata. It talks HTTP through
//! `allot-client` only, with a token, like any other client.

use allot_client::{ClassMetadata, Client, Config};
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

/// `allot classes ...`.
#[derive(Args, Debug)]
pub struct ClassesArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table, global = true)]
    format: Format,
    #[command(subcommand)]
    command: Option<ClassesCommand>,
}

#[derive(Subcommand, Debug)]
enum ClassesCommand {
    /// List every class with its metadata (the default).
    List,
    /// Replace a custom class's metadata (options left out are unset).
    Set {
        /// The class, `CUSTOM_...`.
        name: String,
        /// What one unit is, e.g. `count`, `MiB`, `GiB`, `kbit/s`.
        #[arg(long)]
        units: Option<String>,
        /// A name for people.
        #[arg(long)]
        display_name: Option<String>,
        /// One line on what the class counts.
        #[arg(long)]
        description: Option<String>,
    },
}

/// Where the running allot is and who we are to it.
#[derive(Args, Debug, Clone)]
pub struct Remote {
    /// The allot endpoint.
    #[arg(
        long,
        env = "ALLOT_URL",
        default_value = "http://127.0.0.1:8778",
        global = true
    )]
    pub(crate) url: String,
    /// The token (`USER[:PROJECT]` under allot's noauth2; `admin` is an admin).
    #[arg(long, env = "ALLOT_TOKEN", default_value = "admin", global = true)]
    pub(crate) token: String,
}

/// How answers are printed.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Aligned columns, `-` for an unset field.
    Table,
    /// JSON, one document.
    Json,
}

/// One class as printed: its name beside its metadata's fields.
#[derive(Serialize)]
struct Row {
    name: String,
    units: Option<String>,
    display_name: Option<String>,
    description: Option<String>,
}

impl Row {
    fn new(name: String, m: ClassMetadata) -> Row {
        Row {
            name,
            units: m.units,
            display_name: m.display_name,
            description: m.description,
        }
    }
}

/// Runs a classes command to completion.
pub fn run(args: ClassesArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let config = Config {
        token: args.remote.token.clone(),
        ..Config::new(args.remote.url.trim_end_matches('/'))
    };
    let client = Client::new(&config)?;
    let rows = runtime.block_on(async {
        match args.command {
            None | Some(ClassesCommand::List) => {
                let classes = client.resource_classes(true).await?;
                Ok::<_, anyhow::Error>(
                    classes
                        .into_iter()
                        .map(|c| Row::new(c.name, c.metadata.unwrap_or_default()))
                        .collect::<Vec<_>>(),
                )
            }
            Some(ClassesCommand::Set {
                name,
                units,
                display_name,
                description,
            }) => {
                let wanted = ClassMetadata {
                    units,
                    display_name,
                    description,
                };
                let set = client.set_class_metadata(&name, &wanted).await?;
                Ok(vec![Row::new(name, set)])
            }
        }
    })?;
    print!("{}", render(&rows, args.format));
    Ok(())
}

/// The rows in `format`, ending with a newline.
fn render(rows: &[Row], format: Format) -> String {
    match format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(rows).expect("rows serialise");
            text.push('\n');
            text
        }
        Format::Table => {
            let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
            let mut lines = vec![[
                "NAME".to_owned(),
                "UNITS".to_owned(),
                "DISPLAY NAME".to_owned(),
                "DESCRIPTION".to_owned(),
            ]];
            lines.extend(rows.iter().map(|r| {
                [
                    r.name.clone(),
                    cell(&r.units),
                    cell(&r.display_name),
                    cell(&r.description),
                ]
            }));
            let width = |i: usize| {
                lines
                    .iter()
                    .map(|l| l[i].chars().count())
                    .max()
                    .unwrap_or(0)
            };
            let widths = [width(0), width(1), width(2)];
            let mut out = String::new();
            for line in &lines {
                for (i, w) in widths.iter().enumerate() {
                    let pad = w - line[i].chars().count();
                    out.push_str(&line[i]);
                    out.push_str(&" ".repeat(pad + 2));
                }
                out.push_str(&line[3]);
                out.push('\n');
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        vec![
            Row::new(
                "VCPU".into(),
                ClassMetadata {
                    units: Some("count".into()),
                    display_name: Some("vCPUs".into()),
                    description: Some("Virtual CPUs".into()),
                },
            ),
            Row::new("CUSTOM_LONG_NAME".into(), ClassMetadata::default()),
        ]
    }

    #[test]
    fn the_table_aligns_and_marks_unset_fields() {
        assert_eq!(
            render(&rows(), Format::Table),
            "NAME              UNITS  DISPLAY NAME  DESCRIPTION\n\
             VCPU              count  vCPUs         Virtual CPUs\n\
             CUSTOM_LONG_NAME  -      -             -\n"
        );
    }

    #[test]
    fn json_keeps_nulls() {
        let value: serde_json::Value =
            serde_json::from_str(&render(&rows(), Format::Json)).unwrap();
        assert_eq!(value[1]["units"], serde_json::Value::Null);
        assert_eq!(value[0]["name"], "VCPU");
    }
}
