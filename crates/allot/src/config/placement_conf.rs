//! `--placement-conf`: the settings allot understands, read from OpenStack Placement's
//! own `placement.conf` (oslo.config's INI), as one more source below allot's file.
//!
//! Deployment tools (kolla-ansible, OpenStack-Ansible, openstack-helm) render that file
//! and restart the service; reading it lets allot take Placement's place without a
//! second configuration to keep in step. Each key allot understands is turned into the
//! value of one of [`Layer`]'s settings, through the same parsers its flag has, so that
//! a bad value is refused with the `[section] key` it came from. Every other key is
//! kept in [`PlacementConf::unused`], which `allot serve` logs once at start: nothing
//! in the file is dropped without a word.
//!
//! What is taken (docs/migrate.md has the table): `[DEFAULT] debug` (the log level),
//! `[api] auth_strategy`, `[keystone_authtoken]`'s URL, user, password, project,
//! domain and TLS options (`cafile`, `certfile`, `keyfile`, `insecure`), `[oslo_policy] policy_file` (relative to the file, as oslo.config finds it)
//! and `enforce_new_defaults` (`--policy secure` or `legacy`), `[placement]
//! max_allocation_candidates` and `randomize_allocation_candidates`.
//! `[placement_database] connection` is no setting's value: it names Placement's
//! database, which allot does not serve. [`PlacementConf::connection`] keeps it for
//! `config::validate::database`: with no `--database`, allot's own database is the
//! one named `--database-name` on that MariaDB server, with the same credentials
//! (and a PostgreSQL connection is refused with the way to import it).
//!
//! oslo.config's syntax, as rust-ini reads it here: `#` and `;` comment lines (no
//! comment after a value), indented continuation lines, a repeated section merged, a
//! repeated key whose last value wins (oslo.config's rule for a single-valued option;
//! the multi-valued ones are all keys allot does not use), quotes around a value
//! removed, and no backslash escapes.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use ini::{Ini, ParseOption};

use super::layers::{values, Values};
use super::parse::{parse_bool, parse_count};
use super::{AuthMode, Layer, Policy};

/// What a placement.conf gives.
#[derive(Debug, Clone, Default)]
pub struct PlacementConf {
    /// The file.
    pub path: PathBuf,
    /// The settings it gives, by name, typed as the flags type them.
    pub(super) values: Values,
    /// For each setting it gives, the key that gave it (`[api] auth_strategy`).
    pub(super) keys: HashMap<String, String>,
    /// Every key allot does not use, once each, in the file's order, with a note where
    /// the key is known but its value is not one allot can take.
    pub unused: Vec<String>,
    /// `[placement_database] connection`.
    pub connection: Option<Connection>,
}

/// `[placement_database] connection` as written. Its password is what reaches the
/// server of allot's database beside Placement's, so it is kept, but shown only
/// hidden ([`Connection::shown`], and `Debug`).
#[derive(Clone, PartialEq, Eq)]
pub struct Connection(String);

impl Connection {
    /// The URL, password and all: only for connecting.
    pub fn url(&self) -> &str {
        &self.0
    }

    /// The URL with its password hidden, for messages.
    pub fn shown(&self) -> String {
        allot_store::redacted(&self.0)
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Connection({:?})", self.shown())
    }
}

/// Reads the file at `path`.
pub(super) fn read(path: &Path) -> anyhow::Result<PlacementConf> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading placement.conf {}", path.display()))?;
    parse(path, &text).with_context(|| format!("placement.conf {}", path.display()))
}

/// The last value of each key, and every key in the file's order.
struct Entries {
    last: HashMap<(String, String), String>,
    order: Vec<(String, String)>,
}

fn entries(text: &str) -> anyhow::Result<Entries> {
    let options = ParseOption {
        enabled_quote: true,
        enabled_escape: false,
        enabled_indented_mutiline_value: true,
        enabled_preserve_key_leading_whitespace: false,
    };
    let ini = Ini::load_from_str_opt(text, options).map_err(|e| anyhow!("{e}"))?;
    let mut last = HashMap::new();
    let mut order = Vec::new();
    for (section, properties) in ini.iter() {
        // Keys before any section header are oslo.config's DEFAULT group.
        let section = section.unwrap_or("DEFAULT");
        for (key, value) in properties.iter() {
            // oslo.config takes `-` and `_` alike in option names.
            let id = (section.to_owned(), key.replace('-', "_"));
            if last.insert(id.clone(), value.trim().to_owned()).is_none() {
                order.push(id);
            }
        }
    }
    Ok(Entries { last, order })
}

/// The text of a placement.conf at `path` (for relative paths in it).
pub(super) fn parse(path: &Path, text: &str) -> anyhow::Result<PlacementConf> {
    let entries = entries(text)?;
    let mut taken = Taken {
        entries: &entries,
        used: HashSet::new(),
        notes: HashMap::new(),
        keys: HashMap::new(),
    };
    let mut layer = Layer::default();

    if let Some((value, key)) = taken.take("DEFAULT", "debug", "log") {
        let debug = parse_bool(value).map_err(|e| anyhow!("{key}: {e}"))?;
        layer.log = Some(if debug { "debug" } else { "info" }.to_owned());
    }
    if let Some((value, key)) = taken.take("api", "auth_strategy", "auth") {
        layer.auth = Some(match value.to_ascii_lowercase().as_str() {
            "keystone" => AuthMode::Keystone,
            "noauth2" => AuthMode::Noauth2,
            other => anyhow::bail!("{key}: {other:?} is not keystone or noauth2"),
        });
    }
    keystone(&mut taken, &mut layer)?;
    if let Some((value, _)) = taken.take("oslo_policy", "policy_file", "policy_file") {
        // oslo.config looks a relative policy file up beside the configuration file.
        let dir = path.parent().unwrap_or(Path::new("."));
        layer.policy_file = Some(dir.join(value));
    }
    if let Some((value, key)) = taken.take("oslo_policy", "enforce_new_defaults", "policy") {
        let new_defaults = parse_bool(value).map_err(|e| anyhow!("{key}: {e}"))?;
        layer.policy = Some(if new_defaults {
            Policy::Secure
        } else {
            Policy::Legacy
        });
    }
    let max = ("placement", "max_allocation_candidates");
    match taken.peek(max.0, max.1) {
        // Placement's -1 is "no limit"; allot keeps a bound, so the key is not taken.
        Some(v) if v.trim().starts_with('-') => {
            taken.note(max, "no limit in Placement; allot keeps its own bound")
        }
        Some(_) => {
            let (value, key) = taken
                .take(max.0, max.1, "max_allocation_candidates")
                .expect("peeked");
            layer.max_allocation_candidates =
                Some(parse_count(value).map_err(|e| anyhow!("{key}: {e}"))?);
        }
        None => {}
    }
    if let Some((value, key)) = taken.take(
        "placement",
        "randomize_allocation_candidates",
        "randomize_allocation_candidates",
    ) {
        layer.randomize_allocation_candidates =
            Some(parse_bool(value).map_err(|e| anyhow!("{key}: {e}"))?);
    }
    let connection = taken
        .peek("placement_database", "connection")
        .map(|url| Connection(url.to_owned()));

    let values = values(&layer)?;
    let Taken {
        used, notes, keys, ..
    } = taken;
    let unused = entries
        .order
        .iter()
        .filter(|id| !used.contains(*id))
        .map(|id| match notes.get(id) {
            Some(note) => format!("{} ({note})", label(id)),
            None => label(id),
        })
        .collect();
    Ok(PlacementConf {
        path: path.to_owned(),
        values,
        keys,
        unused,
        connection,
    })
}

/// `[keystone_authtoken]`: what allot's keystone mode needs.
fn keystone(taken: &mut Taken, layer: &mut Layer) -> anyhow::Result<()> {
    const S: &str = "keystone_authtoken";
    // keystonemiddleware gets its own token from auth_url and sends callers to
    // www_authenticate_uri; allot has one URL for both, so auth_url comes first.
    let url = taken
        .take(S, "auth_url", "keystone_url")
        .or_else(|| taken.take(S, "www_authenticate_uri", "keystone_url"));
    layer.keystone_url = url.map(|(v, _)| v.to_owned());
    if taken.peek(S, "www_authenticate_uri") == layer.keystone_url.as_deref() {
        taken.take(S, "www_authenticate_uri", "keystone_url");
    }
    layer.keystone_user = taken
        .take(S, "username", "keystone_user")
        .map(|(v, _)| v.to_owned());
    layer.keystone_password = taken
        .take(S, "password", "keystone_password")
        .map(|(v, _)| v.to_owned());
    layer.keystone_project = taken
        .take(S, "project_name", "keystone_project")
        .map(|(v, _)| v.to_owned());
    // keystonemiddleware's TLS options, under the same names.
    for (key, setting, field) in [
        ("cafile", "keystone_cafile", &mut layer.keystone_cafile),
        (
            "certfile",
            "keystone_certfile",
            &mut layer.keystone_certfile,
        ),
        ("keyfile", "keystone_keyfile", &mut layer.keystone_keyfile),
    ] {
        *field = taken.take(S, key, setting).map(|(v, _)| PathBuf::from(v));
    }
    if let Some((value, key)) = taken.take(S, "insecure", "keystone_insecure") {
        layer.keystone_insecure = Some(parse_bool(value).map_err(|e| anyhow!("{key}: {e}"))?);
    }
    if let Some(t) = taken.peek(S, "auth_type") {
        // allot always logs in by password; another plugin is not taken.
        if matches!(t, "password" | "v3password") {
            taken.used.insert(Taken::id(S, "auth_type"));
        } else {
            taken.note((S, "auth_type"), "allot logs in with a password only");
        }
    }
    // allot names one domain, by name, for its user and its project. Keystone's
    // default domain has the id `default` and the name `Default`.
    let mut domains = Vec::new();
    for who in ["user", "project"] {
        let by_name = taken.take(S, &format!("{who}_domain_name"), "keystone_domain");
        let by_id = taken.take(S, &format!("{who}_domain_id"), "keystone_domain");
        let domain = match (by_name, by_id) {
            (Some((name, _)), _) => name.to_owned(),
            (None, Some(("default", _))) => "Default".to_owned(),
            (None, Some((id, key))) => anyhow::bail!(
                "{key} = {id}: allot names the domain by name; set \
                 {who}_domain_name (or --keystone-domain) instead"
            ),
            (None, None) => continue,
        };
        domains.push(domain);
    }
    if let [user, project] = &domains[..] {
        if user != project {
            anyhow::bail!(
                "[{S}]: the user's domain ({user}) and the project's ({project}) differ; \
                 allot's service user and project must be in one domain"
            );
        }
    }
    layer.keystone_domain = domains.into_iter().next();
    Ok(())
}

/// `[section] key`.
fn label((section, key): &(String, String)) -> String {
    format!("[{section}] {key}")
}

/// The keys taken so far, and which setting each gave.
struct Taken<'a> {
    entries: &'a Entries,
    used: HashSet<(String, String)>,
    notes: HashMap<(String, String), String>,
    keys: HashMap<String, String>,
}

impl<'a> Taken<'a> {
    fn id(section: &str, key: &str) -> (String, String) {
        (section.to_owned(), key.to_owned())
    }

    /// The key's value, without taking it.
    fn peek(&self, section: &str, key: &str) -> Option<&'a str> {
        self.entries
            .last
            .get(&Self::id(section, key))
            .map(String::as_str)
    }

    /// The key's value and its label, marked as used for `setting`.
    fn take(&mut self, section: &str, key: &str, setting: &str) -> Option<(&'a str, String)> {
        let value = self.peek(section, key)?;
        let id = Self::id(section, key);
        let label = label(&id);
        self.keys.entry(setting.to_owned()).or_insert(label.clone());
        self.used.insert(id);
        Some((value, label))
    }

    /// A note for a key that is known but not taken.
    fn note(&mut self, (section, key): (&str, &str), note: &str) {
        self.notes.insert(Self::id(section, key), note.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> PlacementConf {
        parse(Path::new("/etc/placement/placement.conf"), text).unwrap()
    }

    #[test]
    fn oslo_config_syntax() {
        let c = conf(
            "# a comment\n\
             ; another\n\
             [placement]\n\
             max_allocation_candidates = 5\n\
             [DEFAULT]\n\
             default_log_levels = a=WARN,\n    b=INFO\n\
             [placement]\n\
             max-allocation-candidates = 7\n\
             randomize_allocation_candidates = \"True\"\n\
             [oslo_policy]\n\
             policy_file = /abs/policy.yaml\n\
             [pci]\n\
             alias = {\"name\": \"a\"}\n\
             alias = {\"name\": \"b\"}\n",
        );
        // A repeated section is merged and a repeated key's last value wins (a dash
        // is an underscore); quotes are removed.
        assert_eq!(c.values["max_allocation_candidates"], 7);
        assert_eq!(c.values["randomize_allocation_candidates"], true);
        assert_eq!(c.values["policy_file"], "/abs/policy.yaml");
        assert_eq!(
            c.keys["max_allocation_candidates"],
            "[placement] max_allocation_candidates"
        );
        // A continued value is one key; a repeated (multi-valued) key is listed once.
        assert_eq!(c.unused, ["[DEFAULT] default_log_levels", "[pci] alias"]);
    }

    #[test]
    fn keystone_urls_and_plugins() {
        // www_authenticate_uri alone is the URL; beside another auth_url it is listed.
        let c = conf("[keystone_authtoken]\nwww_authenticate_uri = http://k:5000\n");
        assert_eq!(c.values["keystone_url"], "http://k:5000");
        assert!(c.unused.is_empty(), "{:?}", c.unused);
        let c = conf(
            "[keystone_authtoken]\nwww_authenticate_uri = http://public:5000\n\
             auth_url = http://internal:5000\nauth_type = v3token\n",
        );
        assert_eq!(c.values["keystone_url"], "http://internal:5000");
        assert_eq!(
            c.unused,
            [
                "[keystone_authtoken] www_authenticate_uri",
                "[keystone_authtoken] auth_type (allot logs in with a password only)"
            ]
        );
        let c = conf("[keystone_authtoken]\nuser_domain_name = Ops\nproject_domain_id = default\nproject_domain_name = Ops\n");
        assert_eq!(c.values["keystone_domain"], "Ops");
        assert!(c.unused.is_empty(), "{:?}", c.unused);
    }

    #[test]
    fn keystone_tls_options_are_taken() {
        let c = conf(
            "[keystone_authtoken]\nauth_url = https://k:5000\ncafile = /etc/ssl/ca.pem\n\
             certfile = /etc/allot/client.pem\nkeyfile = /etc/allot/client.key\n\
             insecure = False\n",
        );
        assert_eq!(c.values["keystone_url"], "https://k:5000");
        assert_eq!(c.values["keystone_cafile"], "/etc/ssl/ca.pem");
        assert_eq!(c.values["keystone_certfile"], "/etc/allot/client.pem");
        assert_eq!(c.values["keystone_keyfile"], "/etc/allot/client.key");
        assert_eq!(c.values["keystone_insecure"], false);
        assert_eq!(c.keys["keystone_cafile"], "[keystone_authtoken] cafile");
        assert!(c.unused.is_empty(), "{:?}", c.unused);
        let e = parse(
            Path::new("p.conf"),
            "[keystone_authtoken]\ninsecure = maybe\n",
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("[keystone_authtoken] insecure"),
            "{e:#}"
        );
    }
}
