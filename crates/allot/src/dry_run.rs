//! `allot dry-run METHOD PATH [--body FILE|-]`: what an inventory write, a reshape or
//! a provider delete would do on a running allot, with nothing changed (issue 47;
//! `docs/api.md`, "Dry runs"): the status it would get and every class it would leave
//! over capacity, with the consumers there.

use std::io::Read;

use allot_client::dry_run::{DryRun, DryRunRequest};
use anyhow::Context;
use clap::Args;

use crate::claims::{connect_at, json_text, table};
use crate::classes::{Format, Remote};

/// `allot dry-run`.
#[derive(Args, Debug)]
pub struct DryRunArgs {
    #[command(flatten)]
    remote: Remote,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
    /// The microversion the write would be sent at.
    #[arg(long, default_value = "1.39")]
    microversion: String,
    /// `PUT`, `POST` or `DELETE`.
    method: String,
    /// The write's path, such as `/resource_providers/UUID/inventories/VCPU`.
    path: String,
    /// A file holding the write's JSON body (`-`: standard input).
    #[arg(long)]
    body: Option<String>,
}

/// Runs `allot dry-run` to completion.
pub fn run(args: DryRunArgs) -> anyhow::Result<()> {
    let body = match args.body.as_deref() {
        None => None,
        Some(source) => {
            let text = if source == "-" {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("reading the body from standard input")?;
                text
            } else {
                std::fs::read_to_string(source).with_context(|| format!("reading {source}"))?
            };
            Some(serde_json::from_str(&text).context("the body is not JSON")?)
        }
    };
    let (runtime, client) = connect_at(&args.remote, &args.microversion)?;
    let request = DryRunRequest {
        method: args.method.to_uppercase(),
        path: args.path,
        body,
    };
    let answer = runtime
        .block_on(client.dry_run(&request))
        .context("POST /dry_run")?;
    print!("{}", render(&request, &answer, args.format));
    Ok(())
}

/// The answer as printed: what the write would get, then the classes it would leave
/// over capacity, one line per consumer there.
fn render(request: &DryRunRequest, answer: &DryRun, format: Format) -> String {
    if format == Format::Json {
        return json_text(answer);
    }
    let mut out = format!(
        "{} {} would answer {}\n",
        request.method, request.path, answer.status
    );
    for error in &answer.errors {
        let code = error["code"].as_str().unwrap_or("-");
        let detail = error["detail"].as_str().unwrap_or("");
        out.push_str(&format!("  {code}: {}\n", detail.trim()));
    }
    if answer.over_capacity.is_empty() {
        if answer.errors.is_empty() {
            out.push_str("and leave nothing over capacity\n");
        }
        return out;
    }
    out.push_str("and leave over capacity:\n\n");
    let rows = answer.over_capacity.iter().flat_map(|o| {
        let head = [
            format!(
                "{} ({})",
                o.resource_provider.name, o.resource_provider.uuid
            ),
            o.resource_class.clone(),
            o.capacity.to_string(),
            o.used.to_string(),
            o.over.to_string(),
        ];
        let holders = o
            .consumers
            .iter()
            .map(|h| (h.consumer_uuid.to_string(), h.used.to_string()));
        let mut lines = Vec::new();
        for (i, (consumer, used)) in holders.enumerate() {
            let lead = if i == 0 {
                head.clone()
            } else {
                Default::default()
            };
            let [provider, class, capacity, total, over] = lead;
            lines.push([provider, class, capacity, total, over, consumer, used]);
        }
        if lines.is_empty() {
            let [provider, class, capacity, total, over] = head;
            lines.push([
                provider,
                class,
                capacity,
                total,
                over,
                "-".into(),
                "-".into(),
            ]);
        }
        lines
    });
    out.push_str(&table(
        [
            "provider", "class", "capacity", "used", "over", "consumer", "holds",
        ],
        rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_client::dry_run::{Holder, OverCapacity, ProviderName};
    use uuid::Uuid;

    #[test]
    fn a_table_names_each_holder_under_its_class() {
        let request = DryRunRequest {
            method: "PUT".into(),
            path: "/resource_providers/x/inventories/VCPU".into(),
            body: None,
        };
        let answer = DryRun {
            errors: Vec::new(),
            over_capacity: vec![OverCapacity {
                capacity: 16,
                consumers: vec![
                    Holder {
                        consumer_uuid: Uuid::from_u128(1),
                        used: 8,
                    },
                    Holder {
                        consumer_uuid: Uuid::from_u128(2),
                        used: 16,
                    },
                ],
                over: 8,
                resource_class: "VCPU".into(),
                resource_provider: ProviderName {
                    name: "cn1".into(),
                    uuid: Uuid::from_u128(9),
                },
                used: 24,
            }],
            status: 200,
        };
        let text = render(&request, &answer, Format::Table);
        assert!(text.starts_with("PUT /resource_providers/x/inventories/VCPU would answer 200\n"));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[3].starts_with("provider"));
        assert!(
            lines[4].contains("VCPU") && lines[4].contains("00000000-0000-0000-0000-000000000001")
        );
        assert!(!lines[5].contains("VCPU") && lines[5].ends_with("16"));
    }
}
