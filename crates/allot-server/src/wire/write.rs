//! JSON pieces written straight into a body, byte for byte as `serde_json` writes
//! them: for the largest bodies (allocation candidates), which are written by hand
//! rather than through `Serialize` so that no value is built, escaped or formatted
//! through a temporary on the way (see `handlers::allocation_candidates`).

use uuid::Uuid;

/// The length of a hyphenated uuid's text.
pub const UUID_LEN: usize = 36;

/// A uuid's text, lowercase and hyphenated, as `Uuid`'s `Serialize` writes it.
pub fn uuid_text(uuid: &Uuid) -> [u8; UUID_LEN] {
    let mut text = [0u8; UUID_LEN];
    uuid.hyphenated().encode_lower(&mut text);
    text
}

/// A quoted uuid from its text ([`uuid_text`]).
pub fn quoted_uuid(out: &mut Vec<u8>, text: &[u8; UUID_LEN]) {
    out.push(b'"');
    out.extend_from_slice(text);
    out.push(b'"');
}

/// A JSON string. Names (classes, traits, suffixes) never need escaping and are
/// copied as they are; anything else goes through `serde_json`, so that the escapes
/// are its own.
pub fn string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, s).is_err() {
        // Writing into a Vec cannot fail; an empty string keeps the JSON whole anyway.
        out.extend_from_slice(b"\"\"");
    }
}

/// An unsigned integer.
pub fn uint(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A signed integer.
pub fn int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each piece is what `serde_json` writes for the same value.
    #[test]
    fn pieces_match_serde_json() {
        for s in [
            "VCPU",
            "",
            "a\"b",
            "back\\slash",
            "tab\there",
            "ctl\u{1}",
            "ünï",
            "\u{7f}",
        ] {
            let mut out = Vec::new();
            string(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
        for n in [0u64, 7, 1 << 40, u64::MAX] {
            let mut out = Vec::new();
            uint(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
        for n in [0i64, -1, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            int(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
        let u = Uuid::from_u128(0x6f1c0c2e_6b1e_4a59_9a1a_5a0d1c6a2b10);
        let mut out = Vec::new();
        quoted_uuid(&mut out, &uuid_text(&u));
        assert_eq!(out, serde_json::to_vec(&u).unwrap());
    }
}
