//! Request parameters read from paths and query strings, each parsed in one place.
//!
//! Placement accepts uuids the way Python's `uuid.UUID()` reads them; every query
//! parameter that names a uuid goes through [`uuid_like`] (or the stricter
//! [`is_dashed_uuid`] where Placement's JSON Schema `format: uuid` applies), and so
//! does every body's uuid that is not a provider reference ([`format_checked_uuid`]
//! where the schema checked its format). Every
//! query string is checked by [`require_utf8_query`] before it is parsed, and the
//! filters that the provider listing and the candidate search share are in
//! [`filters`]. A provider in a URL path is read by `request::path::ProviderPath`.

pub mod filters;

use allot_core::Uuid;

use crate::error::ApiError;

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

/// Reads a uuid that a JSON Schema `format: uuid` has let through (a body's): as
/// [`uuid_like`] reads it. The format (`crate::schema`) also admits the one spelling
/// `uuid_like` does not take, a `urn:uuid:` prefix not in lower case, which is read
/// as the format read it, so that what the schema admits is never refused after it.
pub fn format_checked_uuid(s: &str) -> Option<Uuid> {
    uuid_like(s).or_else(|| Uuid::try_parse(s).ok())
}

/// The stricter uuid check of the JSON Schema `format` Placement applies to query
/// strings: parseable, with dashes where the canonical form has them.
pub fn is_dashed_uuid(s: &str) -> bool {
    let dashes_in_place = [8, 13, 18, 23]
        .iter()
        .all(|&i| s.chars().nth(i) == Some('-'));
    dashes_in_place && uuid_like(s).is_some()
}

/// Refuses (400) a query string whose names or values, once percent-decoded, are not
/// UTF-8, with the words of Python's decoder (Placement fails to decode them and says
/// so), where the query parser would quietly put replacement characters in.
pub fn require_utf8_query(raw: &str) -> Result<(), ApiError> {
    for part in raw.split('&').flat_map(|pair| pair.splitn(2, '=')) {
        let bytes = percent_decode(part);
        if let Err(e) = std::str::from_utf8(&bytes) {
            let at = e.valid_up_to();
            let byte = bytes[at];
            let why = match e.error_len() {
                None => "unexpected end of data",
                Some(_) if (0x80..0xc2).contains(&byte) || byte > 0xf4 => "invalid start byte",
                Some(_) => "invalid continuation byte",
            };
            return Err(invalid_query(format!(
                "'utf-8' codec can't decode byte 0x{byte:02x} in position {at}: {why}"
            )));
        }
    }
    Ok(())
}

/// `application/x-www-form-urlencoded` decoding to bytes: `+` is a space, `%XX` a
/// byte, and a `%` without two hex digits after it is itself.
fn percent_decode(s: &str) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// A 400 with the prefix Placement gives every query string problem.
pub fn invalid_query(message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("Invalid query string parameters: {message}"))
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
        assert_eq!(
            format_checked_uuid("URN:UUID:2290D4AF-9E6E-400B-9D65-1EE01376F71A")
                .map(|u| u.to_string())
                .as_deref(),
            Some(canonical)
        );
        assert_eq!(format_checked_uuid("spameggs"), None);
        assert!(is_dashed_uuid(canonical));
        assert!(is_dashed_uuid("2290D4AF-9E6E-400B-9D65-1EE01376F71A"));
        assert!(!is_dashed_uuid("2290d4af9e6e400b9d651ee01376f71a"));
        assert!(!is_dashed_uuid("{2290d4af-9e6e-400b-9d65-1ee01376f71a}"));
    }

    fn message(e: ApiError) -> String {
        e.message
    }

    #[test]
    fn undecodable_queries() {
        assert_eq!(
            percent_decode("a+b%20%e2%98%83%zz%4"),
            b"a b \xe2\x98\x83%zz%4".to_vec()
        );
        assert!(require_utf8_query("name=%e2%98%83&x").is_ok());
        assert!(require_utf8_query("").is_ok());
        let m = message(require_utf8_query("name=%FF").unwrap_err());
        assert_eq!(m, "Invalid query string parameters: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte");
        assert!(message(require_utf8_query("a%e2%98=1").unwrap_err())
            .contains("unexpected end of data"));
        assert!(message(require_utf8_query("a=%e2%28%a1").unwrap_err())
            .contains("byte 0xe2 in position 0: invalid continuation byte"));
    }
}
