//! Request parameters read from paths and query strings, each parsed in one place.
//!
//! Placement accepts uuids the way Python's `uuid.UUID()` reads them; every path and
//! query parameter that names a uuid goes through [`uuid_like`] (or the stricter
//! [`is_dashed_uuid`] where Placement's JSON Schema `format: uuid` applies).

use allot_core::Uuid;

/// Parses a uuid as Python's `uuid.UUID()` does: `urn:` and `uuid:` are dropped,
/// braces around it and dashes anywhere are ignored, and 32 hex digits must remain.
/// Placement's own uuid check (`is_uuid_like`) accepts exactly these.
pub fn uuid_like(s: &str) -> Option<Uuid> {
    let hex: String = s
        .replace("urn:", "")
        .replace("uuid:", "")
        .trim_matches(|c| c == '{' || c == '}')
        .chars()
        .filter(|c| *c != '-')
        .collect();
    if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Uuid::try_parse(&hex).ok()
    } else {
        None
    }
}

/// The stricter uuid check of the JSON Schema `format` Placement applies to query
/// strings: parseable, with dashes where the canonical form has them.
pub fn is_dashed_uuid(s: &str) -> bool {
    let dashes_in_place = [8, 13, 18, 23]
        .iter()
        .all(|&i| s.chars().nth(i) == Some('-'));
    dashes_in_place && uuid_like(s).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_spellings() {
        let canonical = "2290d4af-9e6e-400b-9d65-1ee01376f71a";
        for like in [
            canonical,
            "2290d4af9e6e400b9d651ee01376f71a",
            "2290D4AF-9E6E-400B-9D65-1EE01376F71A",
            "{2290d4af-9e6e-400b-9d65-1ee01376f71a}",
            "urn:uuid:2290d4af-9e6e-400b-9d65-1ee01376f71a",
            "2290-d4af9e6e400b9d651ee01376f71a",
        ] {
            assert_eq!(
                uuid_like(like).map(|u| u.to_string()).as_deref(),
                Some(canonical),
                "{like}"
            );
        }
        for bad in [
            "",
            "spameggs",
            "not a uuid",
            "2290d4af-9e6e-400b-9d65-1ee01376f71",
            "(^o^)",
            "☃",
        ] {
            assert_eq!(uuid_like(bad), None, "{bad}");
        }
        assert!(is_dashed_uuid(canonical));
        assert!(is_dashed_uuid("2290D4AF-9E6E-400B-9D65-1EE01376F71A"));
        assert!(!is_dashed_uuid("2290d4af9e6e400b9d651ee01376f71a"));
        assert!(!is_dashed_uuid("{2290d4af-9e6e-400b-9d65-1ee01376f71a}"));
    }
}
