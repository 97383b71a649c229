//! `allot serve` settings: each declared once, in [`Layer`], and merged from four
//! sources into validated [`Settings`].
//!
//! A setting travels one hop. [`validate`] builds the process's own settings (where
//! to listen, the database, the log, the files it opens, how it stops) and, straight
//! from the merged [`Layer`], the server's [`allot_server::Settings`], which the
//! server holds whole and reads where each setting is used. A new server setting is
//! its `Layer` field (flag, variable, file key, default, parser), its typed field of
//! `allot_server::Settings`, and its field in `validate::server_settings`.
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

mod auth;
mod declaration;
mod layers;
mod parse;
mod placement_conf;
mod tls;
mod validate;

pub use auth::Auth;
pub use declaration::{AuthMode, Layer, LogFormat, Policy, DEFAULT_POLICY};
pub use placement_conf::{Connection, PlacementConf};
pub use tls::ServerTlsFiles;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgMatches, Args, Command, FromArgMatches};

use layers::Values;

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

/// Validated settings: what the process itself uses (where to listen, the database,
/// the log, the files it opens and rereads, how it stops), and the server's own
/// settings, handed to it whole.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bind: SocketAddr,
    pub database: String,
    /// Set when `database` was found beside Placement's (`--placement-conf`, no
    /// `--database`): the start checks that it may serve it.
    pub beside_placement: Option<BesidePlacement>,
    pub log: String,
    pub log_format: LogFormat,
    pub auth: Auth,
    /// The policy file, which the process opens and rereads on SIGHUP.
    pub policy_file: Option<PathBuf>,
    /// HTTPS: the certificate and its key.
    pub tls: Option<ServerTlsFiles>,
    /// The placement.conf read, for the warning that lists the keys not used.
    pub placement_conf: Option<placement_conf::PlacementConf>,
    pub shutdown_grace: std::time::Duration,
    /// How often the view is saved while the server runs (SQLite); `None`: only at a
    /// clean stop.
    pub save_view_every: Option<std::time::Duration>,
    pub metrics_bind: Option<SocketAddr>,
    /// Where other nodes reach this one: `Some("")` for none, `None` for the
    /// default (made from the address bound, see [`Settings::advertise_url`]).
    pub advertise_url: Option<String>,
    /// What the start logs as warnings about the settings themselves.
    pub warnings: Vec<String>,
    /// What the server reads, built from the merged settings directly
    /// ([`validate::server_settings`]).
    pub server: allot_server::Settings,
}

/// allot's database found beside Placement's, on the MariaDB server of
/// placement.conf's `[placement_database] connection` (`validate::database`): what
/// `allot serve` needs to decide whether it may serve it, and to say how to make it
/// servable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BesidePlacement {
    /// placement.conf, for messages.
    pub conf: PathBuf,
    /// Placement's database: the start asks it how many providers it holds.
    pub placement: Connection,
    /// allot's database's name on that server (`--database-name`).
    pub name: String,
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

impl ServeArgs {
    /// Merges flags, the process environment, the file and the defaults.
    pub fn resolve(self) -> anyhow::Result<Settings> {
        self.resolve_with(&process_env)
    }

    /// [`ServeArgs::resolve`] with `env` standing for the environment (unset and empty
    /// variables are `None`).
    pub fn resolve_with(self, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Settings> {
        let merged = layers::merge(&self.flags, self.config, env)?;
        validate::settings(merged, env)
    }
}

/// The flags of the commands that only open the database (`allot db migrate`, alias
/// `sync`): it is found as `allot serve` finds it.
#[derive(clap::Args, Debug)]
pub struct DatabaseArgs {
    /// The database URL (sqlite:PATH, postgres://... or mysql://...) [env:
    /// ALLOT_DATABASE].
    #[arg(long, value_name = "URL")]
    database: Option<String>,
    /// allot's TOML config file, for its `database` [env: ALLOT_CONFIG].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Placement's placement.conf: with no database of allot's named, a MariaDB/MySQL
    /// `[placement_database] connection` there names the server of allot's database
    /// (--database-name), and a PostgreSQL one is refused with the way to import it
    /// [env: ALLOT_PLACEMENT_CONF].
    #[arg(long, value_name = "FILE")]
    placement_conf: Option<PathBuf>,
    /// With --placement-conf and no --database: allot's database on the server of
    /// Placement's [default: allot] [env: ALLOT_DATABASE_NAME].
    #[arg(long, value_name = "NAME", value_parser = parse::parse_database_name)]
    database_name: Option<String>,
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
        if let Some(name) = self.database_name {
            flags.insert("database_name".into(), name.into());
        }
        let merged = layers::merge(&flags, self.config, env)?;
        // Migrating never serves: whether allot's database beside Placement's may be
        // served is `allot serve`'s question.
        validate::database(&merged, env).map(|database| database.url)
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

    /// A default start hands the server exactly its own defaults: each server
    /// setting's default is declared once, in `allot_server::Settings`, and the
    /// binary's `Layer` shows it.
    #[test]
    fn the_declared_defaults_are_the_server_s() {
        let s = resolve(&[], &[], None).unwrap();
        assert_eq!(s.server, allot_server::Settings::default());
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
            |s| s.server.policy,
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
            |s| s.server.cors.as_ref().map(|c| c.allowed_origins.clone()),
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
            |s| s.server.cors.as_ref().map(|c| c.allow_headers.clone()),
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
            |s| s.server.randomize_allocation_candidates,
            [false, true, false, false],
        );
        // The bare flag means true, over a variable that says false.
        let s = resolve(
            &["--randomize-allocation-candidates"],
            &[("ALLOT_RANDOMIZE_ALLOCATION_CANDIDATES", "false")],
            None,
        )
        .unwrap();
        assert!(s.server.randomize_allocation_candidates);
        precedence(
            ["--max-allocation-candidates", "20"],
            ("ALLOT_MAX_ALLOCATION_CANDIDATES", "30"),
            "max_allocation_candidates = 500",
            |s| s.server.max_allocation_candidates,
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
            |s| s.server.claim_expires_in,
            [60, 120, 180, allot_server::DEFAULT_CLAIM_EXPIRES_IN],
        );
        precedence(
            ["--claim-retention", "0"],
            ("ALLOT_CLAIM_RETENTION", "10"),
            "claim_retention = 20",
            |s| s.server.claim_retention,
            [0, 10, 20, allot_server::DEFAULT_CLAIM_RETENTION],
        );
        precedence(
            ["--claim-sweep-interval", "1"],
            ("ALLOT_CLAIM_SWEEP_INTERVAL", "2"),
            "claim_sweep_interval = 3",
            |s| s.server.claim_sweep_interval.as_secs(),
            [
                1,
                2,
                3,
                allot_server::DEFAULT_CLAIM_SWEEP_INTERVAL.as_secs(),
            ],
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
        assert_eq!(s.server.policy, PolicyMode::Open);
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
        // The one URL that must be an http(s):// one, and the one name that must be a
        // plain identifier.
        match arg.get_id().as_str() {
            "advertise_url" => return ["http://one:1".to_owned(), "https://two:2".to_owned()],
            "public_url" => return ["http://one:1".to_owned(), "https://two".to_owned()],
            "database_name" => return ["one".to_owned(), "two".to_owned()],
            _ => {}
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
        assert_eq!(checked, 43, "every setting is checked");
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
        assert_eq!(
            s.server.policy,
            PolicyMode::Legacy,
            "enforce_new_defaults = False"
        );
        assert_eq!(s.policy_file, Some(dir.path().join("policy.yaml")));
        assert!(s.server.randomize_allocation_candidates);
        assert_eq!(s.server.max_allocation_candidates, 1000);
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
                .server
                .max_allocation_candidates
        };
        let file = Some("max_allocation_candidates = 3");
        let var = [("ALLOT_MAX_ALLOCATION_CANDIDATES", "2")];
        assert_eq!(max(&["--max-allocation-candidates", "1"], &var, file), 1);
        assert_eq!(max(&[], &var, file), 2);
        assert_eq!(max(&[], &[], file), 3);
        assert_eq!(max(&[], &[], None), 4);
        let default = resolve(&[], &[], None)
            .unwrap()
            .server
            .max_allocation_candidates;
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
        assert_eq!(s.server.max_allocation_candidates, default);
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
            resolve(argv, env, file)
                .unwrap()
                .server
                .max_allocation_candidates
        };
        let var = [("ALLOT_PLACEMENT_CONF", b.as_str())];
        assert_eq!(max(&["--placement-conf", &a], &var, Some(&file)), 1);
        assert_eq!(max(&[], &var, Some(&file)), 2);
        assert_eq!(max(&[], &[], Some(&file)), 3);
    }

    /// KOLLA's connection, on the same server, under another database's name.
    const KOLLA_BESIDE: &str = "mysql+pymysql://placement:DB_PASS@192.0.2.20:3306/allot";

    #[test]
    fn allot_s_database_is_found_beside_placement_s_on_mariadb() {
        let (s, dir) = resolve_conf(KOLLA, &[], &[], None);
        let s = s.unwrap();
        assert_eq!(s.database, KOLLA_BESIDE);
        let beside = s.beside_placement.expect("found beside Placement's");
        assert_eq!(beside.conf, dir.path().join("placement.conf"));
        assert_eq!(beside.name, "allot");
        assert_eq!(
            beside.placement.url(),
            "mysql+pymysql://placement:DB_PASS@192.0.2.20:3306/placement"
        );
        // The connection is used, so not listed; and no Debug shows its password.
        let conf = s.placement_conf.unwrap();
        assert!(
            !conf
                .unused
                .contains(&"[placement_database] connection".to_owned()),
            "{:?}",
            conf.unused
        );
        assert!(!format!("{beside:?} {conf:?}").contains("DB_PASS"));
        // The name from each of allot's sources, in their order.
        let beside = |name: &str| KOLLA_BESIDE.replace("/allot", &format!("/{name}"));
        let var = [("ALLOT_DATABASE_NAME", "from_env")];
        let file = Some("database_name = \"from_file\"");
        for (argv, env, file, name) in [
            (
                &["--database-name", "from_flag"][..],
                &var[..],
                file,
                "from_flag",
            ),
            (&[], &var, file, "from_env"),
            (&[], &[], file, "from_file"),
        ] {
            let (s, _dir) = resolve_conf(KOLLA, argv, env, file);
            assert_eq!(s.unwrap().database, beside(name));
        }
        // A socket, and SQLAlchemy's arguments, are kept.
        let conf = "[placement_database]\nconnection = \
                    mysql+pymysql://placement:p/w@/placement?unix_socket=/run/my.sock&charset=utf8\n";
        let (s, _dir) = resolve_conf(conf, &[], &[], None);
        assert_eq!(
            s.unwrap().database,
            "mysql+pymysql://placement:p/w@/allot?unix_socket=/run/my.sock&charset=utf8"
        );
    }

    #[test]
    fn a_database_named_explicitly_wins_over_placement_conf() {
        for (argv, env, file) in [
            (&["--database", "sqlite:/a.db"][..], &[][..], None),
            (&[], &[("ALLOT_DATABASE", "sqlite:/a.db")], None),
            (&[], &[], Some("database = \"sqlite:/a.db\"")),
        ] {
            let (s, _dir) = resolve_conf(KOLLA, argv, env, file);
            let s = s.unwrap();
            assert_eq!(s.database, "sqlite:/a.db");
            assert_eq!(s.beside_placement, None, "nothing to check before serving");
            let unused = s.placement_conf.unwrap().unused;
            assert!(unused.contains(&"[placement_database] connection".to_owned()));
        }
        // --database-name alone changes nothing then.
        let (s, _dir) = resolve_conf(
            KOLLA,
            &["--database", "sqlite:/a.db", "--database-name", "other"],
            &[],
            None,
        );
        assert_eq!(s.unwrap().database, "sqlite:/a.db");
    }

    #[test]
    fn what_cannot_be_found_beside_placement_s_is_refused_with_the_reason() {
        let hidden = "mysql+pymysql://placement:***@192.0.2.20:3306/placement";
        // Placement's own database.
        let (s, _dir) = resolve_conf(KOLLA, &["--database-name", "placement"], &[], None);
        let message = format!("{:#}", s.unwrap_err());
        for needed in [
            hidden,
            "--database-name",
            "names database placement already",
        ] {
            assert!(message.contains(needed), "{needed}: {message}");
        }
        // A name that is no plain identifier, from each source, naming it.
        let message = error(&[], &[("ALLOT_DATABASE_NAME", "al-lot")], None);
        assert!(message.contains("ALLOT_DATABASE_NAME"), "{message}");
        assert!(message.contains("invalid database name"), "{message}");
        let (s, _dir) = resolve_conf(KOLLA, &[], &[], Some("database_name = \"a;b\""));
        let message = format!("{:#}", s.unwrap_err());
        assert!(message.contains("config file"), "{message}");
        assert!(
            message.contains("invalid database name \"a;b\""),
            "{message}"
        );
        // PostgreSQL: the old refusal, with the way to import it.
        let pg = KOLLA.replace(
            "mysql+pymysql://placement:DB_PASS@192.0.2.20:3306",
            "postgresql+psycopg2://placement:DB_PASS@192.0.2.20:5432",
        );
        let (s, _dir) = resolve_conf(&pg, &[], &[], None);
        let message = format!("{:#}", s.unwrap_err());
        for needed in [
            "[placement_database] connection",
            "postgresql+psycopg2://placement:***@192.0.2.20:5432/placement",
            "on MariaDB/MySQL only",
            "allot import --from-placement",
            "--database",
        ] {
            assert!(message.contains(needed), "{needed}: {message}");
        }
        // A MariaDB URL that names no database: the reason, never the password.
        let conf = "[placement_database]\nconnection = mysql://placement:DB_PASS@db/\n";
        let (s, _dir) = resolve_conf(conf, &[], &[], None);
        let message = format!("{:#}", s.unwrap_err());
        assert!(message.contains("names no database"), "{message}");
        for message in [
            message,
            format!("{:#}", resolve_conf(&pg, &[], &[], None).0.unwrap_err()),
        ] {
            assert!(!message.contains("DB_PASS"), "{message}");
        }
    }

    #[test]
    fn allot_db_sync_finds_the_database_as_allot_serve_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("placement.conf");
        std::fs::write(&path, KOLLA).unwrap();
        let args = |database: Option<&str>, name: Option<&str>| DatabaseArgs {
            database: database.map(str::to_owned),
            config: None,
            placement_conf: Some(path.clone()),
            database_name: name.map(str::to_owned),
        };
        let none = |_: &str| None;
        assert_eq!(args(None, None).resolve(&none).unwrap(), KOLLA_BESIDE);
        assert_eq!(
            args(None, Some("other")).resolve(&none).unwrap(),
            KOLLA_BESIDE.replace("/allot", "/other")
        );
        let env = |k: &str| (k == "ALLOT_DATABASE_NAME").then(|| "from_env".to_owned());
        assert_eq!(
            args(None, None).resolve(&env).unwrap(),
            KOLLA_BESIDE.replace("/allot", "/from_env")
        );
        assert_eq!(
            args(Some("sqlite:/b.db"), None).resolve(&none).unwrap(),
            "sqlite:/b.db"
        );
        let message = format!(
            "{:#}",
            args(None, Some("placement")).resolve(&none).unwrap_err()
        );
        assert!(
            message.contains("names database placement already"),
            "{message}"
        );
        // The flag's parser, as `allot db sync --database-name` reads it.
        #[derive(Parser, Debug)]
        struct Db {
            #[command(flatten)]
            db: DatabaseArgs,
        }
        let e = Db::try_parse_from(["db", "--database-name", "a b"]).unwrap_err();
        assert!(e.to_string().contains("invalid database name"), "{e}");
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
