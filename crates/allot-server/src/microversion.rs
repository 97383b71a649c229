//! Microversions: which version of the Placement API a request speaks.
//!
//! Clients ask with `OpenStack-API-Version: placement X.Y` (or `latest`); no header
//! means the oldest version, 1.0. Every response says which version answered, and
//! `Vary` tells caches that the header matters.

use std::fmt;

/// The oldest version we speak.
pub const MIN: Version = Version(0);
/// The newest version we speak.
pub const MAX: Version = Version(39);

/// A Placement API version: always major 1, so only the minor is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u16);

impl Version {
    /// Whether this version is `1.minor` or newer.
    pub fn at_least(self, minor: u16) -> bool {
        self.0 >= minor
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

/// Why a version header was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionError {
    /// Not of the form `X.Y` (400).
    Malformed(String),
    /// Well formed but outside MIN..=MAX (406).
    Unacceptable(String),
}

/// Reads the version a request asks for from its `OpenStack-API-Version` header
/// values. The header may name several services (`compute 2.1, placement 1.20`); only
/// `placement` counts.
pub fn negotiate<'a>(headers: impl Iterator<Item = &'a str>) -> Result<Version, VersionError> {
    let mut wanted: Option<&str> = None;
    for header in headers {
        for part in header.split(',') {
            let mut words = part.split_whitespace();
            if words
                .next()
                .is_some_and(|s| s.eq_ignore_ascii_case("placement"))
            {
                wanted = Some(words.next().unwrap_or(""));
            }
        }
    }
    let Some(text) = wanted else { return Ok(MIN) };
    if text.eq_ignore_ascii_case("latest") {
        return Ok(MAX);
    }
    let parsed = text.split_once('.').and_then(|(major, minor)| {
        let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !ok(major) || !ok(minor) {
            return None;
        }
        Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
    });
    match parsed {
        None => Err(VersionError::Malformed(format!(
            "invalid version string: {text}"
        ))),
        Some((1, minor)) if minor <= MAX.0 as u32 => Ok(Version(minor as u16)),
        Some(_) => Err(VersionError::Unacceptable(format!(
            "Unacceptable version header: {text}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(h: &str) -> Result<Version, VersionError> {
        negotiate(std::iter::once(h))
    }

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(std::iter::empty()), Ok(MIN));
        assert_eq!(n("placement 1.15"), Ok(Version(15)));
        assert_eq!(n("placement latest"), Ok(MAX));
        assert_eq!(n("compute 2.1, placement 1.2"), Ok(Version(2)));
        assert_eq!(n("compute 2.1"), Ok(MIN));
        assert!(matches!(
            n("placement 0.5"),
            Err(VersionError::Unacceptable(_))
        ));
        assert!(matches!(
            n("placement 1.40"),
            Err(VersionError::Unacceptable(_))
        ));
        assert!(matches!(
            n("placement 2.0"),
            Err(VersionError::Unacceptable(_))
        ));
        assert!(matches!(
            n("placement pony.horse"),
            Err(VersionError::Malformed(_))
        ));
        assert!(matches!(
            n("placement 1.2.3"),
            Err(VersionError::Malformed(_))
        ));
    }
}
