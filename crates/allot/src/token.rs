//! `allot token add|list|revoke`: the static token file of `allot serve --auth
//! tokens` (format and hashing in `allot_server::auth::tokens`).
//!
//! `add` draws 32 bytes from the OS's random source, prints the token once and
//! stores only its SHA-256; the file is written 0600 through a rename. A running
//! server sees changes after `kill -HUP`. Two commands run at the same moment on one
//! file may lose one's change (each rewrites the whole file): run them one at a time.

use std::path::PathBuf;

use allot_server::auth::tokens::{TokenEntry, TokenFile};
use allot_server::auth::{format_utc, hex, now_unix, parse_utc, token_hash};
use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};

/// `allot token`.
#[derive(Args, Debug)]
pub struct TokenArgs {
    /// The token file (ALLOT_TOKEN_FILE) [default: $XDG_DATA_HOME/allot/tokens.json].
    #[arg(long, value_name = "FILE", global = true)]
    token_file: Option<PathBuf>,

    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Make a new token: prints it once (keep it; only its hash is stored).
    Add(AddArgs),
    /// List the tokens (ids, users, projects, roles, expiry; never a secret).
    List {
        /// Output format: `table` or `json`.
        #[arg(short = 'f', long, default_value = "table")]
        format: String,
    },
    /// Remove a token by its id (see `list`).
    Revoke {
        /// The token's id.
        id: String,
    },
}

#[derive(Args, Debug)]
struct AddArgs {
    /// The user id the token stands for.
    #[arg(long)]
    user: String,
    /// The project id (required unless --system-scope all).
    #[arg(long)]
    project: Option<String>,
    /// A role (repeat for several, or comma-separated): reader, member, admin,
    /// service, ...
    #[arg(long = "role", value_delimiter = ',')]
    roles: Vec<String>,
    /// `all` for a system-scoped token (no project).
    #[arg(long, value_name = "all")]
    system_scope: Option<String>,
    /// When it stops working: a duration (`90d`, `12h`, `30m`, `3600s`) or a UTC
    /// time (`2027-01-01T00:00:00Z`). Never, if left out.
    #[arg(long, value_name = "WHEN")]
    expires: Option<String>,
}

/// Runs `allot token ...`.
pub fn run(args: TokenArgs) -> anyhow::Result<()> {
    let path = args
        .token_file
        .or_else(|| crate::config::process_env("ALLOT_TOKEN_FILE").map(PathBuf::from))
        .unwrap_or_else(|| crate::config::default_token_file(&crate::config::process_env));
    match args.command {
        TokenCommand::Add(add) => {
            let mut file = TokenFile::read_or_empty(&path).map_err(|e| anyhow!(e))?;
            let expires_at = add.expires.as_deref().map(parse_expiry).transpose()?;
            let mut secret = [0u8; 32];
            getrandom::fill(&mut secret).map_err(|e| anyhow!("the OS random source: {e}"))?;
            let token = format!("allot-{}", hex(&secret));
            let mut id_bytes = [0u8; 6];
            getrandom::fill(&mut id_bytes).map_err(|e| anyhow!("the OS random source: {e}"))?;
            let entry = TokenEntry {
                id: hex(&id_bytes),
                sha256: token_hash(&token),
                user: add.user,
                project: add.project,
                roles: add
                    .roles
                    .into_iter()
                    .map(|r| r.trim().to_owned())
                    .filter(|r| !r.is_empty())
                    .collect(),
                system_scope: add.system_scope,
                expires_at: expires_at.map(format_utc),
                created_at: Some(format_utc(now_unix())),
            };
            let id = entry.id.clone();
            file.tokens.push(entry);
            // The same checks the server makes, before anything is written.
            file.check().map_err(|e| anyhow!(e))?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            file.write(&path).map_err(|e| anyhow!(e))?;
            eprintln!(
                "allot: token {id} added to {} (shown once; send it as X-Auth-Token; \
                 `kill -HUP` a running server to load it)",
                path.display()
            );
            println!("{token}");
        }
        TokenCommand::List { format } => {
            let file = TokenFile::read_or_empty(&path).map_err(|e| anyhow!(e))?;
            match format.as_str() {
                "json" => {
                    let rows: Vec<serde_json::Value> = file
                        .tokens
                        .iter()
                        .map(|t| {
                            serde_json::json!({"id": t.id, "user": t.user, "project": t.project,
                                "roles": t.roles, "system_scope": t.system_scope,
                                "expires_at": t.expires_at, "created_at": t.created_at})
                        })
                        .collect();
                    println!("{}", serde_json::to_string_pretty(&rows)?);
                }
                "table" => {
                    println!(
                        "{:<12}  {:<16}  {:<16}  {:<20}  {:<6}  EXPIRES",
                        "ID", "USER", "PROJECT", "ROLES", "SYSTEM"
                    );
                    for t in &file.tokens {
                        println!(
                            "{:<12}  {:<16}  {:<16}  {:<20}  {:<6}  {}",
                            t.id,
                            t.user,
                            t.project.as_deref().unwrap_or("-"),
                            t.roles.join(","),
                            t.system_scope.as_deref().unwrap_or("-"),
                            t.expires_at.as_deref().unwrap_or("never")
                        );
                    }
                }
                other => bail!("unknown format {other:?} (expected table or json)"),
            }
        }
        TokenCommand::Revoke { id } => {
            let mut file = TokenFile::read(&path).map_err(|e| anyhow!(e))?;
            let before = file.tokens.len();
            file.tokens.retain(|t| t.id != id);
            if file.tokens.len() == before {
                bail!("no token with id {id:?} in {}", path.display());
            }
            file.write(&path).map_err(|e| anyhow!(e))?;
            eprintln!("allot: token {id} revoked (`kill -HUP` a running server to drop it)");
        }
    }
    Ok(())
}

/// `90d`, `12h`, `30m`, `3600s` from now, or a UTC time; must be in the future.
fn parse_expiry(text: &str) -> anyhow::Result<i64> {
    let t = text.trim();
    let now = now_unix();
    let at = if let Some(at) = parse_utc(t) {
        at
    } else {
        let split = t
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| anyhow!("--expires {t:?}: add a unit (s, m, h, d)"))?;
        let (n, unit) = t.split_at(split);
        let n: i64 = n
            .parse()
            .map_err(|_| anyhow!("--expires {t:?}: expected e.g. 90d or 2027-01-01T00:00:00Z"))?;
        let scale = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => bail!("--expires {t:?}: the unit must be s, m, h or d"),
        };
        n.checked_mul(scale)
            .and_then(|d| d.checked_add(now))
            .ok_or_else(|| anyhow!("--expires {t:?} is too far away"))?
    };
    if at <= now {
        bail!("--expires {t:?} is not in the future");
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_forms() {
        let now = now_unix();
        let d = parse_expiry("2d").unwrap() - now;
        assert!((172_799..=172_801).contains(&d), "{d}");
        assert_eq!(
            parse_expiry("2999-01-01T00:00:00Z").unwrap(),
            parse_utc("2999-01-01T00:00:00Z").unwrap()
        );
        for bad in [
            "",
            "5",
            "5y",
            "2000-01-01T00:00:00Z",
            "-5d",
            "99999999999999999999d",
        ] {
            assert!(parse_expiry(bad).is_err(), "{bad}");
        }
    }
}
