//! `allot status`: one screen on one or several running allot nodes, from each
//! node's `GET /status` (allot-client's `Status`): the build, the store and schema,
//! health, the view's lag behind the store, what the view holds, and since the start
//! the request count, rate and p99 and the claims accepted and refused. Several
//! `--url`s show each node of a deployment in turn; a node that does not answer is
//! shown as such and makes the exit status 1.

use allot_client::{Client, Config, Status};
use clap::Args;

use crate::classes::Format;

/// `allot status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// A node's endpoint (repeat, or separate with commas, for several nodes).
    #[arg(
        long,
        env = "ALLOT_URL",
        default_value = "http://127.0.0.1:8778",
        value_delimiter = ','
    )]
    url: Vec<String>,
    /// The token: one the `allot:metrics` rule allows (the admin or `metrics` role;
    /// `USER[:PROJECT]` under noauth2, `admin` is an admin).
    #[arg(long, env = "ALLOT_TOKEN", default_value = "admin")]
    token: String,
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// `allot status`.
pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut answers = Vec::new();
    for url in &args.url {
        let url = url.trim_end_matches('/').to_owned();
        let config = Config {
            token: args.token.clone(),
            ..Config::new(url.clone())
        };
        let status = Client::new(&config)
            .map_err(anyhow::Error::from)
            .and_then(|client| runtime.block_on(client.status()).map_err(Into::into));
        answers.push((url, status));
    }
    let failed = answers.iter().any(|(_, s)| s.is_err());
    match args.format {
        Format::Json => {
            let nodes: Vec<serde_json::Value> = answers
                .iter()
                .map(|(url, s)| match s {
                    Ok(s) => serde_json::json!({"url": url, "status": s}),
                    Err(e) => serde_json::json!({"url": url, "error": format!("{e:#}")}),
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&nodes)?);
        }
        Format::Table => {
            let screens: Vec<String> = answers
                .iter()
                .map(|(url, s)| match s {
                    Ok(s) => screen(url, s),
                    Err(e) => format!("{url}\n  not answering: {e:#}\n"),
                })
                .collect();
            print!("{}", screens.join("\n"));
        }
    }
    if failed {
        anyhow::bail!("a node did not answer");
    }
    Ok(())
}

/// One node's screen.
fn screen(url: &str, s: &Status) -> String {
    let health = if s.health.healthy {
        "OK".to_owned()
    } else {
        format!("FAILING: {}", s.health.reasons.join(", "))
    };
    let nodes = if s.store.shared {
        "shared with other nodes"
    } else {
        "this node alone"
    };
    let p99 = s
        .requests
        .p99_ms
        .map_or("-".to_owned(), |ms| format!("{ms:.1} ms"));
    format!(
        "allot {} at {url}, up {}\n\
         \x20 health          {health}\n\
         \x20 store           {}, schema {}, {nodes}\n\
         \x20 view lag        {:.3} s\n\
         \x20 providers       {}\n\
         \x20 consumers       {}\n\
         \x20 pending claims  {}\n\
         \x20 requests        {} since start, {:.1}/s, p99 {p99}\n\
         \x20 claims          {} accepted, {} refused\n",
        s.version,
        duration(s.uptime_seconds),
        s.store.engine,
        s.store.schema,
        s.view_lag_seconds,
        s.counts.providers,
        s.counts.consumers,
        s.counts.claims_pending,
        s.requests.total,
        s.requests.per_second,
        s.claims.accepted,
        s.claims.refused,
    )
}

/// Seconds as `2 d 3 h`, `3 h 4 min`, `4 min 5 s` or `5 s`.
fn duration(seconds: f64) -> String {
    let s = seconds as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec} s"),
        (0, 0, _) => format!("{m} min {sec} s"),
        (0, _, _) => format!("{h} h {m} min"),
        _ => format!("{d} d {h} h"),
    }
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(duration(5.9), "5 s");
        assert_eq!(duration(245.0), "4 min 5 s");
        assert_eq!(duration(3.0 * 3600.0 + 240.0), "3 h 4 min");
        assert_eq!(duration(2.0 * 86_400.0 + 3.0 * 3600.0 + 7.0), "2 d 3 h");
    }
}
