//! `allot serve` settings: flags and environment variables (by clap), an optional TOML
//! file, defaults; merged in that order of precedence into validated [`Settings`].

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

/// Flags of `allot serve`. Every flag also reads an `ALLOT_*` environment variable.
#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// Address and port to listen on [default: 127.0.0.1:8778, Placement's port].
    #[arg(long, env = "ALLOT_BIND", value_name = "HOST:PORT")]
    pub bind: Option<String>,

    /// Database URL: `sqlite:PATH` (created on first start) [default:
    /// sqlite:$XDG_DATA_HOME/allot/allot.db, i.e. ~/.local/share/allot/allot.db].
    #[arg(long, env = "ALLOT_DATABASE", value_name = "URL")]
    pub database: Option<String>,

    /// TOML file with any of these settings (keys: bind, database, log, policy,
    /// cors_allowed_origins, cors_allow_headers, randomize_allocation_candidates,
    /// max_allocation_candidates). Flags and environment variables win over it.
    #[arg(long, env = "ALLOT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Enable CORS for this origin (repeat for several; `*` for any). Off by default.
    #[arg(
        long = "cors-allowed-origin",
        env = "ALLOT_CORS_ALLOWED_ORIGINS",
        value_delimiter = ',',
        value_name = "ORIGIN"
    )]
    pub cors_allowed_origins: Vec<String>,

    /// With CORS on: a request header a browser may send (repeatable).
    #[arg(
        long = "cors-allow-header",
        env = "ALLOT_CORS_ALLOW_HEADERS",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub cors_allow_headers: Vec<String>,

    /// Authorization rules: `legacy` (Placement's default: admin or service role for
    /// everything), `secure` (Placement's new defaults), or `open` (anyone with a token;
    /// for testing only) [default: legacy].
    #[arg(long, env = "ALLOT_POLICY", value_name = "MODE")]
    pub policy: Option<String>,

    /// Log filter (tracing's EnvFilter syntax; ALLOT_LOG overrides) [default: info].
    #[arg(long, value_name = "FILTER")]
    pub log: Option<String>,

    /// Answer GET /allocation_candidates with a random sample of the candidates
    /// (gathered round-robin over the matching trees, up to
    /// --max-allocation-candidates) instead of their deterministic order, like
    /// Placement's randomize_allocation_candidates [default: false].
    #[arg(
        long,
        env = "ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub randomize_allocation_candidates: Option<bool>,

    /// The most candidates one GET /allocation_candidates generates; a request's
    /// `limit` applies within it, and a request without `limit` gets at most this
    /// many [default: 100000].
    #[arg(long, env = "ALLOT_MAX_ALLOCATION_CANDIDATES", value_name = "N")]
    pub max_allocation_candidates: Option<usize>,
}

/// The optional TOML file.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    bind: Option<String>,
    database: Option<String>,
    log: Option<String>,
    policy: Option<String>,
    #[serde(default)]
    cors_allowed_origins: Vec<String>,
    #[serde(default)]
    cors_allow_headers: Vec<String>,
    randomize_allocation_candidates: Option<bool>,
    max_allocation_candidates: Option<usize>,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bind: String,
    pub database: String,
    pub log: String,
    pub policy: allot_server::PolicyMode,
    pub cors: Option<allot_server::Cors>,
    pub randomize_allocation_candidates: bool,
    pub max_allocation_candidates: usize,
}

fn default_database() -> String {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    format!("sqlite:{}", base.join("allot").join("allot.db").display())
}

impl ServeArgs {
    /// Merges flags, environment, file and defaults.
    pub fn resolve(self) -> anyhow::Result<Settings> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str::<FileSettings>(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?
            }
            None => FileSettings::default(),
        };
        let pick_list = |cli: Vec<String>, file: Vec<String>| {
            let list: Vec<String> = if cli.is_empty() { file } else { cli };
            list.into_iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        };
        let origins = pick_list(self.cors_allowed_origins, file.cors_allowed_origins);
        let headers = pick_list(self.cors_allow_headers, file.cors_allow_headers);
        let max_allocation_candidates = self
            .max_allocation_candidates
            .or(file.max_allocation_candidates)
            .unwrap_or(allot_core::candidates::DEFAULT_MAX_CANDIDATES);
        if max_allocation_candidates == 0 {
            anyhow::bail!("max_allocation_candidates must be at least 1");
        }
        let policy = self
            .policy
            .or(file.policy)
            .unwrap_or_else(|| "legacy".into());
        Ok(Settings {
            bind: self
                .bind
                .or(file.bind)
                .unwrap_or_else(|| "127.0.0.1:8778".into()),
            database: self
                .database
                .or(file.database)
                .unwrap_or_else(default_database),
            log: self.log.or(file.log).unwrap_or_else(|| "info".into()),
            policy: policy.parse().map_err(anyhow::Error::msg)?,
            cors: (!origins.is_empty()).then_some(allot_server::Cors {
                allowed_origins: origins,
                allow_headers: headers,
            }),
            randomize_allocation_candidates: self
                .randomize_allocation_candidates
                .or(file.randomize_allocation_candidates)
                .unwrap_or(false),
            max_allocation_candidates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.toml");
        std::fs::write(
            &path,
            "bind = \"0.0.0.0:1\"\ndatabase = \"sqlite:/x.db\"\npolicy = \"open\"\n",
        )
        .unwrap();
        let args = ServeArgs {
            bind: Some("127.0.0.1:2".into()),
            config: Some(path),
            ..Default::default()
        };
        let s = args.resolve().unwrap();
        assert_eq!(s.bind, "127.0.0.1:2");
        assert_eq!(s.database, "sqlite:/x.db");
        assert_eq!(s.policy, allot_server::PolicyMode::Open);
        assert!(s.cors.is_none());
    }

    #[test]
    fn candidate_settings() {
        let s = ServeArgs::default().resolve().unwrap();
        assert!(!s.randomize_allocation_candidates);
        assert_eq!(
            s.max_allocation_candidates,
            allot_core::candidates::DEFAULT_MAX_CANDIDATES
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.toml");
        std::fs::write(
            &path,
            "randomize_allocation_candidates = true\nmax_allocation_candidates = 500\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(path),
            max_allocation_candidates: Some(20),
            ..Default::default()
        };
        let s = args.resolve().unwrap();
        assert!(s.randomize_allocation_candidates);
        assert_eq!(s.max_allocation_candidates, 20);
        let zero = ServeArgs {
            max_allocation_candidates: Some(0),
            ..Default::default()
        };
        assert!(zero.resolve().is_err());
    }

    #[test]
    fn unknown_file_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.toml");
        std::fs::write(&path, "bnd = \"x\"\n").unwrap();
        let args = ServeArgs {
            config: Some(path),
            ..Default::default()
        };
        assert!(args.resolve().is_err());
    }
}
