//! Python's `repr` and `pprint.pformat` of JSON values (as `json.loads` would have
//! made them), which jsonschema's messages embed: the validator's words are only
//! Placement's when the values in them are printed as Python prints them.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Python's `repr` of a JSON value (as `json.loads` would have made it), on one line.
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, Some(f)) => py_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => py_str(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Python's `repr` of a float: the shortest digits that read back the same, written
/// positionally between 1e-4 and 1e16 (always with a fraction), else as `de+XX`.
fn py_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits as Python's repr.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let body = if (-4..16).contains(&exp) {
        if exp >= 0 {
            let whole = exp as usize + 1;
            if digits.len() <= whole {
                format!("{digits}{}.0", "0".repeat(whole - digits.len()))
            } else {
                format!("{}.{}", &digits[..whole], &digits[whole..])
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        }
    } else {
        let m = if digits.len() == 1 {
            digits.clone()
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{exp_sign}{:02}", exp.abs())
    };
    format!("{sign}{body}")
}

/// Python's `repr` of a string: single quotes unless the text has a single quote and
/// no double one; backslashes, the quote, control and non-printable characters
/// escaped.
pub(super) fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        let code = c as u32;
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            _ if code < 0x20 || code == 0x7f => {
                let _ = write!(out, "\\x{code:02x}");
            }
            c if code < 0x7f || py_printable(c) => out.push(c),
            _ if code <= 0xff => {
                let _ = write!(out, "\\x{code:02x}");
            }
            _ if code <= 0xffff => {
                let _ = write!(out, "\\u{code:04x}");
            }
            _ => {
                let _ = write!(out, "\\U{code:08x}");
            }
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isprintable` for non-ASCII characters, for the characters that
/// matter in practice: C1 controls, the separators and format characters, private
/// use. (Unassigned code points, which Python also escapes, are left as they are.)
fn py_printable(c: char) -> bool {
    !matches!(c as u32,
        0x80..=0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x1680
        | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f
        | 0x3000 | 0xe000..=0xf8ff | 0xfeff | 0xfff9..=0xfffb | 0xf0000..)
}

/// The width Python's `pprint` gets from jsonschema.
const WIDTH: isize = 72;

/// Python's `pprint.pformat(v, width=72, sort_dicts=False)`: the `repr` where it fits
/// in the width left, else dicts and lists one item a line (recursively, each
/// continuation line indented under the first item) and long strings cut after
/// whitespace into implicitly concatenated pieces.
pub fn pformat(v: &Value) -> String {
    let mut out = String::new();
    pp(v, &mut out, 0, 0, 0);
    out
}

fn width(s: &str) -> isize {
    s.chars().count() as isize
}

fn pp(v: &Value, out: &mut String, indent: isize, allowance: isize, level: usize) {
    let rep = py_repr(v);
    if width(&rep) > WIDTH - indent - allowance {
        match v {
            Value::Object(o) => return pp_dict(o, out, indent, allowance, level + 1),
            Value::Array(a) => return pp_list(a, out, indent, allowance, level + 1),
            Value::String(s) => return pp_str(s, out, indent, allowance, level + 1),
            _ => {}
        }
    }
    out.push_str(&rep);
}

fn pp_dict(
    o: &Map<String, Value>,
    out: &mut String,
    indent: isize,
    allowance: isize,
    level: usize,
) {
    out.push('{');
    let (indent, allowance) = (indent + 1, allowance + 1);
    let last = o.len().saturating_sub(1);
    for (i, (k, v)) in o.iter().enumerate() {
        let rep = py_str(k);
        out.push_str(&rep);
        out.push_str(": ");
        let allow = if i == last { allowance } else { 1 };
        pp(v, out, indent + width(&rep) + 2, allow, level);
        if i != last {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent as usize));
        }
    }
    out.push('}');
}

fn pp_list(a: &[Value], out: &mut String, indent: isize, allowance: isize, level: usize) {
    out.push('[');
    let (indent, allowance) = (indent + 1, allowance + 1);
    let last = a.len().saturating_sub(1);
    for (i, v) in a.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent as usize));
        }
        pp(v, out, indent, if i == last { allowance } else { 1 }, level);
    }
    out.push(']');
}

fn pp_str(s: &str, out: &mut String, indent: isize, allowance: isize, level: usize) {
    let lines = py_splitlines(s);
    if lines.is_empty() {
        out.push_str(&py_str(s));
        return;
    }
    // A string on its own is wrapped in parentheses, which take a column each side.
    let (indent, allowance) = if level == 1 {
        (indent + 1, allowance + 1)
    } else {
        (indent, allowance)
    };
    let max_width = WIDTH - indent;
    let mut max_width1 = max_width;
    let mut chunks = Vec::new();
    let mut rep = String::new();
    for (i, line) in lines.iter().enumerate() {
        let last_line = i == lines.len() - 1;
        rep = py_str(line);
        if last_line {
            max_width1 -= allowance;
        }
        if width(&rep) <= max_width1 {
            chunks.push(rep.clone());
            continue;
        }
        let parts = py_words(line);
        let mut max_width2 = max_width;
        let mut current = String::new();
        for (j, part) in parts.iter().enumerate() {
            let candidate = format!("{current}{part}");
            if j == parts.len() - 1 && last_line {
                max_width2 -= allowance;
            }
            if width(&py_str(&candidate)) > max_width2 {
                if !current.is_empty() {
                    chunks.push(py_str(&current));
                }
                current = (*part).to_owned();
            } else {
                current = candidate;
            }
        }
        if !current.is_empty() {
            chunks.push(py_str(&current));
        }
    }
    if chunks.len() == 1 {
        out.push_str(&rep);
        return;
    }
    if level == 1 {
        out.push('(');
    }
    for (i, chunk) in chunks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(&" ".repeat(indent as usize));
        }
        out.push_str(chunk);
    }
    if level == 1 {
        out.push(')');
    }
}

/// Python's `str.splitlines(keepends=True)`.
fn py_splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' => match chars.peek() {
                Some((j, '\n')) => {
                    let j = *j;
                    chars.next();
                    j + 1
                }
                _ => i + 1,
            },
            '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(&s[start..end]);
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// Python's whitespace (`str.isspace`, what `\s` matches in a `str` pattern).
fn py_space(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\x1c'..='\x1f')
}

/// `re.findall(r'\S*\s*', line)` without its final empty match: runs of non-space
/// each followed by its run of space.
fn py_words(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let word = rest.find(py_space).unwrap_or(rest.len());
        let space = rest[word..]
            .find(|c| !py_space(c))
            .map_or(rest.len(), |n| word + n);
        parts.push(&rest[..space]);
        rest = &rest[space..];
    }
    parts
}
