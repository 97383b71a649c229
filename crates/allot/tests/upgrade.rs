//! The upgrade rule, tested (docs/operations.md, "Upgrades"). Every folder under
//! `tests/upgrade/` holds what a release wrote, made by `scripts/upgrade-fixture`
//! with that release's binary: an SQLite database with its change log and the view
//! the release saved beside it, the same data as a PostgreSQL dump, and the answers
//! the release gave (`answers.json`). On each engine this build must take the
//! release's database as an operator's upgrade does (start `allot serve` on it,
//! which migrates it; on SQLite the release's saved view is refused and the tables
//! read), answer every recorded request as the release did, and read every record
//! of the change log the fixture holds with its own decoder.
//!
//! The log is read through the store's own reader, [`Store::changes_since`] from the
//! log's start, which is what a node following the log does with other nodes'
//! commits: a record this build cannot decode fails it with the commit and the
//! change that does not decode (`allot_store::log`). A fixture's log is never
//! pruned (it holds far fewer than the 10,000 commits the log keeps), so the read
//! from the start reaches every record.

mod support;

use std::path::{Path, PathBuf};

use allot_store::{Cursor, Store};
use support::{Database, Server};

/// The longest claim retention allot takes (ten years), so that the claims that
/// ended before the fixture was made are still there to be answered: the fixtures'
/// answers hold them.
const RETENTION: &str = "315360000";

/// One request of a fixture's `answers.json`, and what the release answered.
#[derive(serde::Deserialize)]
struct Answer {
    method: String,
    path: String,
    version: String,
    status: u16,
    /// The body as JSON; `null` for an empty one.
    body: serde_json::Value,
}

/// A release's fixture: its folder, named for the release's tag.
struct Fixture {
    name: String,
    dir: PathBuf,
}

impl Fixture {
    /// Every folder under `tests/upgrade/`, oldest release first (by name).
    fn all() -> Vec<Fixture> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/upgrade");
        let mut fixtures: Vec<Fixture> = std::fs::read_dir(&root)
            .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.is_dir())
            .map(|dir| Fixture {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                dir,
            })
            .collect();
        fixtures.sort_by(|a, b| a.name.cmp(&b.name));
        assert!(
            !fixtures.is_empty(),
            "no fixture under {}: the first release's is v0.1.0",
            root.display()
        );
        fixtures
    }

    fn answers(&self) -> Vec<Answer> {
        let path = self.dir.join("answers.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// A body for comparison: JSON (`null` when empty), without the `request_id` of
/// each error, which the server draws per request and so never answers twice alike.
fn comparable(body: serde_json::Value) -> serde_json::Value {
    let mut body = body;
    if let Some(errors) = body.get_mut("errors").and_then(|e| e.as_array_mut()) {
        for error in errors {
            if let Some(error) = error.as_object_mut() {
                error.remove("request_id");
            }
        }
    }
    body
}

/// Replays every request of the fixture on `server`; fails naming each one this
/// build answers otherwise than the release did.
fn answers_as_the_release(server: &Server, fixture: &Fixture, engine: &str) {
    let client = server.client();
    let answers = fixture.answers();
    let mut differ = Vec::new();
    for answer in &answers {
        let (status, body) = client.request(&answer.method, &answer.path, None, &answer.version);
        let body = if body.is_empty() {
            serde_json::Value::Null
        } else {
            support::json(&body)
        };
        let (body, expected) = (comparable(body), comparable(answer.body.clone()));
        let request = format!("{} {} at {}", answer.method, answer.path, answer.version);
        if status != answer.status {
            differ.push(format!(
                "{request}: status {status}, the release's {}: {body}",
                answer.status
            ));
        } else if let Some(difference) = first_difference(&body, &expected, String::new()) {
            differ.push(format!("{request}: {difference}"));
        }
    }
    assert!(
        differ.is_empty(),
        "fixture {} on {engine}: {} of {} answers differ from the release's:\n{}",
        fixture.name,
        differ.len(),
        answers.len(),
        differ.join("\n")
    );
}

/// Where `got` first differs from `expected`, as a JSON pointer (`/a/0/b`) and the
/// two values there; `None` when they are equal. Bodies run to kilobytes: the
/// pointer says what changed.
fn first_difference(
    got: &serde_json::Value,
    expected: &serde_json::Value,
    at: String,
) -> Option<String> {
    use serde_json::Value;
    let inner = |key: &str, got: Option<&Value>, expected: Option<&Value>| {
        let at = format!("{at}/{key}");
        match (got, expected) {
            (Some(got), Some(expected)) => first_difference(got, expected, at),
            (got, expected) => Some(format!(
                "at {at}: {}, the release's {}",
                got.map_or("nothing".into(), Value::to_string),
                expected.map_or("nothing".into(), Value::to_string)
            )),
        }
    };
    match (got, expected) {
        (Value::Object(got), Value::Object(expected)) => expected
            .keys()
            .chain(got.keys().filter(|key| !expected.contains_key(*key)))
            .find_map(|key| inner(key, got.get(key), expected.get(key))),
        (Value::Array(got), Value::Array(expected)) => (0..got.len().max(expected.len()))
            .find_map(|i| inner(&i.to_string(), got.get(i), expected.get(i))),
        _ if got == expected => None,
        _ => Some(format!("at {at}: {got}, the release's {expected}")),
    }
}

/// Opens the database with this build's store (migrating it, as it already is
/// after a server's start) and reads every commit of its change log with this
/// build's decoder; returns how many there are.
fn log_reads(url: &str, fixture: &Fixture, engine: &str) -> usize {
    let context = format!("fixture {} on {engine}", fixture.name);
    let mut store =
        Store::open(url).unwrap_or_else(|e| panic!("{context}: this build cannot open it: {e}"));
    let head = store
        .head()
        .unwrap_or_else(|e| panic!("{context}: the change log's head: {e}"));
    let commits = store
        .changes_since(Cursor(0))
        .unwrap_or_else(|e| panic!("{context}: its change log does not read with this build: {e}"));
    assert_eq!(
        commits.len() as i64,
        head.0,
        "{context}: the change log should hold every commit up to its head"
    );
    commits.len()
}

#[test]
fn every_release_fixture_reads_and_answers_alike_on_sqlite() {
    for fixture in Fixture::all() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["allot.db", "allot.db-view"] {
            std::fs::copy(fixture.dir.join(file), dir.path().join(file))
                .unwrap_or_else(|e| panic!("fixture {}: {file}: {e}", fixture.name));
        }
        let url = format!("sqlite:{}", dir.path().join("allot.db").display());
        // Its INFO lines say where the view came from.
        let args = [
            "--bind",
            "127.0.0.1:0",
            "--log",
            "info",
            "--claim-retention",
            RETENTION,
        ];
        let server = Server::start_args(&url, &args, &[]);
        // The view the release saved is another build's: refused, and the tables
        // read instead (which is also what the answers below come from).
        let refused = server
            .startup_log()
            .iter()
            .any(|l| l.contains("reading the tables: ") && l.contains("saved view: "));
        assert!(
            refused,
            "fixture {} on sqlite: the release's saved view should be refused: {:#?}",
            fixture.name,
            server.startup_log()
        );
        let metrics = server.call("GET", "/metrics", None).1;
        assert!(
            metrics.contains(r#"allot_view_load_seconds{source="tables"}"#),
            "fixture {}: the view should come from the tables",
            fixture.name
        );
        answers_as_the_release(&server, &fixture, "sqlite");
        server.terminate();
        assert!(log_reads(&url, &fixture, "sqlite") > 0);
    }
}

#[test]
fn every_release_fixture_reads_and_answers_alike_on_postgresql() {
    for fixture in Fixture::all() {
        let Some(db) = Database::create() else {
            return;
        };
        let path = fixture.dir.join("postgres.sql");
        let dump =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut client = postgres::Client::connect(&db.url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("{}: {e}", db.url));
        client
            .batch_execute(&dump)
            .unwrap_or_else(|e| panic!("fixture {}: loading postgres.sql: {e:?}", fixture.name));
        drop(client);
        let server = Server::start_args(
            &db.url,
            &["--bind", "127.0.0.1:0", "--claim-retention", RETENTION],
            &[],
        );
        answers_as_the_release(&server, &fixture, "postgresql");
        server.terminate();
        assert!(log_reads(&db.url, &fixture, "postgresql") > 0);
    }
}
