//! The sources of `allot serve`'s settings and their merge, the same for every
//! setting: the flag, then the `ALLOT_*` variable, then the config file, then
//! Placement's `placement.conf` (`--placement-conf`, [`super::placement_conf`]), then
//! the default.
//!
//! Nothing here names a setting. Each source is read into a [`Layer`], the one
//! declaration, and turned into a map from the setting's name to its value through
//! serde; the merge takes, name by name, the first source that has one and remembers
//! which it was, so that a value refused later can say where it came from. The
//! environment is read through the flags' own clap parsers (one variable at a time,
//! so that a bad one is named), which is why a variable accepts exactly what its flag
//! does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use serde_json::{Map, Value};

use super::placement_conf::{self, PlacementConf};
use super::Layer;

/// The environment variable of the setting `id`: its name, upper-cased, behind
/// `ALLOT_`. Every setting's variable follows this rule, so none is spelt out.
pub fn env_var(id: &str) -> String {
    format!("ALLOT_{}", id.to_ascii_uppercase())
}

/// The declared settings as clap sees them (ids, flags, parsers, defaults).
pub(super) fn declared() -> Command {
    Layer::augment_args(Command::new("serve")).no_binary_name(true)
}

/// One source's settings: name to value, with only the settings it gives.
pub(super) type Values = Map<String, Value>;

/// The settings a [`Layer`] holds. An unset value, and a list with nothing but blank
/// items, is left out, so that the next source's value shows through.
pub(super) fn values(layer: &Layer) -> anyhow::Result<Values> {
    let Value::Object(map) = serde_json::to_value(layer)? else {
        unreachable!("a struct serializes to an object")
    };
    Ok(map.into_iter().filter(|(_, v)| !blank(v)).collect())
}

fn blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items
            .iter()
            .all(|item| item.as_str().is_some_and(|s| s.trim().is_empty())),
        _ => false,
    }
}

/// The settings given on the command line, out of clap's matches (which also hold the
/// defaults, left out here: they are the last source, not the first).
pub(super) fn from_command_line(matches: &ArgMatches) -> Result<(Values, Layer), clap::Error> {
    let layer = Layer::from_arg_matches(matches)?;
    let mut given = values(&layer)
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")))?;
    given.retain(|id, _| matches.value_source(id) == Some(ValueSource::CommandLine));
    Ok((given, layer))
}

/// The settings the environment gives, except those in `skip` (already given by a
/// flag, so that their variables are not even read, as before).
fn from_env(env: &dyn Fn(&str) -> Option<String>, skip: &Values) -> anyhow::Result<Values> {
    let cmd = declared();
    let mut given = Values::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        let var = env_var(id);
        if skip.contains_key(id) {
            continue;
        }
        let (Some(value), Some(long)) = (env(&var), arg.get_long()) else {
            continue;
        };
        let parsed = cmd
            .clone()
            .try_get_matches_from([format!("--{long}={value}")])
            .map_err(|e| anyhow!("environment variable {var}: {}", reason(&e)))
            .and_then(|m| Ok(Layer::from_arg_matches(&m)?))
            .and_then(|layer| values(&layer))?;
        given.extend(parsed.into_iter().filter(|(key, _)| key == id));
    }
    Ok(given)
}

/// What a parser said about a bad value: its own words where it has some (ours all
/// do), clap's otherwise.
fn reason(e: &clap::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            first.trim_start_matches("error: ").to_owned()
        }
    }
}

/// The config file's settings, typed by the declaration: serde names an unknown key or
/// a value of the wrong type, with its line.
fn from_file(path: &Path) -> anyhow::Result<Values> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    let layer: Layer =
        toml::from_str(&text).with_context(|| format!("config file {}", path.display()))?;
    values(&layer)
}

/// Every setting's default, as declared. Two defaults depend on the environment
/// (`database`, `token_file`); they are absent here and computed where they are used.
fn defaults() -> anyhow::Result<Values> {
    let matches = declared().try_get_matches_from(Vec::<String>::new())?;
    values(&Layer::from_arg_matches(&matches)?)
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The flag, by its name (`--bind`).
    Flag(String),
    /// The environment variable, by its name.
    Env(String),
    /// The config file, by its path.
    File(PathBuf),
    /// Placement's configuration file, by its path and the `[section] key` read.
    PlacementConf(PathBuf, String),
    /// The declared or computed default.
    Default,
}

impl Source {
    /// Its place in the order of precedence: 0 wins over 1, and so on.
    pub fn rank(&self) -> u8 {
        match self {
            Source::Flag(_) => 0,
            Source::Env(_) => 1,
            Source::File(_) => 2,
            Source::PlacementConf(..) => 3,
            Source::Default => 4,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(name) => write!(f, "{name}"),
            Source::Env(name) => write!(f, "environment variable {name}"),
            Source::File(path) => write!(f, "config file {}", path.display()),
            Source::PlacementConf(path, key) => {
                write!(f, "placement.conf {} ({key})", path.display())
            }
            Source::Default => write!(f, "the default"),
        }
    }
}

/// The merged settings and where each came from.
#[derive(Debug)]
pub(super) struct Merged {
    pub layer: Layer,
    sources: HashMap<String, Source>,
    /// The placement.conf read, if one was named.
    pub placement: Option<PlacementConf>,
}

impl Merged {
    /// Where the setting `id` came from (the default when no source gave it).
    pub fn source(&self, id: &str) -> &Source {
        static DEFAULT: Source = Source::Default;
        self.sources.get(id).unwrap_or(&DEFAULT)
    }
}

/// How one source names the setting it gave, for [`Merged::source`].
type Naming<'a> = &'a dyn Fn(&str) -> Source;

/// Merges the command line's settings (`flags`), the environment, the config file (the
/// `--config` flag's, else `ALLOT_CONFIG`'s), the placement.conf the first three name
/// (`placement_conf`) and the defaults, in that order.
pub(super) fn merge(
    flags: &Values,
    config: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Merged> {
    let config = config.or_else(|| env(&env_var("config")).map(PathBuf::from));
    let file = match &config {
        Some(path) => from_file(path)?,
        None => Values::new(),
    };
    let cmd = declared();
    let flag_name = |id: &str| {
        let arg = cmd.get_arguments().find(|a| a.get_id() == id);
        format!("--{}", arg.and_then(|a| a.get_long()).unwrap_or(id))
    };
    let env_values = from_env(env, flags)?;
    let placement = [flags, &env_values, &file]
        .into_iter()
        .find_map(|values| values.get("placement_conf"))
        .map(|path| -> anyhow::Result<_> {
            let path: PathBuf = serde_json::from_value(path.clone())?;
            placement_conf::read(&path)
        })
        .transpose()?;
    let placement_values = placement.as_ref().map(|p| p.values.clone());
    let placement_source = |id: &str| match &placement {
        Some(p) => {
            Source::PlacementConf(p.path.clone(), p.keys.get(id).cloned().unwrap_or_default())
        }
        None => Source::Default,
    };
    let sources: [(Values, Naming); 5] = [
        (flags.clone(), &|id| Source::Flag(flag_name(id))),
        (env_values, &|id| Source::Env(env_var(id))),
        (file, &|_| Source::File(config.clone().unwrap_or_default())),
        (placement_values.unwrap_or_default(), &placement_source),
        (defaults()?, &|_| Source::Default),
    ];
    let mut merged = Values::new();
    let mut from = HashMap::new();
    for (values, source) in sources {
        for (id, value) in values {
            if !merged.contains_key(&id) {
                from.insert(id.clone(), source(&id));
                merged.insert(id, value);
            }
        }
    }
    let layer = serde_json::from_value(Value::Object(merged))
        .context("merging the settings (a bug: each source was typed already)")?;
    Ok(Merged {
        layer,
        sources: from,
        placement,
    })
}
