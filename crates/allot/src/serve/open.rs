//! What `allot serve` reads and opens before any socket listens: the log, the
//! authenticator, the certificate, the policy file and the database. Each can refuse
//! the start with its reason, so each is opened first: a bad file stops the start at
//! once rather than after the node is reachable.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use super::reload::warn_unknown_rules;
use crate::config;

/// The log on stderr, as `--log-format` says, with terminal colours only when stderr
/// is a terminal (a journal or a file would get the escape sequences raw).
pub(super) fn init_log(settings: &config::Settings) {
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        // The filter was checked in `resolve`, and ALLOT_LOG already had its turn there
        // (below --log, like every variable).
        .with_env_filter(tracing_subscriber::EnvFilter::new(&settings.log))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match settings.log_format {
        config::LogFormat::Text => builder.init(),
        config::LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
}

/// Lists, once, the keys of Placement's placement.conf that allot does not use, so
/// that none is dropped without a word (docs/migrate.md says what each would need).
pub(super) fn warn_unused_keys(conf: &config::PlacementConf) {
    if !conf.unused.is_empty() {
        tracing::warn!(
            path = %conf.path.display(),
            keys = %conf.unused.join(", "),
            "placement.conf: allot does not use these keys"
        );
    }
}

/// The authenticator `--auth` chose, with the handles the rest of the start needs:
/// the token file to reread on SIGHUP, and Keystone to check the certificate of.
pub(super) struct Authentication {
    /// Who the caller is, for the server.
    pub authenticator: Arc<dyn allot_server::auth::Authenticator>,
    /// `--auth tokens`: the table the reloader rereads.
    pub tokens: Option<Arc<allot_server::auth::tokens::StaticTokens>>,
    /// `--auth keystone`: the client whose certificate is checked before listening.
    pub keystone: Option<Arc<allot_server::auth::keystone::Keystone>>,
}

impl Authentication {
    /// Opens the token file or builds the Keystone client; a bad token file stops the
    /// start here.
    pub fn start(auth: &config::Auth) -> anyhow::Result<Authentication> {
        let mut started = Authentication {
            authenticator: Arc::new(allot_server::auth::NoAuth2),
            tokens: None,
            keystone: None,
        };
        match auth {
            config::Auth::NoAuth2 => {}
            config::Auth::Tokens(path) => {
                let tokens = Arc::new(
                    allot_server::auth::tokens::StaticTokens::open(path)
                        .map_err(|e| anyhow::anyhow!("--auth tokens: {e}"))?,
                );
                started.tokens = Some(tokens.clone());
                started.authenticator = tokens;
            }
            config::Auth::Keystone(k) => {
                let k = Arc::new(
                    allot_server::auth::keystone::Keystone::new((**k).clone())
                        .map_err(|e| anyhow::anyhow!("--auth keystone: {e}"))?,
                );
                started.keystone = Some(k.clone());
                started.authenticator = k;
            }
        }
        Ok(started)
    }

    /// A Keystone certificate that does not verify stops the start here, rather than
    /// answering every request 503 (Keystone merely down does not).
    pub async fn check_keystone_tls(&self) -> anyhow::Result<()> {
        if let Some(keystone) = &self.keystone {
            match keystone.check_tls().await {
                Ok(None) => {}
                Ok(Some(why)) => tracing::warn!("{why}"),
                Err(e) => anyhow::bail!("--auth keystone: {e}"),
            }
        }
        Ok(())
    }
}

/// The certificate and key `--tls-cert` and `--tls-key` name, if any.
pub(super) fn server_tls(
    files: Option<&config::ServerTlsFiles>,
) -> anyhow::Result<Option<Arc<allot_tls::ServerTls>>> {
    files
        .map(|files| {
            allot_tls::ServerTls::open(&files.cert, &files.key)
                .map_err(|e| anyhow::anyhow!("--tls-cert/--tls-key: {e}"))
        })
        .transpose()
}

/// The policy file, if any: a rule that does not parse stops the start, naming the
/// rule and the column.
pub(super) fn policy_file(
    path: Option<&Path>,
) -> anyhow::Result<Option<Arc<allot_server::policy_file::PolicyFile>>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let file = allot_server::policy_file::PolicyFile::open(path)
        .map_err(|e| anyhow::anyhow!("--policy-file: {e}"))?;
    warn_unknown_rules(&file);
    Ok(Some(Arc::new(file)))
}

/// The database, opened (and migrated) and loaded into the view; one found beside
/// Placement's only if it may be served (`super::beside`); on a database other nodes
/// write to, their commits wake this node's writer.
/// Also the cluster's key (`allot_store::Store::cluster_key`), made by the first
/// node on the database.
pub(super) fn host(
    settings: &config::Settings,
) -> anyhow::Result<(allot_store::Host, allot_store::ClusterKey)> {
    let mut store = allot_store::Store::open(&settings.database).with_context(|| {
        let url = allot_store::redacted(&settings.database);
        match &settings.beside_placement {
            Some(beside) => format!(
                "opening allot's database {url}, beside Placement's (placement.conf {}, \
                 --database-name {}); docs/migrate.md says how to create it",
                beside.conf.display(),
                beside.name
            ),
            None => format!("opening database {url}"),
        }
    })?;
    if let Some(beside) = &settings.beside_placement {
        super::beside::check(&mut store, &settings.database, beside)?;
    }
    let key = store
        .cluster_key()
        .context("reading the cluster key from the database")?;
    store.save_view_every(settings.save_view_every);
    let clock: allot_store::Clock = Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    });
    let host = allot_store::Host::new(store, clock).context("loading the database")?;
    if let Some(listener) = allot_store::Store::listener(&settings.database)
        .context("listening for other nodes' commits")?
    {
        host.follow_with(listener)
            .context("starting the listener's thread")?;
    }
    Ok((host, key))
}
