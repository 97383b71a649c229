//! `allot serve` settings, merged from four sources into validated [`Settings`].
//!
//! Precedence, for every setting alike: the flag, then its `ALLOT_*` environment
//! variable, then the TOML file (`--config`/`ALLOT_CONFIG`), then the default. clap
//! parses the flags; the environment and the file are read here rather than by clap's
//! `env` attribute, so that a bad value's error can say where it came from (clap's
//! errors name the flag even when the value came from the environment), and so that the
//! merge can be unit-tested with an environment that is not the process's.
//!
//! Settings are typed at the edge: `--bind` is a [`SocketAddr`], `--policy` a
//! [`Policy`], numbers and booleans are parsed, and the log filter is checked, whatever
//! the source. A value that does not parse is an error naming its source (`--bind`,
//! `ALLOT_BIND`, `config file PATH`), never a silent fallback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use serde::Deserialize;

/// The authorization rules, as `--policy` takes them: a mirror of
/// [`allot_server::PolicyMode`], which knows nothing of clap or serde.
#[derive(ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Placement 16's current rules only, what it enforces out of the box
    /// (oslo.policy's enforce_new_defaults = True): the reshaper needs the `service`
    /// role
    Secure,
    /// The current rules or their deprecated `role:admin` (enforce_new_defaults =
    /// False): admin may do everything
    Legacy,
    /// Anyone with a token, except the `admin_api` rule (for testing only)
    Open,
}

impl From<Policy> for allot_server::PolicyMode {
    fn from(p: Policy) -> Self {
        match p {
            Policy::Secure => allot_server::PolicyMode::Secure,
            Policy::Legacy => allot_server::PolicyMode::Legacy,
            Policy::Open => allot_server::PolicyMode::Open,
        }
    }
}

/// Who the caller is, as `--auth` takes it.
#[derive(ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Placement's test mode: X-Auth-Token USER[:PROJECT] is believed (loopback only
    /// unless --insecure-noauth)
    Noauth2,
    /// A static file of hashed tokens (--token-file; `allot token add` makes them)
    Tokens,
    /// Tokens validated by OpenStack Keystone (--keystone-url and allot's service
    /// credentials)
    Keystone,
}

/// The default mode: the one Placement 16 enforces as installed from PyPI.
pub const DEFAULT_POLICY: Policy = Policy::Secure;
/// The default address: Placement's port, on loopback.
pub const DEFAULT_BIND: &str = "127.0.0.1:8778";
/// The default log filter.
pub const DEFAULT_LOG: &str = "info";
/// The default interval of the claim sweeper, in seconds.
pub const DEFAULT_CLAIM_SWEEP_INTERVAL: u64 = 30;

/// Flags of `allot serve`. Every flag has an `ALLOT_*` environment variable (named in
/// its help), read in [`ServeArgs::resolve`].
#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// Address and port to listen on (ALLOT_BIND) [default: 127.0.0.1:8778,
    /// Placement's port].
    #[arg(long, value_name = "IP:PORT")]
    pub bind: Option<SocketAddr>,

    /// Database URL: `sqlite:PATH`, created on first start (ALLOT_DATABASE) [default:
    /// sqlite:$XDG_DATA_HOME/allot/allot.db, i.e. ~/.local/share/allot/allot.db].
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,

    /// TOML file with any of these settings (ALLOT_CONFIG; keys: bind, database, log,
    /// policy, policy_file, auth, insecure_noauth, token_file, keystone_url, keystone_user,
    /// keystone_password, keystone_project, keystone_domain, token_cache_ttl,
    /// cors_allowed_origins, cors_allow_headers,
    /// randomize_allocation_candidates, max_allocation_candidates, claim_expires_in,
    /// claim_retention, claim_sweep_interval). Flags and environment variables win
    /// over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Enable CORS for this origin (repeat for several; `*` for any)
    /// (ALLOT_CORS_ALLOWED_ORIGINS, comma-separated). Off by default.
    #[arg(
        long = "cors-allowed-origin",
        value_delimiter = ',',
        value_name = "ORIGIN"
    )]
    pub cors_allowed_origins: Vec<String>,

    /// With CORS on: a request header a browser may send (repeatable)
    /// (ALLOT_CORS_ALLOW_HEADERS, comma-separated).
    #[arg(long = "cors-allow-header", value_delimiter = ',', value_name = "NAME")]
    pub cors_allow_headers: Vec<String>,

    /// Authorization rules (ALLOT_POLICY) [default: secure, as Placement 16 enforces
    /// out of the box; `legacy` lets an admin token without the `service` role
    /// reshape].
    #[arg(long, value_enum, value_name = "MODE")]
    pub policy: Option<Policy>,

    /// An oslo.policy file whose rules replace the built-in ones they name
    /// (`"placement:resource_providers:list": "role:reader or role:admin"`), reread on
    /// SIGHUP (ALLOT_POLICY_FILE) [default: none].
    #[arg(long, value_name = "FILE")]
    pub policy_file: Option<PathBuf>,

    /// How callers are authenticated (ALLOT_AUTH) [default: noauth2, which is refused
    /// on an address other than loopback without --insecure-noauth].
    #[arg(long, value_enum, value_name = "MODE")]
    pub auth: Option<AuthMode>,

    /// Allow --auth noauth2 on an address other than loopback: anyone who can reach
    /// it is whoever they claim to be (ALLOT_INSECURE_NOAUTH) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub insecure_noauth: Option<bool>,

    /// With --auth tokens: the token file, JSON, managed by `allot token`
    /// (ALLOT_TOKEN_FILE) [default: $XDG_DATA_HOME/allot/tokens.json].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// With --auth keystone: the Identity endpoint, http://HOST:PORT[/PATH]
    /// (ALLOT_KEYSTONE_URL).
    #[arg(long, value_name = "URL")]
    pub keystone_url: Option<String>,

    /// With --auth keystone: allot's service user (ALLOT_KEYSTONE_USER) [default:
    /// placement].
    #[arg(long, value_name = "NAME")]
    pub keystone_user: Option<String>,

    /// With --auth keystone: the service user's password (ALLOT_KEYSTONE_PASSWORD;
    /// prefer the variable or the config file to the flag, which other users see).
    #[arg(long, value_name = "PASSWORD")]
    pub keystone_password: Option<String>,

    /// With --auth keystone: the project allot's token is scoped to
    /// (ALLOT_KEYSTONE_PROJECT) [default: service].
    #[arg(long, value_name = "NAME")]
    pub keystone_project: Option<String>,

    /// With --auth keystone: the domain of the user and of the project, by name
    /// (ALLOT_KEYSTONE_DOMAIN) [default: Default].
    #[arg(long, value_name = "NAME")]
    pub keystone_domain: Option<String>,

    /// With --auth keystone: how long a validated token is cached, in seconds; never
    /// past its expiry; 0 turns the cache off (ALLOT_TOKEN_CACHE_TTL) [default: 300].
    #[arg(long, value_name = "SECONDS")]
    pub token_cache_ttl: Option<u64>,

    /// Log filter, in tracing's EnvFilter syntax (ALLOT_LOG) [default: info].
    #[arg(long, value_name = "FILTER")]
    pub log: Option<String>,

    /// Answer GET /allocation_candidates with a random sample of the candidates
    /// (gathered round-robin over the matching trees, up to
    /// --max-allocation-candidates) instead of their deterministic order, like
    /// Placement's randomize_allocation_candidates
    /// (ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES) [default: false].
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub randomize_allocation_candidates: Option<bool>,

    /// The most candidates one GET /allocation_candidates generates; a request's
    /// `limit` applies within it, and a request without `limit` gets at most this
    /// many (ALLOT_MAX_ALLOCATION_CANDIDATES) [default: 100000].
    #[arg(long, value_name = "N")]
    pub max_allocation_candidates: Option<usize>,

    /// How long a pending claim lasts when its POST /claims leaves `expires_in` out,
    /// in seconds (ALLOT_CLAIM_EXPIRES_IN) [default: 600].
    #[arg(long, value_name = "SECONDS")]
    pub claim_expires_in: Option<u64>,

    /// How long an ended claim (confirmed, released, expired) is kept before the
    /// sweeper forgets it, in seconds (ALLOT_CLAIM_RETENTION) [default: 86400].
    #[arg(long, value_name = "SECONDS")]
    pub claim_retention: Option<u64>,

    /// How often the sweeper runs, in seconds (ALLOT_CLAIM_SWEEP_INTERVAL) [default:
    /// 30]. Expiry itself is exact whatever this is: the sweeper only tidies up.
    #[arg(long, value_name = "SECONDS")]
    pub claim_sweep_interval: Option<u64>,
}

/// The optional TOML file, typed like the flags (serde names the bad key and line).
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    bind: Option<SocketAddr>,
    database: Option<String>,
    log: Option<String>,
    policy: Option<Policy>,
    policy_file: Option<PathBuf>,
    auth: Option<AuthMode>,
    insecure_noauth: Option<bool>,
    token_file: Option<PathBuf>,
    keystone_url: Option<String>,
    keystone_user: Option<String>,
    keystone_password: Option<String>,
    keystone_project: Option<String>,
    keystone_domain: Option<String>,
    token_cache_ttl: Option<u64>,
    #[serde(default)]
    cors_allowed_origins: Vec<String>,
    #[serde(default)]
    cors_allow_headers: Vec<String>,
    randomize_allocation_candidates: Option<bool>,
    max_allocation_candidates: Option<usize>,
    claim_expires_in: Option<u64>,
    claim_retention: Option<u64>,
    claim_sweep_interval: Option<u64>,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bind: SocketAddr,
    pub database: String,
    pub log: String,
    pub policy: allot_server::PolicyMode,
    pub policy_file: Option<PathBuf>,
    pub auth: Auth,
    pub cors: Option<allot_server::Cors>,
    pub randomize_allocation_candidates: bool,
    pub max_allocation_candidates: usize,
    /// Seconds.
    pub claim_expires_in: i64,
    /// Seconds.
    pub claim_retention: i64,
    pub claim_sweep_interval: std::time::Duration,
}

/// How callers are authenticated, with what each mode needs.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Placement's `noauth2`.
    NoAuth2,
    /// The static token file.
    Tokens(PathBuf),
    /// Keystone.
    Keystone(allot_server::auth::keystone::KeystoneConfig),
}

/// The default token file: beside the default database.
pub fn default_token_file(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    data_dir(env).join("allot").join("tokens.json")
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Flag(&'static str),
    Env(&'static str),
    File(PathBuf),
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(name) => write!(f, "{name}"),
            Source::Env(name) => write!(f, "environment variable {name}"),
            Source::File(path) => write!(f, "config file {}", path.display()),
            Source::Default => write!(f, "the default"),
        }
    }
}

/// The process environment as [`ServeArgs::resolve_with`] reads it: a variable set to
/// the empty string counts as unset (as clap's `env` did).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn data_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    env("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."))
}

fn default_database(env: &dyn Fn(&str) -> Option<String>) -> String {
    let base = data_dir(env);
    format!("sqlite:{}", base.join("allot").join("allot.db").display())
}

/// Booleans from the environment: what clap accepts for the flag, plus the usual
/// spellings of shell variables.
fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("invalid boolean {s:?} (expected true or false)")),
    }
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::from_str(s.trim(), false).map_err(|_| {
        let names: Vec<String> = Policy::value_variants()
            .iter()
            .filter_map(|p| p.to_possible_value().map(|v| v.get_name().to_owned()))
            .collect();
        format!(
            "invalid policy mode {s:?} (expected one of: {})",
            names.join(", ")
        )
    })
}

fn parse_auth(s: &str) -> Result<AuthMode, String> {
    AuthMode::from_str(s.trim(), false).map_err(|_| {
        format!("invalid authentication mode {s:?} (expected one of: noauth2, tokens, keystone)")
    })
}

fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse().map_err(|_| {
        format!("invalid address {s:?} (expected IP:PORT, e.g. 127.0.0.1:8778 or [::1]:8778)")
    })
}

fn parse_count(s: &str) -> Result<usize, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("invalid number {s:?} (expected a positive integer)"))
}

fn parse_seconds(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("invalid number of seconds {s:?} (expected a whole number)"))
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',').map(str::to_owned).collect()
}

/// Checks a log filter the way the subscriber will read it.
fn check_log_filter(filter: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::try_new(filter)
        .map(drop)
        .map_err(|e| format!("invalid log filter {filter:?}: {e}"))
}

/// The merge of one setting: the first of flag, environment, file, default that is
/// present, with its source.
struct Merge<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    file: Option<&'a Path>,
}

impl Merge<'_> {
    fn pick<T>(
        &self,
        flag: (&'static str, Option<T>),
        var: &'static str,
        parse: impl Fn(&str) -> Result<T, String>,
        file: Option<T>,
        default: impl FnOnce() -> T,
    ) -> anyhow::Result<(T, Source)> {
        if let Some(v) = flag.1 {
            return Ok((v, Source::Flag(flag.0)));
        }
        if let Some(raw) = (self.env)(var) {
            let v = parse(&raw).map_err(|e| anyhow!("{}: {e}", Source::Env(var)))?;
            return Ok((v, Source::Env(var)));
        }
        if let (Some(v), Some(path)) = (file, self.file) {
            return Ok((v, Source::File(path.to_owned())));
        }
        Ok((default(), Source::Default))
    }

    /// Lists: the first source that gives a non-empty list wins (items trimmed, empty
    /// items dropped).
    fn pick_list(&self, flag: Vec<String>, var: &'static str, file: Vec<String>) -> Vec<String> {
        let clean = |list: Vec<String>| -> Vec<String> {
            list.into_iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let flag = clean(flag);
        if !flag.is_empty() {
            return flag;
        }
        let env = clean((self.env)(var).map(|v| split_list(&v)).unwrap_or_default());
        if !env.is_empty() {
            return env;
        }
        clean(file)
    }
}

/// The authentication settings of one source (flags or file).
struct AuthFlags {
    auth: Option<AuthMode>,
    insecure_noauth: Option<bool>,
    token_file: Option<PathBuf>,
    keystone_url: Option<String>,
    keystone_user: Option<String>,
    keystone_password: Option<String>,
    keystone_project: Option<String>,
    keystone_domain: Option<String>,
    token_cache_ttl: Option<u64>,
}

impl Merge<'_> {
    /// The authentication mode and what it needs; refuses `noauth2` on an address
    /// other than loopback unless `insecure_noauth` says so.
    fn resolve_auth(
        &self,
        flags: AuthFlags,
        file: AuthFlags,
        bind: SocketAddr,
    ) -> anyhow::Result<Auth> {
        let (mode, mode_source) = self.pick(
            ("--auth", flags.auth),
            "ALLOT_AUTH",
            parse_auth,
            file.auth,
            || AuthMode::Noauth2,
        )?;
        let (insecure, _) = self.pick(
            ("--insecure-noauth", flags.insecure_noauth),
            "ALLOT_INSECURE_NOAUTH",
            parse_bool,
            file.insecure_noauth,
            || false,
        )?;
        let text = |s: &str| Ok(s.to_owned());
        match mode {
            AuthMode::Noauth2 => {
                if !bind.ip().is_loopback() && !insecure {
                    let how = match mode_source {
                        Source::Default => "noauth2 (the default)".to_owned(),
                        source => format!("noauth2 (from {source})"),
                    };
                    anyhow::bail!(
                        "refusing to listen on {bind} with authentication mode {how}: in \
                         noauth2 every caller is whoever its X-Auth-Token says (`admin` is \
                         the admin), so anyone who can reach {bind} could read and change \
                         everything. Use --auth tokens or --auth keystone, listen on \
                         loopback (127.0.0.1 or ::1), or, on a network you trust \
                         completely, pass --insecure-noauth."
                    );
                }
                Ok(Auth::NoAuth2)
            }
            AuthMode::Tokens => {
                let (path, _) = self.pick(
                    ("--token-file", flags.token_file),
                    "ALLOT_TOKEN_FILE",
                    |s| Ok(PathBuf::from(s)),
                    file.token_file,
                    || default_token_file(self.env),
                )?;
                Ok(Auth::Tokens(path))
            }
            AuthMode::Keystone => {
                let (url, _) = self.pick(
                    ("--keystone-url", flags.keystone_url),
                    "ALLOT_KEYSTONE_URL",
                    text,
                    file.keystone_url,
                    String::new,
                )?;
                if url.trim().is_empty() {
                    anyhow::bail!(
                        "--auth keystone needs the Identity endpoint: --keystone-url, \
                         ALLOT_KEYSTONE_URL or keystone_url in the config file"
                    );
                }
                let (user, _) = self.pick(
                    ("--keystone-user", flags.keystone_user),
                    "ALLOT_KEYSTONE_USER",
                    text,
                    file.keystone_user,
                    || "placement".to_owned(),
                )?;
                let (password, _) = self.pick(
                    ("--keystone-password", flags.keystone_password),
                    "ALLOT_KEYSTONE_PASSWORD",
                    text,
                    file.keystone_password,
                    String::new,
                )?;
                if password.is_empty() {
                    anyhow::bail!(
                        "--auth keystone needs allot's service password: \
                         ALLOT_KEYSTONE_PASSWORD or keystone_password in the config file"
                    );
                }
                let (project, _) = self.pick(
                    ("--keystone-project", flags.keystone_project),
                    "ALLOT_KEYSTONE_PROJECT",
                    text,
                    file.keystone_project,
                    || "service".to_owned(),
                )?;
                let (domain, _) = self.pick(
                    ("--keystone-domain", flags.keystone_domain),
                    "ALLOT_KEYSTONE_DOMAIN",
                    text,
                    file.keystone_domain,
                    || "Default".to_owned(),
                )?;
                let (ttl, _) = self.pick(
                    ("--token-cache-ttl", flags.token_cache_ttl),
                    "ALLOT_TOKEN_CACHE_TTL",
                    parse_seconds,
                    file.token_cache_ttl,
                    || allot_server::auth::keystone::DEFAULT_CACHE_TTL.as_secs(),
                )?;
                let mut config = allot_server::auth::keystone::KeystoneConfig::new(
                    &url, &user, &password, &project,
                );
                config.user_domain_name = domain.clone();
                config.project_domain_name = domain;
                config.cache_ttl = std::time::Duration::from_secs(ttl);
                // Checked here, so that a bad URL stops the start with its reason.
                allot_server::auth::keystone::Keystone::new(config.clone())
                    .map_err(|e| anyhow!("--auth keystone: {e}"))?;
                Ok(Auth::Keystone(config))
            }
        }
    }
}

impl ServeArgs {
    /// Merges flags, the process environment, the file and the defaults.
    pub fn resolve(self) -> anyhow::Result<Settings> {
        self.resolve_with(&process_env)
    }

    /// [`ServeArgs::resolve`] with `env` standing for the environment (unset and empty
    /// variables are `None`).
    pub fn resolve_with(self, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Settings> {
        let config = self
            .config
            .clone()
            .or_else(|| env("ALLOT_CONFIG").map(PathBuf::from));
        let file = match &config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str::<FileSettings>(&text)
                    .with_context(|| format!("config file {}", path.display()))?
            }
            None => FileSettings::default(),
        };
        let m = Merge {
            env,
            file: config.as_deref(),
        };

        let (bind, _) = m.pick(
            ("--bind", self.bind),
            "ALLOT_BIND",
            parse_bind,
            file.bind,
            || DEFAULT_BIND.parse().expect("the default address parses"),
        )?;
        let (database, source) = m.pick(
            ("--database", self.database),
            "ALLOT_DATABASE",
            |s| Ok(s.to_owned()),
            file.database,
            || default_database(env),
        )?;
        if database.trim().is_empty() {
            anyhow::bail!("{source}: the database URL is empty");
        }
        let (log, source) = m.pick(
            ("--log", self.log),
            "ALLOT_LOG",
            |s| Ok(s.to_owned()),
            file.log,
            || DEFAULT_LOG.to_owned(),
        )?;
        check_log_filter(&log).map_err(|e| anyhow!("{source}: {e}"))?;
        let (policy, _) = m.pick(
            ("--policy", self.policy),
            "ALLOT_POLICY",
            parse_policy,
            file.policy,
            || DEFAULT_POLICY,
        )?;
        // An empty ALLOT_POLICY_FILE means none, so that a wrapper can clear it.
        let (policy_file, _) = m.pick(
            ("--policy-file", self.policy_file.map(Some)),
            "ALLOT_POLICY_FILE",
            |s| Ok((!s.trim().is_empty()).then(|| PathBuf::from(s))),
            file.policy_file.map(Some),
            || None,
        )?;
        let origins = m.pick_list(
            self.cors_allowed_origins,
            "ALLOT_CORS_ALLOWED_ORIGINS",
            file.cors_allowed_origins,
        );
        let headers = m.pick_list(
            self.cors_allow_headers,
            "ALLOT_CORS_ALLOW_HEADERS",
            file.cors_allow_headers,
        );
        let (randomize_allocation_candidates, _) = m.pick(
            (
                "--randomize-allocation-candidates",
                self.randomize_allocation_candidates,
            ),
            "ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES",
            parse_bool,
            file.randomize_allocation_candidates,
            || false,
        )?;
        let (max_allocation_candidates, source) = m.pick(
            (
                "--max-allocation-candidates",
                self.max_allocation_candidates,
            ),
            "ALLOT_MAX_ALLOCATION_CANDIDATES",
            parse_count,
            file.max_allocation_candidates,
            || allot_core::candidates::DEFAULT_MAX_CANDIDATES,
        )?;
        if max_allocation_candidates == 0 {
            anyhow::bail!("{source}: max_allocation_candidates must be at least 1");
        }
        let (claim_expires_in, source) = m.pick(
            ("--claim-expires-in", self.claim_expires_in),
            "ALLOT_CLAIM_EXPIRES_IN",
            parse_seconds,
            file.claim_expires_in,
            || allot_server::DEFAULT_CLAIM_EXPIRES_IN as u64,
        )?;
        // The bounds a request's own `expires_in` has.
        let max_expiry = allot_server::schemas::MAX_CLAIM_EXPIRES_IN as u64;
        if !(1..=max_expiry).contains(&claim_expires_in) {
            anyhow::bail!("{source}: claim_expires_in must be from 1 to {max_expiry} seconds");
        }
        let (claim_retention, source) = m.pick(
            ("--claim-retention", self.claim_retention),
            "ALLOT_CLAIM_RETENTION",
            parse_seconds,
            file.claim_retention,
            || allot_server::DEFAULT_CLAIM_RETENTION as u64,
        )?;
        if claim_retention > max_expiry {
            anyhow::bail!("{source}: claim_retention must be at most {max_expiry} seconds");
        }
        let (claim_sweep_interval, source) = m.pick(
            ("--claim-sweep-interval", self.claim_sweep_interval),
            "ALLOT_CLAIM_SWEEP_INTERVAL",
            parse_seconds,
            file.claim_sweep_interval,
            || DEFAULT_CLAIM_SWEEP_INTERVAL,
        )?;
        if !(1..=max_expiry).contains(&claim_sweep_interval) {
            anyhow::bail!("{source}: claim_sweep_interval must be from 1 to {max_expiry} seconds");
        }

        let auth = m.resolve_auth(
            AuthFlags {
                auth: self.auth,
                insecure_noauth: self.insecure_noauth,
                token_file: self.token_file,
                keystone_url: self.keystone_url,
                keystone_user: self.keystone_user,
                keystone_password: self.keystone_password,
                keystone_project: self.keystone_project,
                keystone_domain: self.keystone_domain,
                token_cache_ttl: self.token_cache_ttl,
            },
            AuthFlags {
                auth: file.auth,
                insecure_noauth: file.insecure_noauth,
                token_file: file.token_file,
                keystone_url: file.keystone_url,
                keystone_user: file.keystone_user,
                keystone_password: file.keystone_password,
                keystone_project: file.keystone_project,
                keystone_domain: file.keystone_domain,
                token_cache_ttl: file.token_cache_ttl,
            },
            bind,
        )?;

        Ok(Settings {
            bind,
            database,
            log,
            policy: policy.into(),
            policy_file,
            auth,
            cors: (!origins.is_empty()).then_some(allot_server::Cors {
                allowed_origins: origins,
                allow_headers: headers,
            }),
            randomize_allocation_candidates,
            max_allocation_candidates,
            claim_expires_in: claim_expires_in as i64,
            claim_retention: claim_retention as i64,
            claim_sweep_interval: std::time::Duration::from_secs(claim_sweep_interval),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use allot_server::PolicyMode;
    use clap::Parser;

    use super::*;

    #[test]
    fn the_binary_and_the_server_default_to_one_policy() {
        assert_eq!(PolicyMode::from(DEFAULT_POLICY), PolicyMode::default());
    }

    /// `allot serve ARGS...` as clap parses it.
    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn args(argv: &[&str]) -> ServeArgs {
        let mut full = vec!["allot"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).expect("flags parse").serve
    }

    /// Resolves `argv` with exactly the variables in `env` and, if given, a config
    /// file with `file` as its text.
    fn resolve(
        argv: &[&str],
        env: &[(&str, &str)],
        file: Option<&str>,
    ) -> anyhow::Result<Settings> {
        let dir = tempfile::tempdir().unwrap();
        let mut env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        env.insert("HOME".into(), "/home/test".into());
        if let Some(text) = file {
            let path = dir.path().join("allot.toml");
            std::fs::write(&path, text).unwrap();
            env.insert("ALLOT_CONFIG".into(), path.display().to_string());
        }
        let lookup = move |k: &str| env.get(k).filter(|v| !v.is_empty()).cloned();
        args(argv).resolve_with(&lookup)
    }

    /// One setting's precedence: with all sources present the flag wins; without the
    /// flag the variable; without both the file; without any the default.
    fn precedence<T: PartialEq + std::fmt::Debug>(
        flag: [&str; 2],
        var: (&str, &str),
        file: &str,
        get: impl Fn(&Settings) -> T,
        expected: [T; 4],
    ) {
        let [from_flag, from_env, from_file, default] = expected;
        let s = resolve(&flag, &[var], Some(file)).unwrap();
        assert_eq!(get(&s), from_flag, "flag over variable and file");
        let s = resolve(&[], &[var], Some(file)).unwrap();
        assert_eq!(get(&s), from_env, "variable over file");
        let s = resolve(&[], &[], Some(file)).unwrap();
        assert_eq!(get(&s), from_file, "file over default");
        let s = resolve(&[], &[], None).unwrap();
        assert_eq!(get(&s), default, "default");
    }

    #[test]
    fn bind_precedence() {
        precedence(
            ["--bind", "127.0.0.1:1"],
            ("ALLOT_BIND", "127.0.0.1:2"),
            "bind = \"[::1]:3\"",
            |s| s.bind.to_string(),
            ["127.0.0.1:1", "127.0.0.1:2", "[::1]:3", "127.0.0.1:8778"].map(String::from),
        );
    }

    #[test]
    fn database_precedence() {
        precedence(
            ["--database", "sqlite:/flag.db"],
            ("ALLOT_DATABASE", "sqlite:/env.db"),
            "database = \"sqlite:/file.db\"",
            |s| s.database.clone(),
            [
                "sqlite:/flag.db",
                "sqlite:/env.db",
                "sqlite:/file.db",
                "sqlite:/home/test/.local/share/allot/allot.db",
            ]
            .map(String::from),
        );
    }

    #[test]
    fn log_precedence() {
        // ALLOT_LOG used to beat --log; now the flag wins like every other.
        precedence(
            ["--log", "debug"],
            ("ALLOT_LOG", "warn"),
            "log = \"allot=trace\"",
            |s| s.log.clone(),
            ["debug", "warn", "allot=trace", "info"].map(String::from),
        );
    }

    #[test]
    fn policy_precedence() {
        precedence(
            ["--policy", "open"],
            ("ALLOT_POLICY", "legacy"),
            "policy = \"open\"",
            |s| s.policy,
            [
                PolicyMode::Open,
                PolicyMode::Legacy,
                PolicyMode::Open,
                PolicyMode::Secure,
            ],
        );
    }

    #[test]
    fn policy_file_precedence() {
        precedence(
            ["--policy-file", "/flag.yaml"],
            ("ALLOT_POLICY_FILE", "/env.yaml"),
            "policy_file = \"/file.yaml\"",
            |s| s.policy_file.clone(),
            [
                Some(PathBuf::from("/flag.yaml")),
                Some(PathBuf::from("/env.yaml")),
                Some(PathBuf::from("/file.yaml")),
                None,
            ],
        );
    }

    #[test]
    fn cors_precedence() {
        precedence(
            ["--cors-allowed-origin", "http://flag"],
            ("ALLOT_CORS_ALLOWED_ORIGINS", "http://env1, http://env2"),
            "cors_allowed_origins = [\"http://file\"]",
            |s| s.cors.as_ref().map(|c| c.allowed_origins.clone()),
            [
                Some(vec!["http://flag".to_owned()]),
                Some(vec!["http://env1".to_owned(), "http://env2".to_owned()]),
                Some(vec!["http://file".to_owned()]),
                None,
            ],
        );
        let with_origin = "cors_allowed_origins = [\"*\"]\ncors_allow_headers = [\"x-file\"]";
        precedence(
            ["--cors-allow-header", "x-flag"],
            ("ALLOT_CORS_ALLOW_HEADERS", "x-env"),
            with_origin,
            |s| s.cors.as_ref().map(|c| c.allow_headers.clone()),
            [
                Some(vec!["x-flag".to_owned()]),
                Some(vec!["x-env".to_owned()]),
                Some(vec!["x-file".to_owned()]),
                None,
            ],
        );
    }

    #[test]
    fn candidate_settings_precedence() {
        precedence(
            ["--randomize-allocation-candidates", "false"],
            ("ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES", "true"),
            "randomize_allocation_candidates = false",
            |s| s.randomize_allocation_candidates,
            [false, true, false, false],
        );
        // The bare flag means true, over a variable that says false.
        let s = resolve(
            &["--randomize-allocation-candidates"],
            &[("ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES", "false")],
            None,
        )
        .unwrap();
        assert!(s.randomize_allocation_candidates);
        precedence(
            ["--max-allocation-candidates", "20"],
            ("ALLOT_MAX_ALLOCATION_CANDIDATES", "30"),
            "max_allocation_candidates = 500",
            |s| s.max_allocation_candidates,
            [20, 30, 500, allot_core::candidates::DEFAULT_MAX_CANDIDATES],
        );
    }

    #[test]
    fn claim_settings_precedence() {
        precedence(
            ["--claim-expires-in", "60"],
            ("ALLOT_CLAIM_EXPIRES_IN", "120"),
            "claim_expires_in = 180",
            |s| s.claim_expires_in,
            [60, 120, 180, allot_server::DEFAULT_CLAIM_EXPIRES_IN],
        );
        precedence(
            ["--claim-retention", "0"],
            ("ALLOT_CLAIM_RETENTION", "10"),
            "claim_retention = 20",
            |s| s.claim_retention,
            [0, 10, 20, allot_server::DEFAULT_CLAIM_RETENTION],
        );
        precedence(
            ["--claim-sweep-interval", "1"],
            ("ALLOT_CLAIM_SWEEP_INTERVAL", "2"),
            "claim_sweep_interval = 3",
            |s| s.claim_sweep_interval.as_secs(),
            [1, 2, 3, DEFAULT_CLAIM_SWEEP_INTERVAL],
        );
    }

    #[test]
    fn auth_modes_and_the_loopback_rule() {
        // The default is noauth2, which loopback allows.
        let s = resolve(&[], &[], None).unwrap();
        assert!(matches!(s.auth, Auth::NoAuth2));
        // Elsewhere it is refused, with the reason and the ways out.
        let message = error(&["--bind", "0.0.0.0:8778"], &[], None);
        for needed in [
            "noauth2 (the default)",
            "0.0.0.0:8778",
            "--insecure-noauth",
            "--auth tokens",
        ] {
            assert!(message.contains(needed), "{needed}: {message}");
        }
        let message = error(
            &[],
            &[("ALLOT_BIND", "[::]:1"), ("ALLOT_AUTH", "noauth2")],
            None,
        );
        assert!(
            message.contains("environment variable ALLOT_AUTH"),
            "{message}"
        );
        // Unless told so, from any source.
        for (argv, env, file) in [
            (
                &["--bind", "0.0.0.0:1", "--insecure-noauth"][..],
                &[][..],
                None,
            ),
            (
                &["--bind", "0.0.0.0:1"],
                &[("ALLOT_INSECURE_NOAUTH", "true")],
                None,
            ),
            (
                &["--bind", "0.0.0.0:1"],
                &[],
                Some("insecure_noauth = true"),
            ),
        ] {
            let s = resolve(argv, env, file).unwrap();
            assert!(matches!(s.auth, Auth::NoAuth2));
        }
        // Other modes may listen anywhere.
        let s = resolve(
            &[
                "--bind",
                "0.0.0.0:1",
                "--auth",
                "tokens",
                "--token-file",
                "/t.json",
            ],
            &[],
            None,
        )
        .unwrap();
        assert!(matches!(&s.auth, Auth::Tokens(p) if p == Path::new("/t.json")));
        let s = resolve(&[], &[("ALLOT_AUTH", "tokens")], None).unwrap();
        assert!(
            matches!(&s.auth, Auth::Tokens(p) if p == Path::new("/home/test/.local/share/allot/tokens.json")),
            "{:?}",
            s.auth
        );
        let file = "auth = \"keystone\"\nkeystone_url = \"http://k:5000/v3\"\nkeystone_password = \"pw\"\ntoken_cache_ttl = 60";
        let s = resolve(&[], &[], Some(file)).unwrap();
        let Auth::Keystone(k) = &s.auth else {
            panic!("{:?}", s.auth)
        };
        assert_eq!(k.username, "placement");
        assert_eq!(k.project_name, "service");
        assert_eq!(k.cache_ttl.as_secs(), 60);
        assert!(
            !format!("{k:?}").contains("pw"),
            "the password stays out of Debug"
        );
        // Keystone without its endpoint or password, or over https, says what is missing.
        assert!(error(&["--auth", "keystone"], &[], None).contains("--keystone-url"));
        let m = error(
            &["--auth", "keystone", "--keystone-url", "http://k"],
            &[],
            None,
        );
        assert!(m.contains("ALLOT_KEYSTONE_PASSWORD"), "{m}");
        let m = error(
            &["--auth", "keystone", "--keystone-url", "https://k"],
            &[("ALLOT_KEYSTONE_PASSWORD", "x")],
            None,
        );
        assert!(m.contains("TLS"), "{m}");
        assert!(error(&[], &[("ALLOT_AUTH", "none")], None).contains("ALLOT_AUTH"));
    }

    #[test]
    fn config_file_flag_beats_its_variable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flag.toml");
        std::fs::write(&path, "policy = \"open\"\n").unwrap();
        let s = resolve(
            &["--config", path.to_str().unwrap()],
            &[],
            Some("policy = \"legacy\"\n"),
        )
        .unwrap();
        assert_eq!(s.policy, PolicyMode::Open);
    }

    /// The error message for a bad value, which must name where it came from.
    fn error(argv: &[&str], env: &[(&str, &str)], file: Option<&str>) -> String {
        format!(
            "{:#}",
            resolve(argv, env, file).expect_err("a bad value is refused")
        )
    }

    /// Environment variables, a config file's text, and what the error must say.
    type BadCase<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, &'a str);

    #[test]
    fn bad_values_name_their_source() {
        let cases: &[BadCase] = &[
            (
                &[("ALLOT_BIND", "localhost")],
                None,
                "environment variable ALLOT_BIND",
            ),
            (
                &[("ALLOT_POLICY", "strict")],
                None,
                "environment variable ALLOT_POLICY",
            ),
            (
                &[("ALLOT_LOG", "allot=loud")],
                None,
                "environment variable ALLOT_LOG",
            ),
            (
                &[("ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES", "maybe")],
                None,
                "environment variable ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES",
            ),
            (
                &[("ALLOT_MAX_ALLOCATION_CANDIDATES", "-1")],
                None,
                "environment variable ALLOT_MAX_ALLOCATION_CANDIDATES",
            ),
            (
                &[("ALLOT_MAX_ALLOCATION_CANDIDATES", "0")],
                None,
                "environment variable ALLOT_MAX_ALLOCATION_CANDIDATES",
            ),
            (&[], Some("bind = \"nowhere\""), "config file"),
            (&[], Some("policy = \"strict\""), "config file"),
            (&[], Some("log = \"allot=loud\""), "config file"),
            (&[], Some("max_allocation_candidates = 0"), "config file"),
            (&[], Some("bnd = \"x\""), "config file"),
            (
                &[("ALLOT_CLAIM_EXPIRES_IN", "0")],
                None,
                "environment variable ALLOT_CLAIM_EXPIRES_IN",
            ),
            (
                &[("ALLOT_CLAIM_RETENTION", "-5")],
                None,
                "environment variable ALLOT_CLAIM_RETENTION",
            ),
            (&[], Some("claim_sweep_interval = 0"), "config file"),
            (&[], Some("claim_expires_in = 999999999999"), "config file"),
        ];
        for (env, file, source) in cases {
            let message = error(&[], env, *file);
            assert!(message.contains(source), "{env:?} {file:?}: {message}");
        }
        let message = error(&["--log", "allot=loud"], &[], None);
        assert!(message.starts_with("--log:"), "{message}");
        let message = error(&["--max-allocation-candidates", "0"], &[], None);
        assert!(
            message.starts_with("--max-allocation-candidates:"),
            "{message}"
        );
        // A bad value is an error even where a lower source has a good one.
        let message = error(
            &[],
            &[("ALLOT_POLICY", "strict")],
            Some("policy = \"open\""),
        );
        assert!(message.contains("ALLOT_POLICY"), "{message}");
    }

    #[test]
    fn clap_refuses_bad_flags_by_name() {
        for argv in [
            &["allot", "--bind", "localhost:1"][..],
            &["allot", "--policy", "strict"],
            &["allot", "--max-allocation-candidates", "x"],
        ] {
            let e = Cli::try_parse_from(argv).expect_err("a bad flag is refused");
            assert!(e.to_string().contains(argv[1]), "{e}");
        }
        assert_eq!(args(&["--policy", "legacy"]).policy, Some(Policy::Legacy));
    }
}
