//! `allot verify --placement URL --allot URL`: before clients are moved, ask the
//! running Placement and an allot serving the imported data the same GETs and show
//! every difference (issue 22; docs/migrate.md, "Verify").
//!
//! The GETs come from `allot_client::survey`: both deployments are walked, and every
//! provider's inventories, traits, aggregates, usages and allocations, every
//! consumer's allocations, `/usages` per project, the class and trait lists and a
//! sample of allocation candidates built from the inventories are asked of both, at
//! each microversion given. Two answers are identical when their statuses are equal
//! and their bodies are the same bytes or the same JSON: the same keys and values,
//! lists in the same order, whatever the spacing and the order of an object's keys
//! (JSON gives those no meaning, and Placement's Python writes both its own way; see
//! docs/api.md). Otherwise the difference is shown (the JSON paths that differ, or
//! "same content, in another order" when only the order of a list's items differs)
//! and judged against [`DOCUMENTED`], the differences docs/api.md documents as
//! deliberate: those are listed as such, never hidden, and only the others fail the
//! command.
//!
//! [`verify`] is the whole check; [`run`] its command.

use std::io::Write;

use allot_client::survey::{self, Probe, Survey};
use allot_client::{Client, Config, Response};
use anyhow::Context;
use clap::Args;
use serde_json::Value;

/// `allot verify`'s flags.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The running OpenStack Placement, http://HOST:PORT[/PREFIX].
    #[arg(long, value_name = "URL")]
    placement: String,
    /// Its token (a Keystone token: `openstack token issue -f value -c id`; `admin`
    /// for noauth2).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "ALLOT_PLACEMENT_TOKEN",
        default_value = "admin"
    )]
    placement_token: String,
    /// The allot serving the imported data, http://HOST:PORT.
    #[arg(long, value_name = "URL")]
    allot: String,
    /// Its token.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "ALLOT_TOKEN",
        default_value = "admin"
    )]
    allot_token: String,
    /// The microversions each GET is asked at (repeat, or separate with commas).
    #[arg(long = "microversion", value_delimiter = ',', value_name = "X.Y",
          default_values_t = default_microversions())]
    microversions: Vec<String>,
    /// The most allocation-candidate queries asked.
    #[arg(long, value_name = "N", default_value_t = 20)]
    candidates: usize,
    /// The most requests in flight at once, to each endpoint.
    #[arg(long, value_name = "N", default_value_t = 8)]
    parallel: usize,
}

/// Microversions where the bodies change shape: candidates' 1.10 form, aggregates
/// with generations (1.19), nested summaries (1.29), consumer types and mappings (1.39).
fn default_microversions() -> Vec<String> {
    ["1.10", "1.19", "1.29", "1.39"].map(String::from).to_vec()
}

/// One endpoint: its base URL and token.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// http://HOST:PORT[/PREFIX].
    pub url: String,
    /// The token sent in `x-auth-token`.
    pub token: String,
}

/// How much to ask.
#[derive(Debug, Clone)]
pub struct Options {
    /// The microversions each GET is asked at.
    pub microversions: Vec<String>,
    /// The most candidate queries.
    pub candidates: usize,
    /// The most requests in flight to each endpoint.
    pub parallel: usize,
}

/// What a verification found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// GETs asked of each endpoint.
    pub asked: usize,
    /// Answered alike, byte for byte.
    pub identical: usize,
    /// Differences docs/api.md documents.
    pub documented: usize,
    /// Every other difference.
    pub undocumented: usize,
}

/// A difference docs/api.md documents as deliberate, and how to recognise it.
struct Documented {
    /// A short name, printed with each difference.
    name: &'static str,
    /// Where docs/api.md says so, printed once.
    doc: &'static str,
    /// Whether a difference on `path` of `kind` is this one.
    applies: fn(path: &str, kind: &Kind) -> bool,
}

/// The documented differences a GET of imported data can show.
const DOCUMENTED: &[Documented] = &[Documented {
    name: "list order",
    doc: "docs/api.md, \"Differences from OpenStack Placement 16.0\": the items of a list \
          whose order Placement does not define may come in another order",
    applies: |_, kind| *kind == Kind::Order,
}];

/// How two answers differ.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// The same JSON once lists are taken as multisets and integral floats as
    /// integers: only an order (or a number's spelling) differs.
    Order,
    /// The content differs: these JSON paths, or the statuses, or the text.
    Content(Vec<String>),
}

/// Asks both endpoints the GETs of a survey of both, writes every difference (and
/// the summary) to `out`, and returns the counts. Errors are transport failures and
/// unreadable walks, not differences.
pub fn verify(
    placement: &Endpoint,
    allot: &Endpoint,
    options: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<Summary> {
    let client = |e: &Endpoint| {
        let mut config = Config::new(&e.url);
        config.token = e.token.clone();
        Client::new(&config).with_context(|| format!("endpoint {}", e.url))
    };
    let (p, a) = (client(placement)?, client(allot)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (probes, answers) = runtime.block_on(async {
        let mut found = Survey::of(&p, options.parallel)
            .await
            .with_context(|| format!("walking Placement at {}", placement.url))?;
        found.merge(
            Survey::of(&a, options.parallel)
                .await
                .with_context(|| format!("walking allot at {}", allot.url))?,
        );
        let probes = found.probes(&options.microversions, options.candidates);
        let (from_p, from_a) = tokio::join!(
            survey::fetch(&p, &probes, options.parallel),
            survey::fetch(&a, &probes, options.parallel)
        );
        anyhow::Ok((probes, from_p.into_iter().zip(from_a).collect::<Vec<_>>()))
    })?;
    let mut summary = Summary {
        asked: probes.len(),
        ..Summary::default()
    };
    // The documented differences met, whose references are printed once at the end.
    let mut met = Vec::new();
    for (probe, (from_p, from_a)) in probes.iter().zip(answers) {
        let (from_p, from_a) = (from_p?, from_a?);
        let Some(kind) = compare(&from_p, &from_a) else {
            summary.identical += 1;
            continue;
        };
        if let Some(name) = report(out, probe, &kind, &mut summary)? {
            if !met.contains(&name) {
                met.push(name);
            }
        }
    }
    for d in DOCUMENTED {
        if met[..].contains(&d.name) {
            writeln!(out, "documented ({}): {}", d.name, d.doc)?;
        }
    }
    let versions = options.microversions.join(", ");
    if summary.identical == summary.asked {
        writeln!(out, "identical: all {} GETs (at {versions})", summary.asked)?;
    } else {
        writeln!(
            out,
            "{} GETs (at {versions}): {} identical, {} documented differences, {} \
             undocumented differences",
            summary.asked, summary.identical, summary.documented, summary.undocumented
        )?;
    }
    Ok(summary)
}

/// Writes one difference and counts it; returns the documented difference's name
/// when it is one.
fn report(
    out: &mut dyn Write,
    probe: &Probe,
    kind: &Kind,
    summary: &mut Summary,
) -> std::io::Result<Option<&'static str>> {
    let documented = DOCUMENTED.iter().find(|d| (d.applies)(&probe.path, kind));
    let head = format!("GET {} at {}", probe.path, probe.microversion);
    match documented {
        Some(d) => {
            summary.documented += 1;
            writeln!(out, "documented ({}): {head}", d.name)?;
        }
        None => {
            summary.undocumented += 1;
            writeln!(out, "DIFFERENT: {head}")?;
        }
    }
    match kind {
        Kind::Order => writeln!(out, "  same content, in another order")?,
        Kind::Content(lines) => lines.iter().try_for_each(|l| writeln!(out, "  {l}"))?,
    }
    Ok(documented.map(|d| d.name))
}

/// The most differing paths shown for one GET.
const SHOWN: usize = 8;

/// None when the answers are identical, else how they differ.
fn compare(placement: &Response, allot: &Response) -> Option<Kind> {
    if placement.status == allot.status && placement.body == allot.body {
        return None;
    }
    let parse = |r: &Response| serde_json::from_slice::<Value>(&r.body).ok();
    let (p_json, a_json) = (parse(placement), parse(allot));
    // serde_json's maps compare as maps, whatever their order.
    if placement.status == allot.status && p_json.is_some() && p_json == a_json {
        return None;
    }
    let text = |r: &Response| {
        String::from_utf8_lossy(&r.body)
            .chars()
            .take(200)
            .collect::<String>()
    };
    let mut lines = Vec::new();
    if placement.status != allot.status {
        lines.push(format!(
            "status: {} (placement) vs {} (allot)",
            placement.status.as_u16(),
            allot.status.as_u16()
        ));
    }
    match (p_json, a_json) {
        (Some(p), Some(a)) => {
            if lines.is_empty() && canonical(&p) == canonical(&a) {
                return Some(Kind::Order);
            }
            diff("", &p, &a, &mut lines);
        }
        _ => lines.push(format!(
            "body: {:?} (placement) vs {:?} (allot)",
            text(placement),
            text(allot)
        )),
    }
    if lines.len() > SHOWN {
        let more = lines.len() - SHOWN;
        lines.truncate(SHOWN);
        lines.push(format!("... and {more} more"));
    }
    Some(Kind::Content(lines))
}

/// `value` with every list sorted (by its items' canonical text) and integral
/// floats as integers: what is left when order and number spelling are ignored.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
            _ => value.clone(),
        },
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(canonical).collect();
            items.sort_by_cached_key(|v| v.to_string());
            Value::Array(items)
        }
        Value::Object(map) => {
            let mut sorted: Vec<(&String, Value)> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            sorted.sort_by(|x, y| x.0.cmp(y.0));
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        _ => value.clone(),
    }
}

/// The JSON paths where `p` (Placement's) and `a` (allot's) differ, with both values.
fn diff(path: &str, p: &Value, a: &Value, lines: &mut Vec<String>) {
    match (p, a) {
        (Value::Object(po), Value::Object(ao)) => {
            for (key, pv) in po {
                let sub = format!("{path}/{key}");
                match ao.get(key) {
                    Some(av) => diff(&sub, pv, av, lines),
                    None => lines.push(format!("{sub}: only in placement ({pv})")),
                }
            }
            for (key, av) in ao {
                if !po.contains_key(key) {
                    lines.push(format!("{path}/{key}: only in allot ({av})"));
                }
            }
        }
        // A list with the same items in another order adds nothing to show.
        (Value::Array(pa), Value::Array(aa))
            if pa.len() == aa.len() && canonical(p) != canonical(a) =>
        {
            for (i, (pv, av)) in pa.iter().zip(aa).enumerate() {
                diff(&format!("{path}/{i}"), pv, av, lines);
            }
        }
        _ if canonical(p) != canonical(a) => {
            let show = |v: &Value| v.to_string().chars().take(120).collect::<String>();
            lines.push(format!(
                "{}: {} (placement) vs {} (allot)",
                if path.is_empty() { "/" } else { path },
                show(p),
                show(a)
            ));
        }
        _ => {}
    }
}

/// `allot verify`: exits non-zero when an undocumented difference was found.
pub fn run(args: VerifyArgs) -> anyhow::Result<()> {
    let options = Options {
        microversions: args.microversions,
        candidates: args.candidates,
        parallel: args.parallel,
    };
    let placement = Endpoint {
        url: args.placement,
        token: args.placement_token,
    };
    let allot = Endpoint {
        url: args.allot,
        token: args.allot_token,
    };
    let summary = verify(&placement, &allot, &options, &mut std::io::stdout().lock())?;
    if summary.undocumented > 0 {
        anyhow::bail!(
            "{} undocumented differences between Placement and allot: do not switch yet",
            summary.undocumented
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_client::StatusCode;

    fn answer(status: u16, body: &str) -> Response {
        Response {
            status: StatusCode::from_u16(status).unwrap(),
            body: body.to_owned().into(),
        }
    }

    #[test]
    fn identical_order_and_content() {
        let a = answer(200, r#"{"traits": ["A", "B"], "n": 1.0}"#);
        assert_eq!(compare(&a, &a.clone()), None);
        let spaced = answer(200, r#"{"traits":["A","B"],"n":1.0}"#);
        assert_eq!(compare(&a, &spaced), None, "spacing and key order aside");
        let b = answer(200, r#"{"n": 1, "traits": ["B", "A"]}"#);
        assert_eq!(compare(&a, &b), Some(Kind::Order));
        let c = answer(200, r#"{"traits": ["A", "C"], "n": 1.0}"#);
        assert_eq!(
            compare(&a, &c),
            Some(Kind::Content(vec![
                "/traits/1: \"B\" (placement) vs \"C\" (allot)".into()
            ]))
        );
        let d = answer(404, "not found");
        let Some(Kind::Content(lines)) = compare(&a, &d) else {
            panic!()
        };
        assert_eq!(lines[0], "status: 200 (placement) vs 404 (allot)");
    }

    #[test]
    fn only_the_documented_differences_are_documented() {
        let documented =
            |path: &str, kind: &Kind| DOCUMENTED.iter().any(|d| (d.applies)(path, kind));
        assert!(documented(
            "/allocation_candidates?resources=VCPU:1",
            &Kind::Order
        ));
        assert!(documented("/traits", &Kind::Order));
        assert!(!documented(
            "/allocation_candidates?resources=VCPU:1",
            &Kind::Content(vec![])
        ));
    }
}
