//! The one declaration of `allot serve`'s settings, [`Layer`]: one field a setting,
//! whose name is the config file's key, whose clap attributes make its flag (the doc
//! comment is the help, `default_value` the default, `value_parser` the check of a
//! value), and whose environment variable is the name upper-cased behind `ALLOT_`.
//! Beside it, the enums the settings take and the defaults declared here rather than
//! by the crates that read them.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use super::parse::{
    parse_advertise_url, parse_auth, parse_bind, parse_count, parse_database_name,
    parse_log_format, parse_policy, parse_public_url, parse_seconds, variants, Spelled, BOOL,
};

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
/// The default name of allot's database beside Placement's (`--database-name`).
pub const DEFAULT_DATABASE_NAME: &str = "allot";
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
    pub(super) bind: Option<SocketAddr>,

    /// Database URL: `sqlite:PATH`, created on first start [default:
    /// sqlite:$XDG_DATA_HOME/allot/allot.db, i.e. ~/.local/share/allot/allot.db].
    #[arg(long, value_name = "URL")]
    pub(super) database: Option<String>,

    /// With --placement-conf naming Placement's MariaDB/MySQL database and no
    /// --database: allot's database on that server, reached with Placement's
    /// credentials (another than Placement's). allot serves it once it holds a commit
    /// (`allot import --from-placement` into it), or while Placement's holds no
    /// provider; else it refuses to start (docs/migrate.md).
    #[arg(long, value_name = "NAME", value_parser = parse_database_name,
          default_value = DEFAULT_DATABASE_NAME)]
    pub(super) database_name: Option<String>,

    /// TOML file with any of these settings, each under its name with underscores;
    /// flags and environment variables win over it.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub(super) config: Option<PathBuf>,

    /// OpenStack Placement's placement.conf: the settings allot understands are taken
    /// from it (below this file), every other key is listed in a warning at start.
    #[arg(long, value_name = "FILE")]
    pub(super) placement_conf: Option<PathBuf>,

    /// Enable CORS for this origin (repeat for several, or separate with commas; `*`
    /// for any). Off by default.
    #[arg(
        long = "cors-allowed-origin",
        value_delimiter = ',',
        value_name = "ORIGIN"
    )]
    #[serde(default)]
    pub(super) cors_allowed_origins: Vec<String>,

    /// With CORS on: a request header a browser may send (repeat for several, or
    /// separate with commas).
    #[arg(long = "cors-allow-header", value_delimiter = ',', value_name = "NAME")]
    #[serde(default)]
    pub(super) cors_allow_headers: Vec<String>,

    /// The URL people's browsers reach this service at (https://allot.example.com,
    /// a proxy's): the web UI takes a form only from this origin [default: the
    /// address the connection came in on, http:// or https:// as served].
    #[arg(long, value_name = "URL", value_parser = parse_public_url)]
    pub(super) public_url: Option<String>,

    /// Authorization rules: the default is what Placement 16 enforces out of the box;
    /// `legacy` lets an admin token without the `service` role reshape.
    #[arg(long, value_name = "MODE", default_value = shown!(DEFAULT_POLICY),
          value_parser = Spelled { parse: parse_policy, values: variants::<Policy> })]
    pub(super) policy: Option<Policy>,

    /// An oslo.policy file whose rules replace the built-in ones they name
    /// (`"placement:resource_providers:list": "role:reader or role:admin"`), reread on
    /// SIGHUP [default: none].
    #[arg(long, value_name = "FILE")]
    pub(super) policy_file: Option<PathBuf>,

    /// How callers are authenticated; noauth2 is refused on an address other than
    /// loopback without --insecure-noauth.
    #[arg(long, value_name = "MODE", default_value = shown!(AuthMode::Noauth2),
          value_parser = Spelled { parse: parse_auth, values: variants::<AuthMode> })]
    pub(super) auth: Option<AuthMode>,

    /// Allow --auth noauth2 on an address other than loopback: anyone who can reach
    /// it is whoever they claim to be.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = BOOL)]
    pub(super) insecure_noauth: Option<bool>,

    /// With --auth tokens: the token file, JSON, managed by `allot token` [default:
    /// $XDG_DATA_HOME/allot/tokens.json].
    #[arg(long, value_name = "FILE")]
    pub(super) token_file: Option<PathBuf>,

    /// With --auth keystone: the Identity endpoint, http://HOST:PORT[/PATH].
    #[arg(long, value_name = "URL")]
    pub(super) keystone_url: Option<String>,

    /// With --auth keystone: allot's service user.
    #[arg(long, value_name = "NAME", default_value = "placement")]
    pub(super) keystone_user: Option<String>,

    /// With --auth keystone: the service user's password. As a flag it is visible to
    /// every local user in the process list (a warning says so at start): prefer the
    /// variable, the config file or --keystone-password-file.
    #[arg(long, value_name = "PASSWORD")]
    pub(super) keystone_password: Option<String>,

    /// With --auth keystone: a file whose first line is the service user's password
    /// (keep it readable by allot alone); where it and --keystone-password both come
    /// from one source, that is an error, else the one of higher precedence wins.
    #[arg(long, value_name = "FILE")]
    pub(super) keystone_password_file: Option<PathBuf>,

    /// With --auth keystone and an https:// URL: the CA certificates (PEM) Keystone's
    /// certificate must lead to [default: the system's].
    #[arg(long, value_name = "FILE")]
    pub(super) keystone_cafile: Option<PathBuf>,

    /// With --auth keystone and an https:// URL: a client certificate (PEM) to show
    /// Keystone, with --keystone-keyfile.
    #[arg(long, value_name = "FILE")]
    pub(super) keystone_certfile: Option<PathBuf>,

    /// With --auth keystone: the key (PEM) of --keystone-certfile.
    #[arg(long, value_name = "FILE")]
    pub(super) keystone_keyfile: Option<PathBuf>,

    /// With --auth keystone and an https:// URL: accept any certificate Keystone shows
    /// (encrypted, but open to whoever sits between; for testing only).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = BOOL)]
    pub(super) keystone_insecure: Option<bool>,

    /// With --auth keystone: the project allot's token is scoped to.
    #[arg(long, value_name = "NAME", default_value = "service")]
    pub(super) keystone_project: Option<String>,

    /// With --auth keystone: the domain of the user and of the project, by name.
    #[arg(long, value_name = "NAME", default_value = "Default")]
    pub(super) keystone_domain: Option<String>,

    /// With --auth keystone: how long a validated token is cached, in seconds; never
    /// past its expiry; 0 turns the cache off.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::auth::keystone::DEFAULT_CACHE_TTL.as_secs()))]
    pub(super) token_cache_ttl: Option<u64>,

    /// Log filter, in tracing's EnvFilter syntax.
    #[arg(long, value_name = "FILTER", default_value = DEFAULT_LOG)]
    pub(super) log: Option<String>,

    /// Answer GET /allocation_candidates with a random sample of the candidates
    /// (gathered round-robin over the matching trees, up to
    /// --max-allocation-candidates) instead of their deterministic order, like
    /// Placement's randomize_allocation_candidates.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = BOOL)]
    pub(super) randomize_allocation_candidates: Option<bool>,

    /// The most candidates one GET /allocation_candidates generates; a request's
    /// `limit` applies within it, and a request without `limit` gets at most this
    /// many.
    #[arg(long, value_name = "N", value_parser = parse_count,
          default_value = shown!(allot_core::candidates::DEFAULT_MAX_CANDIDATES))]
    pub(super) max_allocation_candidates: Option<usize>,

    /// How long a pending claim lasts when its POST /claims leaves `expires_in` out,
    /// in seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::DEFAULT_CLAIM_EXPIRES_IN))]
    pub(super) claim_expires_in: Option<u64>,

    /// How long an ended claim (confirmed, released, expired) is kept before the
    /// sweeper forgets it, in seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::DEFAULT_CLAIM_RETENTION))]
    pub(super) claim_retention: Option<u64>,

    /// How often the sweeper runs, in seconds. Expiry itself is exact whatever this
    /// is: the sweeper only tidies up.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::DEFAULT_CLAIM_SWEEP_INTERVAL.as_secs()))]
    pub(super) claim_sweep_interval: Option<u64>,

    /// While this file exists, GET /healthcheck answers 503 `DISABLED BY FILE`, so
    /// that a load balancer drains the node before a restart (oslo's
    /// disable_by_file_path) [default: none].
    #[arg(long, value_name = "PATH")]
    pub(super) healthcheck_disable_file: Option<PathBuf>,

    /// The log's form: text, or one JSON object a line.
    #[arg(long, value_name = "FORMAT", default_value = shown!(LogFormat::Text),
          value_parser = Spelled { parse: parse_log_format, values: variants::<LogFormat> })]
    pub(super) log_format: Option<LogFormat>,

    /// A request that takes longer than this, in milliseconds, is logged at WARN
    /// with slow=true; 0 never.
    #[arg(long, value_name = "MS", value_parser = parse_count,
          default_value = shown!(allot_server::DEFAULT_SLOW_REQUEST.as_millis()))]
    pub(super) slow_request_ms: Option<usize>,

    /// On SIGTERM or SIGINT, how long requests under way get to finish, in seconds,
    /// before allot stops anyway (a second signal stops it at once).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(DEFAULT_SHUTDOWN_GRACE))]
    pub(super) shutdown_grace: Option<u64>,

    /// How long a client may take to send a request head, in seconds, from its
    /// connection's acceptance (or, on a kept-alive connection, from the head's first
    /// byte); then the connection is closed. Also bounds a TLS handshake.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::limits::DEFAULT_HEAD_TIMEOUT.as_secs()))]
    pub(super) head_timeout: Option<u64>,

    /// How long a client may take to send a request body once its head is read, in
    /// seconds (then it is answered 408), and to take an answer once it is ready
    /// (then the connection is closed).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::limits::DEFAULT_BODY_TIMEOUT.as_secs()))]
    pub(super) body_timeout: Option<u64>,

    /// How long a connection may stay open between an answer and the next request,
    /// in seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::limits::DEFAULT_IDLE_TIMEOUT.as_secs()))]
    pub(super) idle_timeout: Option<u64>,

    /// The most connections open at once on the API's listener (kept below the
    /// open-file limit). At the cap, the connection that has waited longest for a
    /// request is closed to make room; while every one is busy, new connections wait
    /// in the kernel's listen queue.
    #[arg(long, value_name = "N", value_parser = parse_count,
          default_value = shown!(allot_server::limits::DEFAULT_MAX_CONNECTIONS))]
    pub(super) max_connections: Option<usize>,

    /// On SQLite: how often, in seconds, the view is saved beside the database while
    /// the server runs (when anything was written since), so that a start after a
    /// crash reads it and the commits after it instead of every table; 0 saves it
    /// only at a clean stop. Ignored on PostgreSQL.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_store::SAVE_VIEW_EVERY.as_secs()))]
    pub(super) save_view_every: Option<u64>,

    /// Serve HTTPS (HTTP/1.1 and HTTP/2) with this certificate, PEM, its chain after
    /// it; with --tls-key. Reread on SIGHUP, with the key: the next connections get
    /// the new one. The --metrics-bind listener uses it too [default: plain HTTP].
    #[arg(long, value_name = "FILE")]
    pub(super) tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE")]
    pub(super) tls_key: Option<PathBuf>,

    /// Also serve GET /metrics on this address, to anyone who can reach it (a
    /// scraper on a private network) [default: none: /metrics only on the API's
    /// port, to a token the allot:metrics rule allows].
    #[arg(long, value_name = "IP:PORT", value_parser = parse_bind)]
    pub(super) metrics_bind: Option<SocketAddr>,

    /// /metrics writes openstack-exporter's series per provider and resource class
    /// while the cloud has at most this many providers; in a larger one it leaves
    /// them out (four series per inventory: ten million at a million providers) and
    /// the sums by class remain. 0 never writes them.
    #[arg(long, value_name = "N", value_parser = parse_count,
          default_value = shown!(allot_server::metrics::DEFAULT_PROVIDER_SERIES))]
    pub(super) metrics_providers: Option<usize>,

    /// How often, at most, /metrics' counts of the named shapes (allot_headroom,
    /// allot_stranded) are made again, in seconds: in the background, while
    /// /metrics is scraped, so that a scrape only reads the last counts.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds,
          default_value = shown!(allot_server::metrics::DEFAULT_SHAPE_COUNTS_INTERVAL.as_secs()))]
    pub(super) shape_counts_interval: Option<u64>,

    /// On a PostgreSQL database that several nodes share: the URL the other nodes
    /// reach this one at. While this node holds the cluster's writer lease, they
    /// forward their writes to it, so that one writer batches them all; "none" keeps
    /// it from taking the lease (it then forwards to whoever holds it) [default:
    /// http://IP:PORT of --bind when it names one address and serves plain HTTP,
    /// else none].
    #[arg(long, value_name = "URL", value_parser = parse_advertise_url)]
    pub(super) advertise_url: Option<String>,
}
