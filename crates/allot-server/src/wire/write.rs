//! JSON pieces written straight into a body, byte for byte as `serde_json` writes
//! them: for the bodies that can be large (allocation candidates, the allocations and
//! usages GETs), which are written by hand rather than through `Serialize` so that no
//! value is built, escaped or formatted through a temporary on the way (see
//! `wire::candidates`, `handlers::allocations`, `handlers::usages`).

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

/// A quoted uuid, formatted on the stack.
pub fn uuid(out: &mut Vec<u8>, uuid: &Uuid) {
    quoted_uuid(out, &uuid_text(uuid));
}

/// Room for an integer's digits (and a sign).
pub const INT: usize = 20;

/// Room for one `"name":amount,` entry of [`amounts`], the name aside.
pub const AMOUNT_ENTRY: usize = 4 + INT;

/// `{name: amount, ...}` in name order, as a `BTreeMap<&str, u64>` of the same pairs
/// writes it.
pub fn amounts<'a, I>(out: &mut Vec<u8>, pairs: I)
where
    I: Iterator<Item = (&'a str, u64)> + Clone,
{
    out.push(b'{');
    amount_entries(out, pairs);
    out.push(b'}');
}

/// The entries of [`amounts`] without the braces, for an object that goes on after
/// them; whether any was written (so whether what follows needs a comma).
///
/// The view keeps amounts in class order, which is name order today; that is checked
/// (one pass of comparisons) rather than assumed, so that a class type that orders
/// otherwise costs a sort here, not a wrong body. Pairs out of order are sorted, and
/// of equal names the last is kept, as a map built from them would.
pub fn amount_entries<'a, I>(out: &mut Vec<u8>, pairs: I) -> bool
where
    I: Iterator<Item = (&'a str, u64)> + Clone,
{
    let mut names = pairs.clone().map(|(name, _)| name);
    let in_order = match names.next() {
        None => return false,
        Some(first) => names
            .try_fold(first, |last, name| (last < name).then_some(name))
            .is_some(),
    };
    if in_order {
        write_entries(out, pairs);
    } else {
        let mut sorted: Vec<(&str, u64)> = pairs.collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        sorted.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 = later.1;
            }
            same
        });
        write_entries(out, sorted.into_iter());
    }
    true
}

fn write_entries<'a>(out: &mut Vec<u8>, pairs: impl Iterator<Item = (&'a str, u64)>) {
    for (i, (name, amount)) in pairs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, name);
        out.push(b':');
        uint(out, amount);
    }
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
        out.clear();
        uuid(&mut out, &u);
        assert_eq!(out, serde_json::to_vec(&u).unwrap());
    }

    /// Amounts come out as a map of the same pairs writes them, in order or not.
    #[test]
    fn amounts_match_a_sorted_map() {
        let cases: &[&[(&str, u64)]] = &[
            &[],
            &[("VCPU", 1)],
            &[("DISK_GB", 10), ("MEMORY_MB", 512), ("VCPU", 2)],
            &[("VCPU", 2), ("DISK_GB", 10), ("MEMORY_MB", 0)],
            &[("VCPU", 2), ("VCPU", 3), ("A", 1), ("VCPU", 4)],
            &[("B", 1), ("A", 2), ("B", 5)],
        ];
        for pairs in cases {
            let mut out = Vec::new();
            amounts(&mut out, pairs.iter().copied());
            let map: std::collections::BTreeMap<&str, u64> = pairs.iter().copied().collect();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&map).unwrap(),
                "{pairs:?}"
            );
            let mut out = Vec::new();
            assert_eq!(
                amount_entries(&mut out, pairs.iter().copied()),
                !pairs.is_empty()
            );
        }
    }
}
