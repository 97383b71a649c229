//! `allot serve` settings: each declared once, in [`Layer`], and merged from four
//! sources into validated [`Settings`].
//!
//! One field of [`Layer`] is one setting. Its name is the config file's key; clap's
//! derive makes it a flag (the doc comment is the help, the `default_value` the
//! default, the `value_parser` the check of a value); its environment variable is the
//! name upper-cased behind `ALLOT_` ([`layers::env_var`]). Precedence, for every
//! setting alike: the flag, then the variable, then the TOML file
//! (`--config`/`ALLOT_CONFIG`), then Placement's own `placement.conf`
//! (`--placement-conf`, [`placement_conf`]: the keys allot understands), then the
//! default ([`layers`] does the merge).
//!
//! clap does not read the variables itself (its `env` attribute): its error for a bad
//! variable names the flag rather than the variable, and the merge would not be
//! testable with an environment that is not the process's. The variables go through
//! the flags' parsers instead, so the two accept the same spellings. `figment` would
//! do the merge too, but it still needs the flags declared for clap and words its
//! errors its own way; serde over the one struct is enough.
//!
//! Settings are typed at the edge: `--bind` is a [`SocketAddr`], `--policy` a
//! [`Policy`], numbers and booleans are parsed, and the log filter is checked, whatever
//! the source. A value that does not parse is an error naming its source (`--bind`,
//! `ALLOT_BIND`, `config file PATH`), never a silent fallback.

mod layers;
mod placement_conf;

pub use placement_conf::PlacementConf;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::{ArgMatches, Args, Command, FromArgMatches, ValueEnum};
use serde::{Deserialize, Serialize};

use layers::{Merged, Values};

/// The authorization rules, as `--policy` takes them: a mirror of
/// [`allot_server::PolicyMode`], which knows nothing of clap or serde.
#[derive(ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
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

/// A default as clap shows it, built once: what `default_value_t` does, which cannot
/// be used on an `Option` field (every field of [`Layer`] is one).
macro_rules! shown {
    ($value:expr) => {{
        static SHOWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        SHOWN.get_or_init(|| $value.to_string()).as_str()
    }};
}

/// The name clap shows and takes, for [`shown`].
macro_rules! display_as_value {
    ($($ty:ty),*) => {$(
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let value = self.to_possible_value().expect("no variant is skipped");
                f.write_str(value.get_name())
            }
        }
    )*};
}
/// How the log is written, as `--log-format` takes it.
#[derive(ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text an event
    Text,
    /// One JSON object a line, the event's fields at its top level
    Json,
}

display_as_value!(Policy, AuthMode, LogFormat);

/// The default mode: the one Placement 16 enforces as installed from PyPI.
pub const DEFAULT_POLICY: Policy = Policy::Secure;
/// The default address: Placement's port, on loopback.
pub const DEFAULT_BIND: &str = "127.0.0.1:8778";
/// The default log filter.
pub const DEFAULT_LOG: &str = "info";
/// The default interval of the claim sweeper, in seconds.
pub const DEFAULT_CLAIM_SWEEP_INTERVAL: u64 = 30;
/// The default bound past which a request is logged as slow, in milliseconds.
pub const DEFAULT_SLOW_REQUEST_MS: u64 = 1000;
/// The default time requests under way get to finish on SIGTERM, in seconds.
pub const DEFAULT_SHUTDOWN_GRACE: u64 = 30;

/// Every setting of `allot serve`, declared once: the field is the config file's key,
/// its flag (`cors_allowed_origins` alone is singular on the command line, since it is
/// repeated) and, upper-cased behind `ALLOT_`, its environment variable. A layer holds
/// what one source gives; after the merge, every setting with a declared default has
/// a value.
#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    /// Address and port to listen on (Placement's port, on loopback, by default).
    #[arg(long, value_name = "IP:PORT", value_parser = parse_bind, default_value = DEFAULT_BIND)]
    bind: Option<SocketAddr>,

    /// Database URL: `sqlite:PATH`, created on first start [default:
    /// sqlite:$XDG_DATA_HOME/allot/allot.db, i.e. ~/.local/share/allot/allot.db].
    #[arg(long, value_name = "URL")]
    database: Option<String>,

    /// TOML file with any of these settings, each under its name with underscores;
    /// flags and environment variables win over it.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    config: Option<PathBuf>,

    /// OpenStack Placement's placement.conf: the settings allot understands are taken
    /// from it (below this file), every other key is listed in a warning at start.
    #[arg(long, value_name = "FILE")]
    placement_conf: Option<PathBuf>,

    /// Enable CORS for this origin (repeat for several, or separate with commas; `*`
    /// for any). Off by default.
    #[arg(
        long = "cors-allowed-origin",
        value_delimiter = ',',
        value_name = "ORIGIN"
    )]
    #[serde(default)]
    cors_allowed_origins: Vec<String>,

    /// With CORS on: a request header a browser may send (repeat for several, or
    /// separate with commas).
    #[arg(long = "cors-allow-header", value_delimiter = ',', value_name = "NAME")]
    #[serde(default)]
    cors_allow_headers: Vec<String>,

    /// Authorization rules: the default is what Placement 16 enforces out of the box;
    /// `legacy` lets an admin token without the `service` role reshape.
    #[arg(long, value_name = "MODE", default_value = shown!(DEFAULT_POLICY),
          value_parser = Spelled { parse: parse_policy, values: variants::<Policy> })]
    policy: Option<Policy>,

    /// An oslo.policy file whose rules replace the built-in ones they name
    /// (`"placement:resource_providers:list": "role:reader or role:admin"`), reread on
    /// SIGHUP [default: none].
    #[arg(long, value_name = "FILE")]
    policy_file: Option<PathBuf>,

    /// How callers are authenticated; noauth2 is refused on an address other than
    /// loopback without --insecure-noauth.
    #[arg(long, value_name = "MODE", default_value = shown!(AuthMode::Noauth2),
          value_parser = Spelled { parse: parse_auth, values: variants::<AuthMode> })]
    auth: Option<AuthMode>,

    /// Allow --auth noauth2 on an address other than loopback: anyone who can reach
    /// it is whoever they claim to be.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = BOOL)]
    insecure_noauth: Option<bool>,

    /// With --auth tokens: the token file, JSON, managed by `allot token` [default:
    /// $XDG_DATA_HOME/allot/tokens.json].
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,

    /// With --auth keystone: the Identity endpoint, http://HOST:PORT[/PATH].
    #[arg(long, value_name = "URL")]
    keystone_url: Option<String>,

    /// With --auth keystone: allot's service user.
    #[arg(long, value_name = "NAME", default_value = "placement")]
    keystone_user: Option<String>,

    /// With --auth keystone: the service user's password. As a flag it is visible to
    /// every local user in the process list (a warning says so at start): prefer the
    /// variable, the config file or --keystone-password-file.
    #[arg(long, value_name = "PASSWORD")]
    keystone_password: Option<String>,

    /// With --auth keystone: a file whose first line is the service user's password
    /// (keep it readable by allot alone); where it and --keystone-password both come
    /// from one source, that is an error, else the one of higher precedence wins.
    #[arg(long, value_name = "FILE")]
    keystone_password_file: Option<PathBuf>,

    /// With --auth keystone and an https:// URL: the CA certificates (PEM) Keystone's
    /// certificate must lead to [default: the system's].
    #[arg(long, value_name = "FILE")]
    keystone_cafile: Option<PathBuf>,

    /// With --auth keystone and an https:// URL: a client certificate (PEM) to show
    /// Keystone, with --keystone-keyfile.
    #[arg(long, value_name = "FILE")]
    keystone_certfile: Option<PathBuf>,

    /// With --auth keystone: the key (PEM) of --keystone-certfile.
    #[arg(long, value_name = "FILE")]
    keystone_keyfile: Option<PathBuf>,

    /// With --auth keystone and an https:// URL: accept any certificate Keystone shows
    /// (encrypted, but open to whoever sits between; for testing only).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = BOOL)]
    keystone_insecure: Option<bool>,

    /// With --auth keystone: the project allot's token is scoped to.
    #[arg(long, value_name = "NAME", default_value = "service")]
    keystone_project: Option<String>,

    /// With --auth keystone: the domain of the user and of the project, by name.
    #[arg(long, value_name = "NAME", default_value = "Default")]
    keystone_domain: Option<String>,

    /// With --auth keystone: how long a validated token is cached, in seconds; never
    /// past its expiry; 0 turns the cache off.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::auth::keystone::DEFAULT_CACHE_TTL.as_secs()))]
    token_cache_ttl: Option<u64>,

    /// Log filter, in tracing's EnvFilter syntax.
    #[arg(long, value_name = "FILTER", default_value = DEFAULT_LOG)]
    log: Option<String>,

    /// Answer GET /allocation_candidates with a random sample of the candidates
    /// (gathered round-robin over the matching trees, up to
    /// --max-allocation-candidates) instead of their deterministic order, like
    /// Placement's randomize_allocation_candidates.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = BOOL)]
    randomize_allocation_candidates: Option<bool>,

    /// The most candidates one GET /allocation_candidates generates; a request's
    /// `limit` applies within it, and a request without `limit` gets at most this
    /// many.
    #[arg(long, value_name = "N", value_parser = parse_count,
          default_value = shown!(allot_core::candidates::DEFAULT_MAX_CANDIDATES))]
    max_allocation_candidates: Option<usize>,

    /// How long a pending claim lasts when its POST /claims leaves `expires_in` out,
    /// in seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::DEFAULT_CLAIM_EXPIRES_IN))]
    claim_expires_in: Option<u64>,

    /// How long an ended claim (confirmed, released, expired) is kept before the
    /// sweeper forgets it, in seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::DEFAULT_CLAIM_RETENTION))]
    claim_retention: Option<u64>,

    /// How often the sweeper runs, in seconds. Expiry itself is exact whatever this
    /// is: the sweeper only tidies up.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(DEFAULT_CLAIM_SWEEP_INTERVAL))]
    claim_sweep_interval: Option<u64>,

    /// While this file exists, GET /healthcheck answers 503 `DISABLED BY FILE`, so
    /// that a load balancer drains the node before a restart (oslo's
    /// disable_by_file_path) [default: none].
    #[arg(long, value_name = "PATH")]
    healthcheck_disable_file: Option<PathBuf>,

    /// The log's form: text, or one JSON object a line.
    #[arg(long, value_name = "FORMAT", default_value = shown!(LogFormat::Text),
          value_parser = Spelled { parse: parse_log_format, values: variants::<LogFormat> })]
    log_format: Option<LogFormat>,

    /// A request that takes longer than this, in milliseconds, is logged at WARN
    /// with slow=true; 0 never.
    #[arg(long, value_name = "MS", value_parser = parse_count,
          default_value = shown!(DEFAULT_SLOW_REQUEST_MS))]
    slow_request_ms: Option<usize>,

    /// On SIGTERM or SIGINT, how long requests under way get to finish, in seconds,
    /// before allot stops anyway (a second signal stops it at once).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(DEFAULT_SHUTDOWN_GRACE))]
    shutdown_grace: Option<u64>,

    /// On SQLite: how often, in seconds, the view is saved beside the database while
    /// the server runs (when anything was written since), so that a start after a
    /// crash reads it and the commits after it instead of every table; 0 saves it
    /// only at a clean stop. Ignored on PostgreSQL.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_store::SAVE_VIEW_EVERY.as_secs()))]
    save_view_every: Option<u64>,

    /// Serve HTTPS (HTTP/1.1 and HTTP/2) with this certificate, PEM, its chain after
    /// it; with --tls-key. Reread on SIGHUP, with the key: the next connections get
    /// the new one. The --metrics-bind listener uses it too [default: plain HTTP].
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,

    /// Also serve GET /metrics on this address, to anyone who can reach it (a
    /// scraper on a private network) [default: none: /metrics only on the API's
    /// port, to a token the allot:metrics rule allows].
    #[arg(long, value_name = "IP:PORT", value_parser = parse_bind)]
    metrics_bind: Option<SocketAddr>,

    /// /metrics writes openstack-exporter's series per provider and resource class
    /// while the cloud has at most this many providers; in a larger one it leaves
    /// them out (four series per inventory: ten million at a million providers) and
    /// the sums by class remain. 0 never writes them.
    #[arg(long, value_name = "N", value_parser = parse_count,
          default_value = shown!(allot_server::metrics::DEFAULT_PROVIDER_SERIES))]
    metrics_providers: Option<usize>,

    /// On a PostgreSQL database that several nodes share: the URL the other nodes
    /// reach this one at. While this node holds the cluster's writer lease, they
    /// forward their writes to it, so that one writer batches them all; "none" keeps
    /// it from taking the lease (it then forwards to whoever holds it) [default:
    /// http://IP:PORT of --bind when it names one address and serves plain HTTP,
    /// else none].
    #[arg(long, value_name = "URL", value_parser = parse_advertise_url)]
    advertise_url: Option<String>,
}

/// What `allot serve` was given on its command line; [`ServeArgs::resolve`] adds the
/// other sources. Its flags are [`Layer`]'s, each help ending with its variable.
#[derive(Debug)]
pub struct ServeArgs {
    /// The settings given as flags, by name.
    flags: Values,
    /// `--config`, which is not a setting of the file itself.
    config: Option<PathBuf>,
}

impl Args for ServeArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = Layer::augment_args(cmd);
        let keys: Vec<String> = cmd
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .filter(|id| id != "config")
            .collect();
        let keys = format!(" (keys: {})", keys.join(", "));
        cmd.mut_args(|arg| {
            let var = layers::env_var(arg.get_id().as_str());
            let extra = if arg.get_id() == "config" {
                &keys[..]
            } else {
                ""
            };
            match arg.get_help().map(|h| format!("{h}{extra} [env: {var}]")) {
                Some(help) => arg.help(help),
                None => arg,
            }
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ServeArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let (flags, layer) = layers::from_command_line(matches)?;
        Ok(ServeArgs {
            flags,
            config: layer.config,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
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
    /// The placement.conf read, for the warning that lists the keys not used.
    pub placement_conf: Option<placement_conf::PlacementConf>,
    pub healthcheck_disable_file: Option<PathBuf>,
    pub log_format: LogFormat,
    /// None: never flagged.
    pub slow_request: Option<std::time::Duration>,
    pub shutdown_grace: std::time::Duration,
    /// How often the view is saved while the server runs (SQLite); `None`: only at a
    /// clean stop.
    pub save_view_every: Option<std::time::Duration>,
    pub metrics_bind: Option<SocketAddr>,
    /// The most providers for which /metrics writes the series per provider.
    pub metrics_providers: usize,
    /// Where other nodes reach this one: `Some("")` for none, `None` for the
    /// default (made from the address bound, see [`Settings::advertise_url`]).
    pub advertise_url: Option<String>,
    /// HTTPS: the certificate and its key.
    pub tls: Option<ServerTlsFiles>,
    /// What the start logs as warnings about the settings themselves.
    pub warnings: Vec<String>,
}

impl Settings {
    /// Where other nodes reach this one, now that it listens on `addr`: the URL
    /// given, or `http://addr` when the address is one that others can be given
    /// (not every address, 0.0.0.0 or [::]) and the node serves plain HTTP (an
    /// https:// URL must name the host its certificate is for, which only the
    /// operator knows).
    pub fn advertise_url(&self, addr: SocketAddr) -> Option<String> {
        match &self.advertise_url {
            Some(url) if url.is_empty() => None,
            Some(url) => Some(url.clone()),
            None if addr.ip().is_unspecified() || self.tls.is_some() => None,
            None => Some(format!("http://{addr}")),
        }
    }
}

/// The files `allot serve` serves HTTPS with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// The certificate, its chain after it.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// How callers are authenticated, with what each mode needs.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Placement's `noauth2`.
    NoAuth2,
    /// The static token file.
    Tokens(PathBuf),
    /// Keystone.
    Keystone(Box<allot_server::auth::keystone::KeystoneConfig>),
}

/// The default token file: beside the default database.
pub fn default_token_file(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    data_dir(env).join("allot").join("tokens.json")
}

/// The process environment as [`ServeArgs::resolve_with`] reads it: a variable set to
/// the empty string counts as unset (as clap's `env` does).
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

/// A clap parser made of a parse function, whose error is the one a bad environment
/// variable reports, and the values `--help` lists.
#[derive(Clone)]
struct Spelled<T> {
    parse: fn(&str) -> Result<T, String>,
    values: fn() -> Vec<PossibleValue>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Spelled<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        // clap's parser for a plain function wraps its message with the flag's name.
        self.parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new((self.values)().into_iter()))
    }
}

fn variants<E: ValueEnum>() -> Vec<PossibleValue> {
    E::value_variants()
        .iter()
        .filter_map(ValueEnum::to_possible_value)
        .collect()
}

/// Booleans: `true` and `false`, plus the usual spellings of shell variables.
const BOOL: Spelled<bool> = Spelled {
    parse: parse_bool,
    values: || vec![PossibleValue::new("true"), PossibleValue::new("false")],
};

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("invalid boolean {s:?} (expected true or false)")),
    }
}

/// One of an enum's values, or an error calling it `what` and listing them.
fn parse_choice<E: ValueEnum>(s: &str, what: &str) -> Result<E, String> {
    E::from_str(s.trim(), false).map_err(|_| {
        let names: Vec<String> = variants::<E>()
            .iter()
            .map(|v| v.get_name().to_owned())
            .collect();
        format!(
            "invalid {what} {s:?} (expected one of: {})",
            names.join(", ")
        )
    })
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    parse_choice(s, "policy mode")
}

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    parse_choice(s, "log format")
}

fn parse_auth(s: &str) -> Result<AuthMode, String> {
    parse_choice(s, "authentication mode")
}

fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse().map_err(|_| {
        format!("invalid address {s:?} (expected IP:PORT, e.g. 127.0.0.1:8778 or [::1]:8778)")
    })
}

/// An http:// or https:// URL with a host (a trailing slash dropped), or `none`
/// (the empty string).
fn parse_advertise_url(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(String::new());
    }
    let invalid =
        || format!("invalid URL {s:?} (expected http://HOST:PORT or https://HOST:PORT, or none)");
    let url = url::Url::parse(s).map_err(|_| invalid())?;
    let bare = url.path() == "/" && url.query().is_none() && url.fragment().is_none();
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() || !bare {
        return Err(invalid());
    }
    Ok(s.trim_end_matches('/').to_owned())
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

/// Checks a log filter the way the subscriber will read it.
fn check_log_filter(filter: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::try_new(filter)
        .map(drop)
        .map_err(|e| format!("invalid log filter {filter:?}: {e}"))
}

/// A setting with a declared default, which the merge always fills.
fn declared<T>(value: Option<T>) -> T {
    value.expect("the merge fills every setting that has a declared default")
}

/// A list's items, trimmed, without the empty ones.
fn clean(list: Vec<String>) -> Vec<String> {
    list.into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

impl ServeArgs {
    /// Merges flags, the process environment, the file and the defaults.
    pub fn resolve(self) -> anyhow::Result<Settings> {
        self.resolve_with(&process_env)
    }

    /// [`ServeArgs::resolve`] with `env` standing for the environment (unset and empty
    /// variables are `None`).
    pub fn resolve_with(self, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Settings> {
        let merged = layers::merge(&self.flags, self.config, env)?;
        settings(merged, env)
    }
}

/// The checks that span a setting's value and its meaning, each error naming the
/// source of the value it refuses.
fn settings(merged: Merged, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Settings> {
    let from = |id| merged.source(id);
    let s = &merged.layer;
    let bind = declared(s.bind);
    let database = database(&merged, env)?;
    let log = declared(s.log.clone());
    check_log_filter(&log).map_err(|e| anyhow!("{}: {e}", from("log")))?;
    // A blank policy file means none, so that a wrapper can clear it.
    let policy_file = s
        .policy_file
        .clone()
        .filter(|p| !p.to_string_lossy().trim().is_empty());
    let max_allocation_candidates = declared(s.max_allocation_candidates);
    if max_allocation_candidates == 0 {
        anyhow::bail!(
            "{}: max_allocation_candidates must be at least 1",
            from("max_allocation_candidates")
        );
    }
    // The bounds a request's own `expires_in` has.
    let max_expiry = allot_server::schemas::MAX_CLAIM_EXPIRES_IN as u64;
    let claim_expires_in = declared(s.claim_expires_in);
    if !(1..=max_expiry).contains(&claim_expires_in) {
        anyhow::bail!(
            "{}: claim_expires_in must be from 1 to {max_expiry} seconds",
            from("claim_expires_in")
        );
    }
    let claim_retention = declared(s.claim_retention);
    if claim_retention > max_expiry {
        anyhow::bail!(
            "{}: claim_retention must be at most {max_expiry} seconds",
            from("claim_retention")
        );
    }
    let claim_sweep_interval = declared(s.claim_sweep_interval);
    if !(1..=max_expiry).contains(&claim_sweep_interval) {
        anyhow::bail!(
            "{}: claim_sweep_interval must be from 1 to {max_expiry} seconds",
            from("claim_sweep_interval")
        );
    }
    let origins = clean(s.cors_allowed_origins.clone());
    Ok(Settings {
        bind,
        database,
        log,
        policy: declared(s.policy).into(),
        policy_file,
        auth: auth(&merged, bind, env)?,
        cors: (!origins.is_empty()).then(|| allot_server::Cors {
            allowed_origins: origins,
            allow_headers: clean(s.cors_allow_headers.clone()),
        }),
        randomize_allocation_candidates: declared(s.randomize_allocation_candidates),
        max_allocation_candidates,
        claim_expires_in: claim_expires_in as i64,
        claim_retention: claim_retention as i64,
        claim_sweep_interval: std::time::Duration::from_secs(claim_sweep_interval),
        placement_conf: merged.placement.clone(),
        // A blank path means none, as for the policy file.
        healthcheck_disable_file: s
            .healthcheck_disable_file
            .clone()
            .filter(|p| !p.to_string_lossy().trim().is_empty()),
        log_format: declared(s.log_format),
        slow_request: Some(declared(s.slow_request_ms) as u64)
            .filter(|&ms| ms > 0)
            .map(std::time::Duration::from_millis),
        shutdown_grace: std::time::Duration::from_secs(declared(s.shutdown_grace)),
        save_view_every: Some(declared(s.save_view_every))
            .filter(|&seconds| seconds > 0)
            .map(std::time::Duration::from_secs),
        metrics_bind: s.metrics_bind,
        metrics_providers: declared(s.metrics_providers),
        // Flags and variables were checked as they were read; a file's value is
        // checked here.
        advertise_url: s
            .advertise_url
            .as_deref()
            .map(parse_advertise_url)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{}: {e}", from("advertise_url")))?,
        tls: server_tls(&merged)?,
        warnings: warnings(&merged, bind),
    })
}

/// The database URL. A placement.conf that names Placement's own database
/// (`[placement_database] connection`) while allot's sources name none stops the
/// start: allot cannot serve that database, and starting on an empty one of its own
/// instead would show the cloud's schedulers and compute nodes a Placement with no
/// providers and no allocations, which they would fill again from scratch and
/// overcommit. With `--database` (or its variable or file key) given, the connection
/// is only listed among the keys not used.
fn database(merged: &Merged, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<String> {
    let s = &merged.layer;
    let connection = merged
        .placement
        .as_ref()
        .and_then(|p| Some((&p.path, p.connection.as_ref()?)));
    if let (None, Some((path, url))) = (&s.database, connection) {
        anyhow::bail!(
            "placement.conf {}: [placement_database] connection = {url} is OpenStack \
             Placement's database, which allot cannot serve. Import it into allot's own \
             database first (`allot import --from-placement URL --database URL`, see \
             docs/migrate.md), then name that database with --database, \
             ALLOT_DATABASE or `database` in allot's config file.",
            path.display()
        );
    }
    let database = s.database.clone().unwrap_or_else(|| default_database(env));
    if database.trim().is_empty() {
        anyhow::bail!("{}: the database URL is empty", merged.source("database"));
    }
    Ok(database)
}

/// The flags of the commands that only open the database (`allot db migrate`, alias
/// `sync`): it is found as `allot serve` finds it.
#[derive(clap::Args, Debug)]
pub struct DatabaseArgs {
    /// The database URL (sqlite:PATH or postgres://...) [env: ALLOT_DATABASE].
    #[arg(long, value_name = "URL")]
    database: Option<String>,
    /// allot's TOML config file, for its `database` [env: ALLOT_CONFIG].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Placement's placement.conf: a `[placement_database] connection` there, with no
    /// database of allot's named, is refused with the way to import it [env:
    /// ALLOT_PLACEMENT_CONF].
    #[arg(long, value_name = "FILE")]
    placement_conf: Option<PathBuf>,
}

impl DatabaseArgs {
    /// The database URL, from these flags, the environment, the files or the default.
    pub fn resolve(self, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<String> {
        let mut flags = Values::new();
        if let Some(url) = self.database {
            flags.insert("database".into(), url.into());
        }
        if let Some(path) = self.placement_conf {
            flags.insert("placement_conf".into(), serde_json::to_value(path)?);
        }
        let merged = layers::merge(&flags, self.config, env)?;
        database(&merged, env)
    }
}

/// The Keystone service password: `keystone_password`, or the first line of
/// `keystone_password_file`, whichever comes from the source of higher precedence
/// (both from one source: an error).
fn keystone_password(merged: &Merged) -> anyhow::Result<String> {
    let s = &merged.layer;
    let given = s.keystone_password.clone().filter(|p| !p.is_empty());
    let (from_value, from_file) = (
        merged.source("keystone_password"),
        merged.source("keystone_password_file"),
    );
    match (given, &s.keystone_password_file) {
        (Some(_), Some(_)) if from_value.rank() == from_file.rank() => {
            anyhow::bail!("{from_value} and {from_file} both give the Keystone password: keep one")
        }
        (Some(password), Some(_)) if from_value.rank() < from_file.rank() => Ok(password),
        (_, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| anyhow!("{from_file}: reading {}: {e}", file.display()))?;
            let password = text.lines().next().unwrap_or("").to_owned();
            if password.is_empty() {
                anyhow::bail!("{from_file}: {} holds no password", file.display());
            }
            Ok(password)
        }
        (password, None) => Ok(password.unwrap_or_default()),
    }
}

/// `tls_cert` and `tls_key`, the certificate `allot serve` serves HTTPS with.
fn server_tls(merged: &Merged) -> anyhow::Result<Option<ServerTlsFiles>> {
    let s = &merged.layer;
    let files = cert_and_key(merged, ("tls_cert", &s.tls_cert), ("tls_key", &s.tls_key))?;
    Ok(files.map(|(cert, key)| ServerTlsFiles { cert, key }))
}

/// A certificate and its key, given by the settings named: both or neither (a blank
/// path is none, so that a wrapper can clear one).
fn cert_and_key(
    merged: &Merged,
    (cert_id, cert): (&str, &Option<PathBuf>),
    (key_id, key): (&str, &Option<PathBuf>),
) -> anyhow::Result<Option<(PathBuf, PathBuf)>> {
    let given = |p: &Option<PathBuf>| p.clone().filter(|p| !p.to_string_lossy().trim().is_empty());
    let flag = |id: &str| format!("--{}", id.replace('_', "-"));
    match (given(cert), given(key)) {
        (Some(cert), Some(key)) => Ok(Some((cert, key))),
        (None, None) => Ok(None),
        (Some(_), None) => anyhow::bail!(
            "{} gives a certificate but no key: add {}",
            merged.source(cert_id),
            flag(key_id)
        ),
        (None, Some(_)) => anyhow::bail!(
            "{} gives a key but no certificate: add {}",
            merged.source(key_id),
            flag(cert_id)
        ),
    }
}

/// What a start should warn of in the settings themselves.
fn warnings(merged: &Merged, bind: SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let s = &merged.layer;
    if !bind.ip().is_loopback() && server_tls(merged).ok().flatten().is_none() {
        out.push(format!(
            "serving plain HTTP on {bind}: tokens cross the network in clear text; give \
             --tls-cert and --tls-key, or keep a TLS-terminating proxy in front"
        ));
    }
    if declared(s.keystone_insecure) {
        out.push(format!(
            "{}: Keystone's certificate is not checked, so whoever sits between can read \
             the service password and every token",
            merged.source("keystone_insecure")
        ));
    }
    if let layers::Source::Flag(flag) = merged.source("keystone_password") {
        out.push(format!(
            "{flag} shows the Keystone password to every local user (the process \
             list): use ALLOT_KEYSTONE_PASSWORD, keystone_password in the config file \
             or --keystone-password-file"
        ));
    }
    out
}

/// TLS to Keystone, from `keystone_cafile`, `keystone_certfile`/`keystone_keyfile`
/// and `keystone_insecure` (read by `Keystone::new`, for an https:// URL only).
fn keystone_tls(merged: &Merged) -> anyhow::Result<allot_tls::ClientTls> {
    let s = &merged.layer;
    let identity = cert_and_key(
        merged,
        ("keystone_certfile", &s.keystone_certfile),
        ("keystone_keyfile", &s.keystone_keyfile),
    )?
    .map(|(cert, key)| allot_tls::Identity { cert, key });
    Ok(allot_tls::ClientTls {
        roots: match &s.keystone_cafile {
            Some(file) => allot_tls::Roots::File(file.clone()),
            None => allot_tls::Roots::System,
        },
        check: if declared(s.keystone_insecure) {
            allot_tls::Check::Nothing
        } else {
            allot_tls::Check::Full
        },
        identity,
    })
}

/// The authentication mode and what it needs; refuses `noauth2` on an address other
/// than loopback unless `insecure_noauth` says so.
fn auth(
    merged: &Merged,
    bind: SocketAddr,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Auth> {
    let s = &merged.layer;
    match declared(s.auth) {
        AuthMode::Noauth2 => {
            if !bind.ip().is_loopback() && !declared(s.insecure_noauth) {
                let how = match merged.source("auth") {
                    layers::Source::Default => "noauth2 (the default)".to_owned(),
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
        AuthMode::Tokens => Ok(Auth::Tokens(
            s.token_file
                .clone()
                .unwrap_or_else(|| default_token_file(env)),
        )),
        AuthMode::Keystone => {
            let url = s.keystone_url.clone().unwrap_or_default();
            if url.trim().is_empty() {
                anyhow::bail!(
                    "--auth keystone needs the Identity endpoint: --keystone-url, \
                     ALLOT_KEYSTONE_URL or keystone_url in the config file"
                );
            }
            let password = keystone_password(merged)?;
            if password.is_empty() {
                anyhow::bail!(
                    "--auth keystone needs allot's service password: \
                     ALLOT_KEYSTONE_PASSWORD, keystone_password in the config file or \
                     --keystone-password-file"
                );
            }
            let domain = declared(s.keystone_domain.clone());
            let mut config = allot_server::auth::keystone::KeystoneConfig::new(
                &url,
                &declared(s.keystone_user.clone()),
                &password,
                &declared(s.keystone_project.clone()),
            );
            config.user_domain_name = domain.clone();
            config.project_domain_name = domain;
            config.cache_ttl = std::time::Duration::from_secs(declared(s.token_cache_ttl));
            config.tls = keystone_tls(merged)?;
            // Checked here, so that a bad URL stops the start with its reason.
            allot_server::auth::keystone::Keystone::new(config.clone())
                .map_err(|e| anyhow!("--auth keystone: {e}"))?;
            Ok(Auth::Keystone(Box::new(config)))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

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

    #[test]
    fn the_advertised_url_is_given_or_made_from_the_address_bound() {
        let addr: SocketAddr = "10.0.0.5:8778".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8778".parse().unwrap();
        let s = resolve(&[], &[], None).unwrap();
        assert_eq!(
            s.advertise_url(addr).as_deref(),
            Some("http://10.0.0.5:8778")
        );
        assert_eq!(s.advertise_url(any), None, "every address: none to give");
        let s = resolve(
            &["--advertise-url", "https://node1.example:8778/"],
            &[],
            None,
        )
        .unwrap();
        assert_eq!(
            s.advertise_url(any).as_deref(),
            Some("https://node1.example:8778")
        );
        let s = resolve(&[], &[("ALLOT_ADVERTISE_URL", "none")], None).unwrap();
        assert_eq!(s.advertise_url(addr), None);
        // HTTPS without a URL: the certificate's name is the operator's to give.
        let s = resolve(&["--tls-cert", "/c.pem", "--tls-key", "/c.key"], &[], None).unwrap();
        assert_eq!(s.advertise_url(addr), None);
        for bad in [
            "ftp://x:1",
            "http://",
            "http://x:1/placement",
            "x:1",
            "http://x:1?a=b",
        ] {
            let e = resolve(&[], &[("ALLOT_ADVERTISE_URL", bad)], None).unwrap_err();
            assert!(e.to_string().contains("invalid URL"), "{bad}: {e}");
        }
        let e = resolve(&[], &[], Some("advertise_url = \"10.0.0.5:8778\"\n")).unwrap_err();
        assert!(format!("{e:#}").contains("invalid URL"), "{e:#}");
    }

    #[test]
    fn tls_settings_come_in_pairs_and_reach_keystone() {
        let s = resolve(&["--tls-cert", "/c.pem", "--tls-key", "/c.key"], &[], None).unwrap();
        assert_eq!(
            s.tls,
            Some(ServerTlsFiles {
                cert: "/c.pem".into(),
                key: "/c.key".into()
            })
        );
        // From the file and the environment alike; one without the other is refused.
        let e = resolve(&[], &[("ALLOT_TLS_KEY", "/c.key")], None).unwrap_err();
        assert!(
            e.to_string()
                .contains("ALLOT_TLS_KEY gives a key but no certificate"),
            "{e}"
        );
        let e = resolve(&[], &[], Some("tls_cert = \"/c.pem\"\n")).unwrap_err();
        assert!(e.to_string().contains("no key: add --tls-key"), "{e}");
        assert_eq!(resolve(&[], &[], None).unwrap().tls, None);

        let keystone = ["--auth", "keystone", "--keystone-url", "https://k:5000/v3"];
        let password = [("ALLOT_KEYSTONE_PASSWORD", "p")];
        let mut argv = keystone.to_vec();
        argv.extend(["--keystone-certfile", "/client.pem"]);
        let e = resolve(&argv, &password, None).unwrap_err();
        assert!(e.to_string().contains("add --keystone-keyfile"), "{e}");
        // The insecure flag turns the check off, and says so.
        let mut argv = keystone.to_vec();
        argv.push("--keystone-insecure");
        let s = resolve(&argv, &password, None).unwrap();
        let Auth::Keystone(k) = &s.auth else {
            panic!("keystone")
        };
        assert_eq!(k.tls.check, allot_tls::Check::Nothing);
        assert_eq!(k.tls.roots, allot_tls::Roots::System);
        assert!(
            s.warnings.iter().any(|w| w.contains("--keystone-insecure")),
            "{:?}",
            s.warnings
        );
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
    fn save_view_every_precedence_and_0_for_only_at_a_stop() {
        let secs = std::time::Duration::from_secs;
        precedence(
            ["--save-view-every", "0"],
            ("ALLOT_SAVE_VIEW_EVERY", "60"),
            "save_view_every = 600",
            |s| s.save_view_every,
            [
                None,
                Some(secs(60)),
                Some(secs(600)),
                Some(allot_store::SAVE_VIEW_EVERY),
            ],
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
        // Keystone without its endpoint or password, or with a CA file that is not
        // there, says what is missing.
        assert!(error(&["--auth", "keystone"], &[], None).contains("--keystone-url"));
        let m = error(
            &["--auth", "keystone", "--keystone-url", "http://k"],
            &[],
            None,
        );
        assert!(m.contains("ALLOT_KEYSTONE_PASSWORD"), "{m}");
        let m = error(
            &["--auth", "keystone", "--keystone-url", "https://k"],
            &[
                ("ALLOT_KEYSTONE_PASSWORD", "x"),
                ("ALLOT_KEYSTONE_CAFILE", "/nonexistent/ca.pem"),
            ],
            None,
        );
        assert!(
            m.contains("TLS to Keystone") && m.contains("/nonexistent/ca.pem"),
            "{m}"
        );
        assert!(error(&[], &[("ALLOT_AUTH", "none")], None).contains("ALLOT_AUTH"));
    }

    #[test]
    fn the_keystone_password_from_a_file_and_a_warning_for_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\nignored\n").unwrap();
        let file = file.to_str().unwrap();
        let keystone = ["--auth", "keystone", "--keystone-url", "http://k:5000/v3"];
        let password = |s: &Settings| match &s.auth {
            Auth::Keystone(k) => k.password.clone(),
            other => panic!("{other:?}"),
        };
        // From the file: its first line, and no warning.
        let argv = [&keystone[..], &["--keystone-password-file", file]].concat();
        let s = resolve(&argv, &[], None).unwrap();
        assert_eq!(password(&s), "s3cret");
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        // The variable is below the file's flag; the flag above the file's variable.
        let s = resolve(&argv, &[("ALLOT_KEYSTONE_PASSWORD", "env")], None).unwrap();
        assert_eq!(password(&s), "s3cret");
        let argv_pw = [&keystone[..], &["--keystone-password", "pw-from-flag"]].concat();
        let s = resolve(&argv_pw, &[("ALLOT_KEYSTONE_PASSWORD_FILE", file)], None).unwrap();
        assert_eq!(password(&s), "pw-from-flag");
        // The flag is warned of, naming the better ways and not the password.
        assert_eq!(s.warnings.len(), 1);
        assert!(
            s.warnings[0].contains("--keystone-password-file"),
            "{:?}",
            s.warnings
        );
        assert!(!s.warnings[0].contains("pw-from-flag"), "{:?}", s.warnings);
        // Both from one source: refused, naming both.
        let both = [&argv[..], &["--keystone-password", "x"]].concat();
        let m = error(&both, &[], None);
        assert!(m.contains("--keystone-password-file"), "{m}");
        assert!(m.contains("keep one"), "{m}");
        // A missing or empty file: refused, naming where it came from.
        let missing = [
            &keystone[..],
            &["--keystone-password-file", "/nonexistent/pw"],
        ]
        .concat();
        let m = error(&missing, &[], None);
        assert!(
            m.contains("--keystone-password-file") && m.contains("/nonexistent/pw"),
            "{m}"
        );
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let argv = [
            &keystone[..],
            &["--keystone-password-file", empty.to_str().unwrap()],
        ]
        .concat();
        assert!(error(&argv, &[], None).contains("holds no password"));
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
        assert_eq!(args(&["--policy", "legacy"]).flags["policy"], "legacy");
    }

    /// Two values for a declared setting, the first not its default, found from the
    /// declaration (its possible values, else the kind its value name says).
    fn samples(arg: &clap::Arg) -> [String; 2] {
        let default = arg
            .get_default_values()
            .first()
            .map(|d| d.to_string_lossy().into_owned());
        let names: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_owned())
            .collect();
        if !names.is_empty() {
            let mut others = names.iter().filter(|n| Some(*n) != default.as_ref());
            let first = others.next().expect("a value besides the default").clone();
            let second = others.next().cloned().or(default).expect("two values");
            return [first, second];
        }
        let kind = arg.get_value_names().expect("every flag names its value")[0].as_str();
        // The one URL that must be an http(s):// one.
        if arg.get_id() == "advertise_url" {
            return ["http://one:1".to_owned(), "https://two:2".to_owned()];
        }
        let [a, b] = match kind {
            "IP:PORT" => ["127.0.0.1:1", "[::1]:2"],
            "SECONDS" | "N" | "MS" => ["7", "9"],
            "FILTER" => ["debug", "allot=trace"],
            "URL" | "FILE" | "PATH" | "NAME" | "PASSWORD" | "ORIGIN" => ["/one", "/two"],
            other => panic!("{}: add samples for a value named {other}", arg.get_id()),
        };
        [a.to_owned(), b.to_owned()]
    }

    /// `value` as setting `id` holds it when given through its flag alone.
    fn typed(id: &str, flag: &str, value: &str) -> serde_json::Value {
        let m = layers::declared()
            .try_get_matches_from([format!("{flag}={value}")])
            .unwrap();
        let layer = Layer::from_arg_matches(&m).unwrap();
        serde_json::to_value(&layer).unwrap()[id].clone()
    }

    #[test]
    fn every_setting_reaches_its_field_from_each_source_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.toml");
        let mut checked = 0;
        for arg in layers::declared().get_arguments() {
            let id = arg.get_id().as_str();
            // The two files are sources, checked by their own tests.
            if id == "config" || id == "placement_conf" {
                continue;
            }
            let flag = format!("--{}", arg.get_long().unwrap());
            let var = layers::env_var(id);
            let [a, b] = samples(arg);
            // The file's line for a value, written from the value as the flag types it.
            let line = |v: &str| {
                let value = toml::Value::try_from(typed(id, &flag, v)).unwrap();
                format!("{id} = {value}\n")
            };
            let merge = |argv: &[String], vars: &[(&str, &str)], file: Option<String>| {
                let mut full = vec!["allot".to_owned()];
                full.extend_from_slice(argv);
                let flags = Cli::try_parse_from(full).unwrap().serve;
                let config = file.map(|text| {
                    std::fs::write(&path, text).unwrap();
                    path.clone()
                });
                let vars: HashMap<String, String> = vars
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect();
                let merged = layers::merge(&flags.flags, config, &|k| vars.get(k).cloned())
                    .unwrap_or_else(|e| panic!("{id}: {e:#}"));
                let value = serde_json::to_value(&merged.layer).unwrap()[id].clone();
                (value, merged.source(id).clone())
            };
            let given = [format!("{flag}={a}")];
            assert_eq!(
                merge(&given, &[(&var, &b)], Some(line(&b))),
                (typed(id, &flag, &a), layers::Source::Flag(flag.clone())),
                "{id}: the flag wins over the variable and the file"
            );
            assert_eq!(
                merge(&[], &[(&var, &a)], Some(line(&b))),
                (typed(id, &flag, &a), layers::Source::Env(var.clone())),
                "{id}: the variable wins over the file"
            );
            assert_eq!(
                merge(&[], &[], Some(line(&a))),
                (typed(id, &flag, &a), layers::Source::File(path.clone())),
                "{id}: the file wins over the default"
            );
            let (value, source) = merge(&[], &[], None);
            assert_eq!(source, layers::Source::Default, "{id}");
            match arg.get_default_values().first() {
                Some(d) => assert_eq!(value, typed(id, &flag, &d.to_string_lossy()), "{id}"),
                // The defaults that depend on the environment are computed later.
                None => assert!(
                    matches!(value, serde_json::Value::Null | serde_json::Value::Array(_)),
                    "{id}: {value}"
                ),
            }
            checked += 1;
        }
        assert_eq!(checked, 36, "every setting is checked");
    }

    /// A kolla-style placement.conf, shaped like the sample deployment tools render
    /// (keystone auth, a policy file, Placement's MySQL database), over http.
    const KOLLA: &str = "\
[DEFAULT]
debug = True
log_dir = /var/log/kolla/placement
transport_url = rabbit://openstack:RABBIT@192.0.2.10:5672//

[api]
auth_strategy = keystone

[placement_database]
connection = mysql+pymysql://placement:DB_PASS@192.0.2.20:3306/placement
max_pool_size = 50

[keystone_authtoken]
www_authenticate_uri = http://192.0.2.30:5000
auth_url = http://192.0.2.30:5000
auth_type = password
project_domain_id = default
user_domain_id = default
project_name = service
username = placement
password = PLACEMENT_PASS
region_name = RegionOne
memcache_secret_key = MEMCACHE_KEY

[oslo_policy]
policy_file = policy.yaml
enforce_new_defaults = False

[placement]
randomize_allocation_candidates = true
max_allocation_candidates = 1000
incomplete_consumer_project_id = 00000000-0000-0000-0000-000000000000
";

    /// Resolves with a placement.conf of `text` named by `--placement-conf`, beside
    /// `argv`, `env` and allot's own file.
    fn resolve_conf(
        text: &str,
        argv: &[&str],
        env: &[(&str, &str)],
        file: Option<&str>,
    ) -> (anyhow::Result<Settings>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("placement.conf");
        std::fs::write(&path, text).unwrap();
        let mut full = vec!["--placement-conf", path.to_str().unwrap()];
        full.extend_from_slice(argv);
        (resolve(&full, env, file), dir)
    }

    #[test]
    fn placement_conf_gives_what_allot_understands() {
        let (s, dir) = resolve_conf(KOLLA, &["--database", "sqlite:/a.db"], &[], None);
        let s = s.unwrap();
        assert_eq!(s.log, "debug");
        assert_eq!(s.policy, PolicyMode::Legacy, "enforce_new_defaults = False");
        assert_eq!(s.policy_file, Some(dir.path().join("policy.yaml")));
        assert!(s.randomize_allocation_candidates);
        assert_eq!(s.max_allocation_candidates, 1000);
        let Auth::Keystone(k) = &s.auth else {
            panic!("{:?}", s.auth)
        };
        assert_eq!(k.auth_url, "http://192.0.2.30:5000");
        assert_eq!(
            (
                k.username.as_str(),
                k.password.as_str(),
                k.project_name.as_str()
            ),
            ("placement", "PLACEMENT_PASS", "service")
        );
        assert_eq!(k.user_domain_name, "Default", "the id `default` is Default");
        // Every other key is listed, once, in the file's order; no value is shown.
        let conf = s.placement_conf.unwrap();
        assert_eq!(
            conf.unused,
            [
                "[DEFAULT] log_dir",
                "[DEFAULT] transport_url",
                "[placement_database] connection",
                "[placement_database] max_pool_size",
                "[keystone_authtoken] region_name",
                "[keystone_authtoken] memcache_secret_key",
                "[placement] incomplete_consumer_project_id",
            ]
        );
    }

    #[test]
    fn placement_conf_is_below_allot_s_own_sources() {
        let conf = "[placement]\nmax_allocation_candidates = 4\n[DEFAULT]\ndebug = true\n";
        let max = |argv: &[&str], env: &[(&str, &str)], file: Option<&str>| {
            resolve_conf(conf, argv, env, file)
                .0
                .unwrap()
                .max_allocation_candidates
        };
        let file = Some("max_allocation_candidates = 3");
        let var = [("ALLOT_MAX_ALLOCATION_CANDIDATES", "2")];
        assert_eq!(max(&["--max-allocation-candidates", "1"], &var, file), 1);
        assert_eq!(max(&[], &var, file), 2);
        assert_eq!(max(&[], &[], file), 3);
        assert_eq!(max(&[], &[], None), 4);
        let default = resolve(&[], &[], None).unwrap().max_allocation_candidates;
        assert_eq!(default, allot_core::candidates::DEFAULT_MAX_CANDIDATES);
        let (s, _dir) = resolve_conf(conf, &[], &[("ALLOT_LOG", "warn")], None);
        assert_eq!(s.unwrap().log, "warn");
        // Placement's -1 (no limit) is listed, with why, and allot's bound stays.
        let (s, _dir) = resolve_conf(
            "[placement]\nmax_allocation_candidates = -1\n",
            &[],
            &[],
            None,
        );
        let s = s.unwrap();
        assert_eq!(s.max_allocation_candidates, default);
        let unused = &s.placement_conf.unwrap().unused;
        assert!(
            unused[0].starts_with("[placement] max_allocation_candidates (no limit"),
            "{unused:?}"
        );
    }

    #[test]
    fn placement_conf_is_named_by_flag_variable_or_file() {
        let dir = tempfile::tempdir().unwrap();
        let conf = |name: &str, n: u32| {
            let path = dir.path().join(name);
            let text = format!("[placement]\nmax_allocation_candidates = {n}\n");
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        };
        let (a, b, c) = (conf("a.conf", 1), conf("b.conf", 2), conf("c.conf", 3));
        let file = format!("placement_conf = {c:?}");
        let max = |argv: &[&str], env: &[(&str, &str)], file: Option<&str>| {
            resolve(argv, env, file).unwrap().max_allocation_candidates
        };
        let var = [("ALLOT_PLACEMENT_CONF", b.as_str())];
        assert_eq!(max(&["--placement-conf", &a], &var, Some(&file)), 1);
        assert_eq!(max(&[], &var, Some(&file)), 2);
        assert_eq!(max(&[], &[], Some(&file)), 3);
    }

    #[test]
    fn placement_s_own_database_is_refused_with_the_way_to_import_it() {
        let (s, _dir) = resolve_conf(KOLLA, &[], &[], None);
        let message = format!("{:#}", s.expect_err("no database of allot's is named"));
        for needed in [
            "[placement_database] connection",
            "mysql+pymysql://placement:***@192.0.2.20:3306/placement",
            "allot import --from-placement",
            "--database",
        ] {
            assert!(message.contains(needed), "{needed}: {message}");
        }
        assert!(!message.contains("DB_PASS"), "{message}");
        // allot's own database, from any of its sources, is served instead.
        for (argv, env, file) in [
            (&["--database", "sqlite:/a.db"][..], &[][..], None),
            (&[], &[("ALLOT_DATABASE", "sqlite:/a.db")], None),
            (&[], &[], Some("database = \"sqlite:/a.db\"")),
        ] {
            let (s, _dir) = resolve_conf(KOLLA, argv, env, file);
            assert_eq!(s.unwrap().database, "sqlite:/a.db");
        }
        // `allot db sync` finds the database the same way.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("placement.conf");
        std::fs::write(&path, KOLLA).unwrap();
        let args = |database: Option<&str>| DatabaseArgs {
            database: database.map(str::to_owned),
            config: None,
            placement_conf: Some(path.clone()),
        };
        let none = |_: &str| None;
        let message = format!("{:#}", args(None).resolve(&none).unwrap_err());
        assert!(
            message.contains("allot import --from-placement"),
            "{message}"
        );
        assert_eq!(
            args(Some("sqlite:/b.db")).resolve(&none).unwrap(),
            "sqlite:/b.db"
        );
    }

    #[test]
    fn placement_conf_bad_values_name_their_key() {
        for (text, needed) in [
            (
                "[placement]\nmax_allocation_candidates = many\n",
                "[placement] max_allocation_candidates",
            ),
            (
                "[placement]\nrandomize_allocation_candidates = perhaps\n",
                "[placement] randomize_allocation_candidates",
            ),
            ("[DEFAULT]\ndebug = loud\n", "[DEFAULT] debug"),
            ("[api]\nauth_strategy = magic\n", "[api] auth_strategy"),
            (
                "[keystone_authtoken]\nuser_domain_id = 4f2e\n",
                "user_domain_name",
            ),
            (
                "[keystone_authtoken]\nuser_domain_name = A\nproject_domain_name = B\n",
                "one domain",
            ),
            ("[placement\n", "placement.conf"),
        ] {
            let (s, _dir) = resolve_conf(text, &[], &[], None);
            let message = format!("{:#}", s.expect_err(text));
            assert!(message.contains(needed), "{text}: {message}");
            assert!(message.contains("placement.conf"), "{text}: {message}");
        }
        // A value refused after the merge names the key it came from.
        let (s, _dir) = resolve_conf(
            "[placement]\nmax_allocation_candidates = 0\n",
            &[],
            &[],
            None,
        );
        let message = format!("{:#}", s.unwrap_err());
        assert!(
            message.contains("([placement] max_allocation_candidates)"),
            "{message}"
        );
        let missing = resolve(
            &["--placement-conf", "/nonexistent/placement.conf"],
            &[],
            None,
        );
        assert!(format!("{:#}", missing.unwrap_err()).contains("/nonexistent/placement.conf"));
    }

    #[test]
    fn every_flag_names_its_variable_in_its_help() {
        let cmd = ServeArgs::augment_args(Command::new("serve"));
        for arg in cmd.get_arguments() {
            let help = arg.get_help().unwrap().to_string();
            let var = layers::env_var(arg.get_id().as_str());
            assert!(help.ends_with(&format!("[env: {var}]")), "{help}");
        }
        let config = cmd
            .get_arguments()
            .find(|a| a.get_id() == "config")
            .unwrap();
        let help = config.get_help().unwrap().to_string();
        assert!(
            help.contains("cors_allowed_origins, cors_allow_headers"),
            "{help}"
        );
    }
}
