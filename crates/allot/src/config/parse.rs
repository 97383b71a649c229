//! How a value of each kind is read: the same parser serves the flag, its
//! environment variable and (through serde's types, with these checks where serde has
//! none) the files, so that every source accepts the same spellings and refuses a bad
//! value in the same words.

use std::net::SocketAddr;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Command, ValueEnum};

use super::{AuthMode, LogFormat, Policy};

/// A clap parser made of a parse function, whose error is the one a bad environment
/// variable reports, and the values `--help` lists.
#[derive(Clone)]
pub(super) struct Spelled<T> {
    pub parse: fn(&str) -> Result<T, String>,
    pub values: fn() -> Vec<PossibleValue>,
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

pub(super) fn variants<E: ValueEnum>() -> Vec<PossibleValue> {
    E::value_variants()
        .iter()
        .filter_map(ValueEnum::to_possible_value)
        .collect()
}

/// Booleans: `true` and `false`, plus the usual spellings of shell variables.
pub(super) const BOOL: Spelled<bool> = Spelled {
    parse: parse_bool,
    values: || vec![PossibleValue::new("true"), PossibleValue::new("false")],
};

pub(super) fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("invalid boolean {s:?} (expected true or false)")),
    }
}

/// One of an enum's values, or an error calling it `what` and listing them.
pub(super) fn parse_choice<E: ValueEnum>(s: &str, what: &str) -> Result<E, String> {
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

pub(super) fn parse_policy(s: &str) -> Result<Policy, String> {
    parse_choice(s, "policy mode")
}

pub(super) fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    parse_choice(s, "log format")
}

pub(super) fn parse_auth(s: &str) -> Result<AuthMode, String> {
    parse_choice(s, "authentication mode")
}

pub(super) fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse().map_err(|_| {
        format!("invalid address {s:?} (expected IP:PORT, e.g. 127.0.0.1:8778 or [::1]:8778)")
    })
}

/// An http:// or https:// URL with a host (a trailing slash dropped), or `none`
/// (the empty string).
pub(super) fn parse_advertise_url(s: &str) -> Result<String, String> {
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

/// `--public-url`: an http or https URL without a path, kept as the origin a browser
/// sends in `Origin` (scheme and host in lower case, no default port, no `/`); empty
/// for none.
pub(super) fn parse_public_url(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(String::new());
    }
    let invalid = || {
        format!("invalid URL {s:?} (expected http://HOST[:PORT] or https://HOST[:PORT], no path)")
    };
    let url = url::Url::parse(s).map_err(|_| invalid())?;
    let bare = url.path() == "/" && url.query().is_none() && url.fragment().is_none();
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() || !bare {
        return Err(invalid());
    }
    Ok(url.origin().ascii_serialization())
}

/// A database name that needs no escape in a URL or in SQL (letters, digits, `_`).
pub(super) fn parse_database_name(s: &str) -> Result<String, String> {
    let name = s.trim();
    allot_store::check_database_name(name)?;
    Ok(name.to_owned())
}

pub(super) fn parse_count(s: &str) -> Result<usize, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("invalid number {s:?} (expected a positive integer)"))
}

pub(super) fn parse_seconds(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("invalid number of seconds {s:?} (expected a whole number)"))
}

/// Checks a log filter the way the subscriber will read it.
pub(super) fn check_log_filter(filter: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::try_new(filter)
        .map(drop)
        .map_err(|e| format!("invalid log filter {filter:?}: {e}"))
}
