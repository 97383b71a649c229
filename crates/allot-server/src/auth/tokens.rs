//! `tokens` mode: a static token file for small sites without Keystone.
//!
//! The file is JSON, `{"tokens": [ENTRY, ...]}`, each entry:
//! `{"id": "3f9c0a1b2d4e", "sha256": "<64 hex>", "user": "ops", "project": "p1"
//! (optional), "roles": ["admin"], "system_scope": "all" (optional), "expires_at":
//! "2027-01-01T00:00:00Z" (optional), "created_at": "..."}`. `allot token add` writes
//! it (mode 0600) and prints the token once; only its SHA-256 is stored.
//!
//! Why SHA-256 and not a slow KDF: the tokens are 32 bytes from the OS's random
//! source (256 bits). A slow KDF protects low-entropy secrets (passwords) from
//! guessing; a uniformly random 256-bit secret cannot be guessed at any hash speed,
//! so a stolen file lets no one in, and checking a request costs a microsecond
//! instead of tens of milliseconds. The presented token's hash is compared with every
//! entry in constant time, and the scan does not stop at a match, so timing tells
//! nothing about which hashes exist.
//!
//! The table is loaded at start (a file that does not parse stops the start) and
//! again on [`StaticTokens::reload`] (SIGHUP): a file that does not parse then keeps
//! the old table, and the caller logs why.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};

use super::{
    constant_time_eq, now_unix, parse_utc, token_hash, token_header, AuthError, AuthFuture,
    Authenticator, Identity,
};

/// The file as stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFile {
    /// The entries.
    #[serde(default)]
    pub tokens: Vec<TokenEntry>,
}

/// One token: its hash and who it stands for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// A short public name, for `allot token list` and `revoke` (not a secret).
    pub id: String,
    /// SHA-256 of the token, lower-case hex.
    pub sha256: String,
    /// The user id.
    pub user: String,
    /// The project id (absent for a system-scoped token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Roles.
    #[serde(default)]
    pub roles: Vec<String>,
    /// `all` for a system-scoped token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_scope: Option<String>,
    /// When the token stops working (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// When it was made (RFC 3339, UTC), for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

impl TokenFile {
    /// Reads and checks a file: every entry well-formed, ids and hashes unique.
    pub fn read(path: &Path) -> Result<TokenFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading token file {}: {e}", path.display()))?;
        let file: TokenFile = serde_json::from_str(&text)
            .map_err(|e| format!("token file {}: {e}", path.display()))?;
        file.check()
            .map_err(|e| format!("token file {}: {e}", path.display()))?;
        Ok(file)
    }

    /// Reads a file, or an empty table if there is none yet (for `allot token add`).
    pub fn read_or_empty(path: &Path) -> Result<TokenFile, String> {
        if path.exists() {
            TokenFile::read(path)
        } else {
            Ok(TokenFile::default())
        }
    }

    /// Checks every entry.
    pub fn check(&self) -> Result<(), String> {
        let mut ids = HashSet::new();
        let mut hashes = HashSet::new();
        for (i, e) in self.tokens.iter().enumerate() {
            let at = format!("token {} ({:?})", i + 1, e.id);
            if e.id.trim().is_empty() || !ids.insert(e.id.as_str()) {
                return Err(format!("{at}: the id is empty or used twice"));
            }
            if e.sha256.len() != 64
                || !e
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                || !hashes.insert(e.sha256.as_str())
            {
                return Err(format!(
                    "{at}: sha256 must be 64 lower-case hex digits, each hash once"
                ));
            }
            if e.user.trim().is_empty() {
                return Err(format!("{at}: the user is empty"));
            }
            if e.roles.iter().any(|r| r.trim().is_empty()) {
                return Err(format!("{at}: a role is empty"));
            }
            match e.system_scope.as_deref() {
                None | Some("all") => {}
                Some(other) => {
                    return Err(format!(
                        "{at}: system_scope must be \"all\" or absent, not {other:?}"
                    ))
                }
            }
            if e.system_scope.is_none() && e.project.is_none() {
                return Err(format!(
                    "{at}: a token needs a project or system_scope \"all\""
                ));
            }
            if let Some(t) = &e.expires_at {
                if parse_utc(t).is_none() {
                    return Err(format!(
                        "{at}: expires_at {t:?} is not a UTC time like 2027-01-01T00:00:00Z"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Writes the file through a temporary file and a rename (a reader never sees half
    /// a file), readable and writable by its owner only.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        let tmp = path.with_extension("tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let result = (|| {
            use std::io::Write;
            let mut f = options.open(&tmp)?;
            // A leftover temporary file may have kept laxer permissions.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            }
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        result.map_err(|e| format!("writing token file {}: {e}", path.display()))
    }
}

/// A loaded entry: what a match needs, parsed once.
#[derive(Debug)]
struct Loaded {
    sha256: Vec<u8>,
    expires_at: Option<i64>,
    identity: Identity,
}

fn load(file: TokenFile) -> Vec<Loaded> {
    file.tokens
        .into_iter()
        .map(|e| {
            let system_scope = e.system_scope.is_some();
            Loaded {
                sha256: e.sha256.into_bytes(),
                expires_at: e.expires_at.as_deref().and_then(parse_utc),
                identity: Identity {
                    user_id: e.user,
                    // A system-scoped token has no project, as in Keystone.
                    project_id: if system_scope { None } else { e.project },
                    roles: e.roles,
                    system_scope,
                    domain_id: None,
                },
            }
        })
        .collect()
}

/// The `tokens` authenticator: the file's table, swapped whole on reload.
#[derive(Debug)]
pub struct StaticTokens {
    path: PathBuf,
    table: RwLock<Arc<Vec<Loaded>>>,
}

/// The 401 challenge in `tokens` mode: no identity service to name, so the URI is
/// allot's own URN and the realm says where tokens come from.
pub const CHALLENGE: &str =
    "Keystone uri=\"urn:allot:static-tokens\", realm=\"allot static tokens: \
                             ask the operator for one (allot token add)\"";

impl StaticTokens {
    /// Loads the file; an error if it cannot be read or does not check.
    pub fn open(path: &Path) -> Result<StaticTokens, String> {
        let file = TokenFile::read(path)?;
        Ok(StaticTokens {
            path: path.to_owned(),
            table: RwLock::new(Arc::new(load(file))),
        })
    }

    /// Reads the file again and swaps the table in; on error the old table stays and
    /// the error says why. Returns how many tokens are loaded.
    pub fn reload(&self) -> Result<usize, String> {
        let file = TokenFile::read(&self.path)?;
        let table = Arc::new(load(file));
        let n = table.len();
        *self.table.write().unwrap_or_else(|p| p.into_inner()) = table;
        Ok(n)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check(&self, headers: &HeaderMap) -> Result<Identity, AuthError> {
        let token = token_header(headers)?;
        let hash = token_hash(token);
        let table = self.table.read().unwrap_or_else(|p| p.into_inner()).clone();
        // Every entry is compared, match or not, each in constant time.
        let mut found: Option<&Loaded> = None;
        for entry in table.iter() {
            if constant_time_eq(&entry.sha256, hash.as_bytes()) && found.is_none() {
                found = Some(entry);
            }
        }
        let entry = found.ok_or_else(|| AuthError::Invalid("the token is not valid".into()))?;
        if entry.expires_at.is_some_and(|t| t <= now_unix()) {
            return Err(AuthError::Invalid("the token has expired".into()));
        }
        Ok(entry.identity.clone())
    }
}

impl Authenticator for StaticTokens {
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> AuthFuture<'a> {
        Box::pin(std::future::ready(self.check(headers)))
    }

    fn challenge(&self) -> &str {
        CHALLENGE
    }

    fn mode(&self) -> &'static str {
        "tokens"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn entry(id: &str, token: &str, expires_at: Option<&str>) -> TokenEntry {
        TokenEntry {
            id: id.into(),
            sha256: token_hash(token),
            user: format!("user-{id}"),
            project: Some("p1".into()),
            roles: vec!["reader".into()],
            system_scope: None,
            expires_at: expires_at.map(str::to_owned),
            created_at: None,
        }
    }

    fn ask(t: &StaticTokens, token: &str) -> Result<Identity, AuthError> {
        let mut h = HeaderMap::new();
        h.insert("x-auth-token", HeaderValue::from_str(token).unwrap());
        t.check(&h)
    }

    #[test]
    fn lookup_expiry_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let file = TokenFile {
            tokens: vec![
                entry("a", "secret-a", None),
                entry("b", "secret-b", Some("2000-01-01T00:00:00Z")),
            ],
        };
        file.write(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let t = StaticTokens::open(&path).unwrap();
        let id = ask(&t, "secret-a").unwrap();
        assert_eq!(id.user_id, "user-a");
        assert_eq!(id.project_id.as_deref(), Some("p1"));
        assert_eq!(
            ask(&t, "secret-b").unwrap_err(),
            AuthError::Invalid("the token has expired".into())
        );
        assert!(matches!(ask(&t, "secret-c"), Err(AuthError::Invalid(_))));

        // A broken file keeps the old table.
        std::fs::write(&path, "{not json").unwrap();
        assert!(t.reload().is_err());
        assert!(ask(&t, "secret-a").is_ok());
        // A good one replaces it.
        TokenFile {
            tokens: vec![entry("c", "secret-c", None)],
        }
        .write(&path)
        .unwrap();
        assert_eq!(t.reload(), Ok(1));
        assert!(ask(&t, "secret-a").is_err());
        assert!(ask(&t, "secret-c").is_ok());
    }

    #[test]
    fn bad_entries_are_refused() {
        let mut twice = TokenFile {
            tokens: vec![entry("a", "x", None), entry("a", "y", None)],
        };
        assert!(twice.check().unwrap_err().contains("used twice"));
        twice.tokens[1].id = "b".into();
        twice.tokens[1].sha256 = "ABC".into();
        assert!(twice.check().unwrap_err().contains("sha256"));
        let mut scope = TokenFile {
            tokens: vec![entry("a", "x", None)],
        };
        scope.tokens[0].system_scope = Some("domain".into());
        assert!(scope.check().unwrap_err().contains("system_scope"));
        let bad_time = TokenFile {
            tokens: vec![entry("a", "x", Some("tomorrow"))],
        };
        assert!(bad_time.check().unwrap_err().contains("expires_at"));
    }
}
