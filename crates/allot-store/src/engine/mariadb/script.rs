//! A write's statements in one round trip: MariaDB's protocol has no pipelining
//! (PostgreSQL's engine sends a write's statements together and reads the answers
//! together), and one round trip per statement, while every node's writer waits on
//! the log's lock, made a claim storm four times slower than on PostgreSQL. So a
//! write's statements go as one anonymous block (`BEGIN NOT ATOMIC ... END`,
//! followed by `COMMIT` in the same text: `super::log`), their values written into
//! it as literals here.
//!
//! One block, not a multi-statement text of the statements themselves: the server
//! answers each statement of a multi-statement text with a packet of its own, sent
//! as it ends, and those sends (and the client's wake-ups to read them) were a
//! quarter of the server's time in a claim storm. A block answers once. So the
//! count a statement must have matched (`Op::one_row_of`) is checked in the block:
//! by the statement itself where it has a form that fails unless it writes one
//! row (`Rendered::checked`: an insert, an insert under a parent), else by a check
//! after it ([`check_one_row`], a quarter of the block's time when every statement
//! had one); either stops the block with an error, nothing after it runs, and the
//! transaction is rolled back.
//!
//! Literals, safely: every session runs with `NO_BACKSLASH_ESCAPES` (`super::target`),
//! so a quote inside a string is the only character to escape (doubled, as SQL
//! has it), and the connection's character set is utf8mb4, which has no multi-byte
//! sequence that ends in a quote. Integers and doubles are written in Rust's
//! round-trip form; bytes (the log's record) as a hexadecimal literal.

use std::fmt::Write;

use crate::engine::sql::Value;

/// `sql` (a shared statement, its parameters numbered `?1`, `?2`, ...) with each
/// parameter replaced by the literal of its value, appended to `out`.
pub(super) fn inline(sql: &str, values: &[Value<'_>], out: &mut String) {
    let mut rest = sql;
    while let Some(at) = rest.find('?') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let n: usize = after[..digits]
            .parse()
            .expect("the shared statements number their parameters");
        literal(values[n - 1], out);
        rest = &after[digits..];
    }
    out.push_str(rest);
}

/// The start of the message with which [`check_one_row`] stops a block; the
/// statement's number follows it.
pub(super) const MATCHED_NO_ROW: &str = "allot: this statement did not match one row: ";

/// After the `i`-th statement of a block: stop the block unless that statement
/// matched exactly one row (`ROW_COUNT()`, which counts found rows as the
/// connection's `CLIENT_FOUND_ROWS` asks, as the driver's affected rows did).
pub(super) fn check_one_row(i: usize, out: &mut String) {
    let _ = writeln!(
        out,
        "IF ROW_COUNT() <> 1 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{MATCHED_NO_ROW}{i}'; END IF;"
    );
}

/// The statement a block's error names, if [`check_one_row`] stopped it.
pub(super) fn unmatched(message: &str) -> Option<usize> {
    message.strip_prefix(MATCHED_NO_ROW)?.parse().ok()
}

/// One value as a literal.
fn literal(value: Value<'_>, out: &mut String) {
    match value {
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        // `{:?}` is the shortest text that reads back as the same double; always
        // with a `.` or an exponent, so MariaDB reads a number, not a name.
        Value::Float(x) => {
            let _ = write!(out, "{x:?}");
        }
        Value::Text(text) => quoted(text, out),
        Value::Uuid(uuid) => {
            let _ = write!(out, "'{}'", uuid.hyphenated());
        }
        Value::Null(_) => out.push_str("NULL"),
    }
}

/// A string literal: quotes doubled (`NO_BACKSLASH_ESCAPES`: nothing else is special).
fn quoted(text: &str, out: &mut String) {
    out.push('\'');
    for c in text.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
}

/// Bytes as a hexadecimal literal (`X'0a1b'`).
pub(super) fn hex(bytes: &[u8], out: &mut String) {
    out.reserve(bytes.len() * 2 + 3);
    out.push_str("X'");
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::sql::Type;

    #[test]
    fn values_become_literals_that_read_back_as_they_were() {
        let mut out = String::new();
        inline(
            "UPDATE t SET a = ?1, b = ?2, c = ?3 WHERE d = ?4 AND NOT (a <=> ?1) AND e = ?5",
            &[
                Value::Text("it's a \\ name"),
                Value::Float(1e-7),
                Value::Null(Type::Text),
                Value::Int(-42),
                Value::Uuid(allot_core::Uuid::from_u128(1)),
            ],
            &mut out,
        );
        assert_eq!(
            out,
            "UPDATE t SET a = 'it''s a \\ name', b = 1e-7, c = NULL WHERE d = -42 AND \
             NOT (a <=> 'it''s a \\ name') AND e = '00000000-0000-0000-0000-000000000001'"
        );
        let mut out = String::new();
        literal(Value::Float(16.0), &mut out);
        hex(&[0, 0xab, 0x10], &mut out);
        assert_eq!(out, "16.0X'00ab10'");
    }
}
