//! The query-string filters that the provider listing (`GET /resource_providers`) and
//! the candidate search (`GET /allocation_candidates`) share: `member_of`, `required`
//! and `resources`, each read with Placement's rules and messages at every
//! microversion.

use allot_core::Uuid;

use super::{invalid_query, uuid_like};
use crate::error::ApiError;
use crate::microversion::Version;

/// `member_of` values: a uuid, `in:` and a list of uuids (any of them), and from 1.32
/// the forbidden forms `!uuid` and `!in:...`. Repeated parameters (1.24) AND together.
pub fn member_of_filter(
    version: Version,
    values: &[&str],
) -> Result<(Vec<Vec<Uuid>>, Vec<Uuid>), ApiError> {
    if !version.at_least(24) && values.len() > 1 {
        return Err(ApiError::bad_request(
            "Multiple member_of parameters are not supported",
        ));
    }
    let mut required = Vec::new();
    let mut forbidden = Vec::new();
    for value in values {
        if value.contains(',') && !(value.starts_with("in:") || value.starts_with("!in:")) {
            return Err(ApiError::bad_request(format!(
                "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword \
                 using the valid microversion. Got: {value}"
            )));
        }
        let (negated, list) = if let Some(rest) = value.strip_prefix("!in:") {
            (true, rest.split(',').collect::<Vec<_>>())
        } else if let Some(rest) = value.strip_prefix('!') {
            (true, vec![rest])
        } else if let Some(rest) = value.strip_prefix("in:") {
            (false, rest.split(',').collect())
        } else {
            (false, vec![*value])
        };
        let mut uuids = Vec::new();
        for item in list {
            let Some(u) = uuid_like(item) else {
                return Err(invalid_query(format!(
                    "Expected 'member_of' parameter to contain valid UUID(s). Got: {item}"
                )));
            };
            if !uuids.contains(&u) {
                uuids.push(u);
            }
        }
        if !negated {
            required.push(uuids);
        } else if !version.at_least(32) {
            return Err(ApiError::bad_request(
                "Forbidden member_of parameters are not supported in the specified microversion",
            ));
        } else {
            forbidden.extend(
                uuids
                    .into_iter()
                    .filter(|u| !forbidden.contains(u))
                    .collect::<Vec<_>>(),
            );
        }
    }
    Ok((required, forbidden))
}

/// `required` values: trait names separated by commas, from 1.22 `!NAME` for forbidden
/// traits, from 1.39 `in:A,B` for any-of and repeated parameters (AND). Before 1.39
/// only the last parameter counts.
pub fn required_filter(
    version: Version,
    values: &[&str],
) -> Result<(Vec<Vec<String>>, Vec<String>), ApiError> {
    let allow_forbidden = version.at_least(22);
    let allow_any = version.at_least(39);
    let values = if allow_any {
        values
    } else {
        &values[values.len().saturating_sub(1)..]
    };
    let mut required: Vec<Vec<String>> = Vec::new();
    let mut forbidden: Vec<String> = Vec::new();
    for value in values {
        if let Some(rest) = value.strip_prefix("in:") {
            if !allow_any {
                return Err(invalid_query(format!(
                    "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion \
                     1.39. Got: {value}"
                )));
            }
            let mut any: Vec<String> = Vec::new();
            for t in rest.split(',').map(str::trim) {
                if !any.iter().any(|a| a == t) {
                    any.push(t.to_owned());
                }
            }
            if any.iter().any(String::is_empty) {
                return Err(invalid_query(format!(
                    "Expected 'required' parameter value of the form: \
                     in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
                )));
            }
            if any.iter().any(|t| t.starts_with('!')) {
                return Err(invalid_query(format!(
                    "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden \
                     traits. Got: {value}"
                )));
            }
            required.push(any);
            continue;
        }
        let names: Vec<&str> = value.split(',').map(str::trim).collect();
        // Any number of leading '!' mean "forbidden", as in Placement.
        let negated: Vec<&str> = names
            .iter()
            .filter_map(|t| t.strip_prefix('!'))
            .map(|t| t.trim_start_matches('!'))
            .collect();
        if names.iter().chain(negated.iter()).any(|t| t.is_empty()) {
            let form = if allow_forbidden {
                "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
            } else {
                "HW_CPU_X86_VMX,CUSTOM_MAGIC"
            };
            return Err(invalid_query(format!(
                "Expected 'required' parameter value of the form: {form}. Got an empty trait in: \
                 {value}"
            )));
        }
        if !negated.is_empty() && !allow_forbidden {
            return Err(invalid_query(format!(
                "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. \
                 Got: {value}"
            )));
        }
        for name in names.iter().filter(|t| !t.starts_with('!')) {
            required.push(vec![(*name).to_owned()]);
        }
        for name in negated {
            if !forbidden.iter().any(|f| f == name) {
                forbidden.push(name.to_owned());
            }
        }
    }
    Ok((required, forbidden))
}

/// `resources=CLASS:AMOUNT,CLASS:AMOUNT`, amounts at least 1. A class named twice
/// keeps its place and takes the last amount.
pub fn resources_filter(value: &str) -> Result<Vec<(String, u64)>, ApiError> {
    const FORM: &str =
        "Badly formed resources parameter. Expected resources query string parameter \
                        in form: ?resources=VCPU:2,MEMORY_MB:1024.";
    if value.trim().is_empty() {
        return Err(ApiError::bad_request(format!("{FORM} Got: empty string.")));
    }
    let mut out: Vec<(String, u64)> = Vec::new();
    for item in value.split(',') {
        let mut parts = item.split(':');
        let (Some(class), Some(amount), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(ApiError::bad_request(format!("{FORM} Got: {item}.")));
        };
        let Some(amount) = py_int(amount) else {
            return Err(ApiError::bad_request(format!(
                "Requested resource {class} expected positive integer amount. Got: {amount}."
            )));
        };
        if amount < 1 {
            return Err(ApiError::bad_request(format!(
                "Requested resource {class} requires amount >= 1. Got: {amount}."
            )));
        }
        let amount = u64::try_from(amount).unwrap_or(u64::MAX);
        match out.iter_mut().find(|(c, _)| c == class) {
            Some(existing) => existing.1 = amount,
            None => out.push((class.to_owned(), amount)),
        }
    }
    Ok(out)
}

/// An integer as Python's `int()` reads one: surrounding whitespace, an optional
/// sign, decimal digits with single underscores between them. Values beyond `i128`
/// saturate (no inventory is that large anyway).
fn py_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let well_formed = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !well_formed {
        return None;
    }
    let magnitude = digits
        .chars()
        .filter(char::is_ascii_digit)
        .fold(0i128, |acc, d| {
            acc.saturating_mul(10)
                .saturating_add(i128::from(d as u8 - b'0'))
        });
    Some(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version(39);

    fn message(e: ApiError) -> String {
        e.message
    }

    #[test]
    fn member_of() {
        let a = "83a3d69d-8920-48e2-8914-cadfd8fa2f91";
        let b = "99652f11-9f77-46b9-80b7-4b1989be9f8c";
        let ua = Uuid::parse_str(a).unwrap();
        let ub = Uuid::parse_str(b).unwrap();
        let any = format!("in:{a},{b}");
        let not_any = format!("!in:{a},{b}");
        let not_a = format!("!{a}");
        let both = format!("{a},{b}");
        assert_eq!(member_of_filter(V, &[a]).unwrap(), (vec![vec![ua]], vec![]));
        assert_eq!(
            member_of_filter(V, &[&any, b]).unwrap(),
            (vec![vec![ua, ub], vec![ub]], vec![])
        );
        assert_eq!(
            member_of_filter(V, &[&not_any, &not_a]).unwrap(),
            (vec![], vec![ua, ub])
        );
        let refusals: Vec<(Version, Vec<&str>, &str)> = vec![
            (Version(23), vec![a, b], "Multiple member_of parameters are not supported"),
            (V, vec!["not a uuid"], "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: not a uuid"),
            (V, vec!["!(^o^)"], "Expected 'member_of' parameter to contain valid UUID(s). Got: (^o^)"),
            (V, vec!["in:"], "Got: "),
            (V, vec![&both], "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword"),
            (Version(31), vec![&not_a], "Forbidden member_of parameters are not supported in the specified microversion"),
        ];
        for (version, values, wanted) in refusals {
            let got = message(member_of_filter(version, &values).unwrap_err());
            assert!(got.contains(wanted), "{values:?}: {got}");
        }
    }

    #[test]
    fn required() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            required_filter(V, &["A, !B,!!C"]).unwrap(),
            (vec![s(&["A"])], s(&["B", "C"]))
        );
        assert_eq!(
            required_filter(V, &["in:A,B", "C"]).unwrap(),
            (vec![s(&["A", "B"]), s(&["C"])], vec![])
        );
        // Before 1.39 the last parameter wins.
        assert_eq!(
            required_filter(Version(38), &["A", "B"]).unwrap(),
            (vec![s(&["B"])], vec![])
        );
        let refusals: Vec<(Version, &str, &str)> = vec![
            (Version(38), "in:A,B", "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: in:A,B"),
            (V, "in:A,,B", "Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: in:A,,B"),
            (V, "in:A,!B", "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: in:A,!B"),
            (V, "", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: "),
            (V, "A,!", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: A,!"),
            (Version(21), "", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: "),
            (Version(21), "!A", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !A"),
        ];
        for (version, value, wanted) in refusals {
            let got = message(required_filter(version, &[value]).unwrap_err());
            assert_eq!(
                got,
                format!("Invalid query string parameters: {wanted}"),
                "{value}"
            );
        }
    }

    #[test]
    fn resources() {
        assert_eq!(
            resources_filter("VCPU:2,DISK_GB:10,VCPU: 3").unwrap(),
            vec![("VCPU".to_owned(), 3), ("DISK_GB".to_owned(), 10)]
        );
        let refusals = [
            ("", "Got: empty string."),
            ("VCPU", "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: VCPU."),
            ("DISK_GB:500,", "Got: ."),
            ("VCPU:1:2", "Got: VCPU:1:2."),
            ("VCPU:fred", "Requested resource VCPU expected positive integer amount. Got: fred."),
            ("VCPU:-2", "Requested resource VCPU requires amount >= 1. Got: -2."),
            ("VCPU:0", "Requested resource VCPU requires amount >= 1. Got: 0."),
        ];
        for (value, wanted) in refusals {
            let got = message(resources_filter(value).unwrap_err());
            assert!(got.contains(wanted), "{value}: {got}");
        }
        assert_eq!(
            resources_filter("VCPU:99999999999999999999999").unwrap()[0].1,
            u64::MAX
        );
    }
}
