//! SIGHUP: the token file, the policy file and the certificate are reread without
//! a restart; a file that does not parse keeps its old contents.

use std::sync::Arc;

/// Warns of the rules a policy file names that nothing uses (oslo.policy does the
/// same): most likely a misspelt rule name, which would otherwise change nothing.
pub(super) fn warn_unknown_rules(file: &allot_server::policy_file::PolicyFile) {
    let rules = file.current();
    for name in
        allot_server::policy_file::unknown_names(&rules, &allot_server::policy::is_builtin_rule)
    {
        tracing::warn!(
            rule = name,
            path = %file.path().display(),
            "the policy file names a rule allot does not have; it has no effect"
        );
    }
}

/// Rereads the token file, the policy file and the certificate on every SIGHUP; a
/// file that does not parse keeps its old contents, and the log says why.
pub(super) fn spawn_reloader(
    tokens: Option<Arc<allot_server::auth::tokens::StaticTokens>>,
    policy_file: Option<Arc<allot_server::policy_file::PolicyFile>>,
    tls: Option<Arc<allot_tls::ServerTls>>,
) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!(
                "cannot listen for SIGHUP: the token file, the policy file and the certificate will not be reloaded"
            );
            return;
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                if let Some(tokens) = &tokens {
                    match tokens.reload() {
                        Ok(n) => {
                            tracing::info!(tokens = n, path = %tokens.path().display(), "token file reloaded")
                        }
                        Err(e) => {
                            tracing::error!("token file not reloaded, the old tokens stay: {e}")
                        }
                    }
                }
                if let Some(tls) = &tls {
                    match tls.reload() {
                        Ok(()) => {
                            tracing::info!(path = %tls.cert_path().display(), "certificate reloaded")
                        }
                        Err(e) => {
                            tracing::error!("certificate not reloaded, the old one stays: {e}")
                        }
                    }
                }
                if let Some(file) = &policy_file {
                    match file.reload() {
                        Ok(n) => {
                            tracing::info!(rules = n, path = %file.path().display(), "policy file reloaded");
                            warn_unknown_rules(file);
                        }
                        Err(e) => {
                            tracing::error!("policy file not reloaded, the old rules stay: {e}")
                        }
                    }
                }
            }
        });
    }
    #[cfg(not(unix))]
    drop((tokens, policy_file, tls));
}
