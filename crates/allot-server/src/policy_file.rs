//! Operator policy overrides: an oslo.policy file, parsed and held for reloads.
//!
//! A policy file maps rule names to check strings
//! (`"placement:resource_providers:list": "role:reader or role:admin"`). Each rule it
//! names replaces the built-in one (`crate::policy` evaluates them); the rest keep the
//! mode's behaviour.
//!
//! The check syntax is the part of oslo.policy's that Placement's own rules use:
//! `role:X`, `rule:NAME`, `project_id:%(project_id)s`, `user_id:%(user_id)s`, `@`
//! (always), `!` (never), `and`, `or`, `not` (keywords in any case), parentheses, and
//! the empty string (always). Precedence, loosest first: `or`, `and`, `not`. Any other
//! check (`is_admin:True`, `http:`, literal values) is refused with its position
//! rather than silently never matching.
//!
//! The file format: the workspace has no YAML crate, and policy files are one
//! `"key": "value"` pair per line, so [`parse_rules`] reads that subset (comments,
//! blank lines, a `---` start marker, quoted or bare keys and values) instead of
//! pulling in a YAML library; a file that starts with `{` is read as JSON, oslo's
//! older format.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// A parsed check string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `@` or the empty string.
    Always,
    /// `!`.
    Never,
    /// `role:NAME` (compared case-insensitively, as oslo.policy does).
    Role(String),
    /// `rule:NAME`: another rule of the file, or a built-in one.
    Rule(String),
    /// `project_id:%(project_id)s`: the caller's project is the target's.
    TargetProject,
    /// `user_id:%(user_id)s`: the caller is the target's user.
    TargetUser,
    /// `not X`.
    Not(Box<Expr>),
    /// `X and Y and ...`.
    All(Vec<Expr>),
    /// `X or Y or ...`.
    Any(Vec<Expr>),
}

/// A check string that does not parse: where (1-based character column) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError {
    /// The 1-based column of the offending token (one past the end for "ended too
    /// early").
    pub column: usize,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at column {}: {}", self.column, self.message)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Open,
    Close,
    And,
    Or,
    Not,
    Word(String),
}

/// Splits a check string into tokens with their 1-based columns, as oslo.policy
/// does: words are separated by whitespace, and each word's leading `(`s and trailing
/// `)`s are parentheses of their own (so `%(project_id)s` stays one word).
fn tokenize(text: &str) -> Vec<(usize, Tok)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let mut start = i;
        let mut end = i;
        while end < chars.len() && !chars[end].is_whitespace() {
            end += 1;
        }
        i = end;
        while start < end && chars[start] == '(' {
            out.push((start + 1, Tok::Open));
            start += 1;
        }
        let mut closes = 0;
        while end > start && chars[end - 1] == ')' {
            end -= 1;
            closes += 1;
        }
        if start < end {
            let word: String = chars[start..end].iter().collect();
            let tok = match word.to_ascii_lowercase().as_str() {
                "and" => Tok::And,
                "or" => Tok::Or,
                "not" => Tok::Not,
                _ => Tok::Word(word),
            };
            out.push((start + 1, tok));
        }
        for k in 0..closes {
            out.push((end + k + 1, Tok::Close));
        }
    }
    out
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    /// The column just past the text, for errors at its end.
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(_, t)| t)
    }

    fn column(&self) -> usize {
        self.toks.get(self.at).map_or(self.end, |(c, _)| *c)
    }

    fn error(&self, message: impl Into<String>) -> CheckError {
        CheckError {
            column: self.column(),
            message: message.into(),
        }
    }

    fn or(&mut self) -> Result<Expr, CheckError> {
        self.joined(Tok::Or, Parser::and, Expr::Any)
    }

    fn and(&mut self) -> Result<Expr, CheckError> {
        self.joined(Tok::And, Parser::not, Expr::All)
    }

    /// `term (op term)*`: one term as it is, several joined by `join`.
    fn joined(
        &mut self,
        op: Tok,
        term: fn(&mut Parser) -> Result<Expr, CheckError>,
        join: fn(Vec<Expr>) -> Expr,
    ) -> Result<Expr, CheckError> {
        let first = term(self)?;
        if self.peek() != Some(&op) {
            return Ok(first);
        }
        let mut terms = vec![first];
        while self.peek() == Some(&op) {
            self.at += 1;
            terms.push(term(self)?);
        }
        Ok(join(terms))
    }

    fn not(&mut self) -> Result<Expr, CheckError> {
        if self.peek() == Some(&Tok::Not) {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, CheckError> {
        let column = self.column();
        match self.peek().cloned() {
            Some(Tok::Open) => {
                self.at += 1;
                let inner = self.or()?;
                if self.peek() != Some(&Tok::Close) {
                    return Err(
                        self.error(format!("expected `)` to close the `(` at column {column}"))
                    );
                }
                self.at += 1;
                Ok(inner)
            }
            Some(Tok::Word(word)) => {
                self.at += 1;
                check(&word).map_err(|message| CheckError { column, message })
            }
            Some(other) => Err(self.error(format!(
                "expected a check, found `{}`",
                match other {
                    Tok::Close => ")",
                    Tok::And => "and",
                    Tok::Or => "or",
                    Tok::Not => "not",
                    Tok::Open | Tok::Word(_) => "?",
                }
            ))),
            None => Err(self.error("expected a check, found the end of the rule")),
        }
    }
}

/// One check word: `@`, `!` or `kind:match`.
fn check(word: &str) -> Result<Expr, String> {
    match word {
        "@" => return Ok(Expr::Always),
        "!" => return Ok(Expr::Never),
        _ => {}
    }
    let Some((kind, value)) = word.split_once(':') else {
        return Err(format!(
            "`{word}` is not a check (expected `@`, `!` or KIND:VALUE)"
        ));
    };
    match (kind, value) {
        (_, "") => Err(format!("`{word}` names nothing after the colon")),
        ("role", role) => Ok(Expr::Role(role.to_owned())),
        ("rule", rule) => Ok(Expr::Rule(rule.to_owned())),
        ("project_id", "%(project_id)s") => Ok(Expr::TargetProject),
        ("user_id", "%(user_id)s") => Ok(Expr::TargetUser),
        _ => Err(format!(
            "unsupported check `{word}` (supported: role:NAME, rule:NAME, \
             project_id:%(project_id)s, user_id:%(user_id)s, @, !)"
        )),
    }
}

/// Parses one check string.
pub fn parse_check(text: &str) -> Result<Expr, CheckError> {
    let toks = tokenize(text);
    if toks.is_empty() {
        return Ok(Expr::Always);
    }
    let mut parser = Parser {
        toks,
        at: 0,
        end: text.chars().count() + 1,
    };
    let expr = parser.or()?;
    if parser.at < parser.toks.len() {
        return Err(parser.error("expected `and`, `or` or the end of the rule"));
    }
    Ok(expr)
}

/// The rules of one policy file, by name, with their text for `allot policy list`.
#[derive(Debug, Default)]
pub struct Rules {
    rules: BTreeMap<String, (String, Expr)>,
}

impl Rules {
    /// The parsed check of a rule the file names.
    pub fn get(&self, name: &str) -> Option<&Expr> {
        self.rules.get(name).map(|(_, e)| e)
    }

    /// The rule's text as the file wrote it.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.rules.get(name).map(|(t, _)| t.as_str())
    }

    /// Every rule name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.rules.keys().map(String::as_str)
    }

    /// Builds the rules from (name, check string) pairs: every check must parse, and
    /// no rule may reach itself through `rule:` references (it could never be
    /// decided).
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Result<Rules, String> {
        let mut rules = BTreeMap::new();
        for (name, text) in pairs {
            let expr = parse_check(&text).map_err(|e| format!("rule {name:?}: {e}"))?;
            if rules.insert(name.clone(), (text, expr)).is_some() {
                return Err(format!("rule {name:?} is given twice"));
            }
        }
        let rules = Rules { rules };
        for name in rules.rules.keys() {
            rules.find_cycle(name, &mut Vec::new())?;
        }
        Ok(rules)
    }

    fn find_cycle<'a>(&'a self, name: &'a str, path: &mut Vec<&'a str>) -> Result<(), String> {
        if path.contains(&name) {
            path.push(name);
            return Err(format!(
                "rule {:?} refers to itself: {}",
                path[0],
                path.join(" -> ")
            ));
        }
        let Some((_, expr)) = self.rules.get(name) else {
            return Ok(());
        };
        path.push(name);
        let mut refs = Vec::new();
        references(expr, &mut refs);
        for r in refs {
            self.find_cycle(r, path)?;
        }
        path.pop();
        Ok(())
    }

    /// Every `rule:NAME` the file's rules refer to.
    pub fn referenced(&self) -> Vec<&str> {
        let mut refs = Vec::new();
        for (_, expr) in self.rules.values() {
            references(expr, &mut refs);
        }
        refs
    }
}

fn references<'a>(expr: &'a Expr, out: &mut Vec<&'a str>) {
    match expr {
        Expr::Rule(name) => out.push(name),
        Expr::Not(e) => references(e, out),
        Expr::All(es) | Expr::Any(es) => es.iter().for_each(|e| references(e, out)),
        Expr::Always | Expr::Never | Expr::Role(_) | Expr::TargetProject | Expr::TargetUser => {}
    }
}

/// Reads a policy file's text: JSON when it starts with `{`, else the one-pair-a-line
/// YAML subset. Errors name the line (or the rule) and the column.
pub fn parse_rules(text: &str) -> Result<Rules, String> {
    if text.trim_start().starts_with('{') {
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON object: {e}"))?;
        let pairs = map
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                _ => Err(format!("rule {k:?}: the check must be a string")),
            })
            .collect::<Result<_, _>>()?;
        return Rules::from_pairs(pairs);
    }
    let mut pairs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---" {
            continue;
        }
        let pair =
            yaml_pair(line).map_err(|(col, why)| format!("line {}: column {col}: {why}", n + 1))?;
        pairs.push(pair);
    }
    Rules::from_pairs(pairs)
}

/// One `key: value` line. Errors carry a 1-based column.
fn yaml_pair(line: &str) -> Result<(String, String), (usize, String)> {
    let chars: Vec<char> = line.chars().collect();
    let mut i = chars.iter().take_while(|c| c.is_whitespace()).count();
    let key = if matches!(chars.get(i), Some('"' | '\'')) {
        let (key, next) = quoted(&chars, i)?;
        i = next;
        while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
            i += 1;
        }
        if chars.get(i) != Some(&':') {
            return Err((i + 1, "expected `:` after the rule name".into()));
        }
        i += 1;
        key
    } else {
        // A bare key runs to the first colon followed by a space or the line's end
        // (rule names have colons of their own).
        let start = i;
        loop {
            match chars.get(i) {
                None => return Err((start + 1, "expected `NAME: CHECK`".into())),
                Some(':') if chars.get(i + 1).is_none_or(|c| c.is_whitespace()) => break,
                Some(_) => i += 1,
            }
        }
        let key: String = chars[start..i].iter().collect();
        i += 1;
        key.trim_end().to_owned()
    };
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    let value = match chars.get(i) {
        None | Some('#') => String::new(),
        Some('"' | '\'') => {
            let (value, next) = quoted(&chars, i)?;
            let rest: String = chars[next..].iter().collect();
            let rest = rest.trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                return Err((next + 1, "unexpected text after the quoted check".into()));
            }
            value
        }
        Some(_) => {
            // A bare value ends at a comment (` #`).
            let rest: String = chars[i..].iter().collect();
            let end = rest.find(" #").unwrap_or(rest.len());
            rest[..end].trim().to_owned()
        }
    };
    Ok((key, value))
}

/// A quoted scalar starting at `chars[at]`: `"..."` with `\"` and `\\` escapes, or
/// `'...'` with `''` for a quote. Returns it and the index past the closing quote.
fn quoted(chars: &[char], at: usize) -> Result<(String, usize), (usize, String)> {
    let q = chars[at];
    let mut out = String::new();
    let mut i = at + 1;
    loop {
        match chars.get(i) {
            None => return Err((at + 1, format!("unterminated {q}quoted{q} string"))),
            Some('\\') if q == '"' => {
                match chars.get(i + 1) {
                    Some(c @ ('"' | '\\')) => out.push(*c),
                    _ => return Err((i + 1, "unsupported escape in a quoted string".into())),
                }
                i += 2;
            }
            Some(c) if *c == q => {
                if q == '\'' && chars.get(i + 1) == Some(&'\'') {
                    out.push('\'');
                    i += 2;
                } else {
                    return Ok((out, i + 1));
                }
            }
            Some(c) => {
                out.push(*c);
                i += 1;
            }
        }
    }
}

/// A policy file and its current rules, swapped whole on [`PolicyFile::reload`]
/// (SIGHUP), so that a request sees one version of the file throughout.
#[derive(Debug)]
pub struct PolicyFile {
    path: PathBuf,
    current: RwLock<Arc<Rules>>,
}

impl PolicyFile {
    /// Reads and parses the file; an error says which rule and where.
    pub fn open(path: &Path) -> Result<PolicyFile, String> {
        let rules = read(path)?;
        Ok(PolicyFile {
            path: path.to_owned(),
            current: RwLock::new(Arc::new(rules)),
        })
    }

    /// Rereads the file; on error the old rules stay. Returns the number of rules.
    pub fn reload(&self) -> Result<usize, String> {
        let rules = read(&self.path)?;
        let n = rules.rules.len();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(rules);
        Ok(n)
    }

    /// The rules in force now.
    pub fn current(&self) -> Arc<Rules> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn read(path: &Path) -> Result<Rules, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading the policy file {}: {e}", path.display()))?;
    parse_rules(&text).map_err(|e| format!("policy file {}: {e}", path.display()))
}

/// The names a file gives that are neither built in nor referenced by another of its
/// rules: probably misspelt (oslo.policy warns of them too, and so should the caller).
pub fn unknown_names<'a>(rules: &'a Rules, known: &dyn Fn(&str) -> bool) -> Vec<&'a str> {
    let referenced: HashSet<&str> = rules.referenced().into_iter().collect();
    rules
        .names()
        .filter(|n| !known(n) && !referenced.contains(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Expr::*;

    fn role(r: &str) -> Expr {
        Role(r.into())
    }

    #[test]
    fn every_check_and_operator_parses() {
        assert_eq!(parse_check(""), Ok(Always));
        assert_eq!(parse_check("   "), Ok(Always));
        assert_eq!(parse_check("@"), Ok(Always));
        assert_eq!(parse_check("!"), Ok(Never));
        assert_eq!(parse_check("role:reader"), Ok(role("reader")));
        assert_eq!(parse_check("rule:admin_api"), Ok(Rule("admin_api".into())));
        assert_eq!(parse_check("project_id:%(project_id)s"), Ok(TargetProject));
        assert_eq!(parse_check("user_id:%(user_id)s"), Ok(TargetUser));
        assert_eq!(parse_check("not role:a"), Ok(Not(Box::new(role("a")))));
        assert_eq!(
            parse_check("role:a AND role:b"),
            Ok(All(vec![role("a"), role("b")]))
        );
        assert_eq!(
            parse_check("role:a Or role:b or role:c"),
            Ok(Any(vec![role("a"), role("b"), role("c")]))
        );
    }

    #[test]
    fn precedence_is_or_then_and_then_not() {
        // and binds tighter than or.
        assert_eq!(
            parse_check("role:a or role:b and role:c"),
            Ok(Any(vec![role("a"), All(vec![role("b"), role("c")])]))
        );
        // not binds tighter than and.
        assert_eq!(
            parse_check("not role:a and role:b"),
            Ok(All(vec![Not(Box::new(role("a"))), role("b")]))
        );
        // Parentheses override, and need no spaces inside them.
        assert_eq!(
            parse_check("((role:a or role:b)) and not (role:c)"),
            Ok(All(vec![
                Any(vec![role("a"), role("b")]),
                Not(Box::new(role("c")))
            ]))
        );
        assert_eq!(
            parse_check("not not !"),
            Ok(Not(Box::new(Not(Box::new(Never)))))
        );
    }

    #[test]
    fn errors_say_where() {
        let err = |s| parse_check(s).unwrap_err();
        assert_eq!(err("role:a or").column, 10);
        assert!(err("role:a or").message.contains("end of the rule"));
        assert_eq!(err("role:a role:b").column, 8);
        assert_eq!(err("(role:a").column, 8);
        assert!(err("(role:a").message.contains("column 1"));
        assert_eq!(err("role:a and )").column, 12);
        assert_eq!(err("(role:a))").column, 9);
        assert_eq!(err("role:a or is_admin:True").column, 11);
        assert!(err("role:a or is_admin:True")
            .message
            .contains("unsupported"));
        assert_eq!(err("admin").column, 1);
        assert_eq!(err("  role:").column, 3);
        assert_eq!(err("project_id:abc").column, 1);
        assert_eq!(err("and role:a").column, 1);
    }

    #[test]
    fn the_yaml_subset() {
        let text = "# Placement overrides\n---\n\
            \"placement:resource_providers:list\": \"role:reader or role:admin\"\n\
            'placement:traits:list': 'role:it''s'  # a comment\n\
            placement:usages: rule:admin_api # bare\n\
            \n\
            \"placement:resource_providers:create\": \"!\"\n\
            \"allot:claims:list\": \"\"\n\
            \"x\":\n";
        let rules = parse_rules(text).unwrap();
        assert_eq!(
            rules.text("placement:resource_providers:list"),
            Some("role:reader or role:admin")
        );
        assert_eq!(rules.get("placement:traits:list"), Some(&role("it's")));
        assert_eq!(
            rules.get("placement:usages"),
            Some(&Rule("admin_api".into()))
        );
        assert_eq!(
            rules.get("placement:resource_providers:create"),
            Some(&Never)
        );
        assert_eq!(rules.get("allot:claims:list"), Some(&Always));
        assert_eq!(rules.get("x"), Some(&Always));
        assert_eq!(rules.names().count(), 6);
    }

    #[test]
    fn file_errors_name_the_rule_or_line() {
        let e = parse_rules("\"a\": \"role:x or\"\n").unwrap_err();
        assert_eq!(
            e,
            "rule \"a\": at column 10: expected a check, found the end of the rule"
        );
        let e = parse_rules("# c\n\"a\" \"role:x\"\n").unwrap_err();
        assert!(e.starts_with("line 2: column 5:"), "{e}");
        let e = parse_rules("\"a: role:x\n").unwrap_err();
        assert!(e.contains("unterminated"), "{e}");
        let e = parse_rules("\"a\": \"@\"\n\"a\": \"!\"\n").unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let e = parse_rules("\"a\": \"rule:b\"\n\"b\": \"role:x or rule:a\"\n").unwrap_err();
        assert!(e.contains("a -> b -> a"), "{e}");
        let e = parse_rules("\"a\": \"role:x\" trailing\n").unwrap_err();
        assert!(e.contains("after the quoted"), "{e}");
    }

    #[test]
    fn json_files_too() {
        let rules = parse_rules("{\"a\": \"role:x\", \"b\": \"\"}").unwrap();
        assert_eq!(rules.get("a"), Some(&role("x")));
        assert_eq!(rules.get("b"), Some(&Always));
        assert!(parse_rules("{\"a\": 1}").is_err());
    }

    #[test]
    fn unknown_names_leave_out_aliases() {
        let rules =
            parse_rules("\"mine\": \"role:x\"\n\"known\": \"rule:mine\"\n\"typo\": \"@\"\n")
                .unwrap();
        assert_eq!(unknown_names(&rules, &|n| n == "known"), vec!["typo"]);
    }

    #[test]
    fn reload_keeps_the_old_rules_on_error() {
        let dir = std::env::temp_dir().join(format!("allot-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.yaml");
        std::fs::write(&path, "\"a\": \"role:x\"\n").unwrap();
        let file = PolicyFile::open(&path).unwrap();
        std::fs::write(&path, "\"a\": \"role:y\"\n\"b\": \"@\"\n").unwrap();
        assert_eq!(file.reload(), Ok(2));
        assert_eq!(file.current().get("a"), Some(&role("y")));
        std::fs::write(&path, "\"a\": \"(role:z\"\n").unwrap();
        let e = file.reload().unwrap_err();
        assert!(e.contains("rule \"a\": at column 8"), "{e}");
        assert_eq!(file.current().get("a"), Some(&role("y")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
