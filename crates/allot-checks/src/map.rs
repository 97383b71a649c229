//! ARCHITECTURE.md stays a map: short, undated, and naming only what exists.
//!
//! What is checked, and how a name is told from other code text:
//! - at most [`MAX_LINES`] lines;
//! - nothing dated or hashed: no ISO date, no commit hash (seven or more hex digits
//!   with both a digit and a letter among them);
//! - every inline code span that names a file or folder exists in the tree. A span
//!   names one when it has no space, does not start with `/` (a route, or a path on
//!   the installed system), `-` (a flag) or `$`, has no `{`, `=`, `:`, `*`, `<` or
//!   `(`, and contains a `/` or ends in a file extension of the repository's. It
//!   exists when it is a path from the root or the tail of a path in the tree
//!   (`engine/load.rs`); `../` leaves the repository and is refused;
//! - every relative link target exists, and none leaves the repository;
//! - every span of the form `Type::name` (a path whose last capitalised segment is
//!   followed by one more) names a type defined in the workspace and a field,
//!   variant, method, associated item or trait item of it; a lower-case path
//!   (`ops::bump`, `allot_server::Settings`) names an item or module that exists.
//!
//! Names are read off the syntax of every `.rs` file under `crates/` ([`Names`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use syn::visit::{self, Visit};

/// The most lines the map may have.
pub const MAX_LINES: usize = 500;

/// File extensions that make a code span a file name.
const EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "py", "sh", "yaml", "yml", "json", "txt", "css", "js", "svg", "service",
    "sql", "lock", "html", "db",
];

/// The items the workspace defines, by name.
#[derive(Default, Debug)]
pub struct Names {
    /// Types (structs, enums, unions, traits, aliases) and what is reachable as
    /// `Type::member`.
    pub members: BTreeMap<String, BTreeSet<String>>,
    /// Every named item: functions (methods too), constants, statics, modules,
    /// macros, types.
    pub items: BTreeSet<String>,
    /// The crates the workspace depends on (`std`, `rustls`, ...), whose paths are
    /// not the map's to check.
    pub external: BTreeSet<String>,
    /// The code of every file, without its line comments: where a name that a macro
    /// declares or generates (`Action::MetricsShow`) is found in use.
    pub code: String,
}

impl Names {
    /// The names defined in every `.rs` file under `crates/` of `paths` (the tree's
    /// listing, [`files`]; tests included: the map may point at a test that guards
    /// an invariant), but this crate's, whose tests spell names that do not exist on
    /// purpose.
    pub fn of_tree(root: &Path, paths: &[String]) -> Result<Names, String> {
        let mut names = Names::default();
        let sources = paths.iter().filter(|p| {
            p.starts_with("crates/") && p.ends_with(".rs") && !p.starts_with("crates/allot-checks/")
        });
        for file in sources {
            let text = fs::read_to_string(root.join(file)).map_err(|e| format!("{file}: {e}"))?;
            let syntax = syn::parse_file(&text).map_err(|e| format!("{file}: {e}"))?;
            let name = Path::new(file)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned());
            if let Some(stem) = name.filter(|s| s != "mod" && s != "lib" && s != "main") {
                names.items.insert(stem);
            }
            if let Some(folder) = Path::new(file).parent().and_then(Path::file_name) {
                names.items.insert(folder.to_string_lossy().into_owned());
            }
            names.visit_file(&syntax);
            for line in text.lines() {
                names
                    .code
                    .push_str(line.split("//").next().unwrap_or_default());
                names.code.push('\n');
            }
        }
        names.external = external_crates(root)?;
        Ok(names)
    }

    /// Whether `ty::member` exists: declared where the syntax shows it, or written in
    /// the code (a macro's enum, used by its variants' names).
    fn has_member(&self, ty: &str, member: &str) -> bool {
        self.members.get(ty).is_some_and(|m| m.contains(member))
            || written(&self.code, &format!("{ty}::{member}"))
    }

    fn has_type(&self, ty: &str) -> bool {
        self.members.contains_key(ty)
            || ["struct", "enum", "trait", "type", "union"]
                .iter()
                .any(|kw| written(&self.code, &format!("{kw} {ty}")))
    }

    fn has_item(&self, name: &str) -> bool {
        self.items.contains(name) || self.has_type(name)
    }

    fn member(&mut self, owner: &str, member: String) {
        self.members
            .entry(owner.to_owned())
            .or_default()
            .insert(member);
    }

    fn declare(&mut self, ty: String) {
        self.members.entry(ty.clone()).or_default();
        self.items.insert(ty);
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        let ty = s.ident.to_string();
        self.declare(ty.clone());
        for field in s.fields.iter().filter_map(|f| f.ident.as_ref()) {
            self.member(&ty, field.to_string());
        }
        visit::visit_item_struct(self, s);
    }

    fn visit_item_enum(&mut self, e: &'ast syn::ItemEnum) {
        let ty = e.ident.to_string();
        self.declare(ty.clone());
        for variant in &e.variants {
            self.member(&ty, variant.ident.to_string());
            for field in variant.fields.iter().filter_map(|f| f.ident.as_ref()) {
                self.member(&ty, field.to_string());
            }
        }
        visit::visit_item_enum(self, e);
    }

    fn visit_item_union(&mut self, u: &'ast syn::ItemUnion) {
        self.declare(u.ident.to_string());
    }

    fn visit_item_type(&mut self, t: &'ast syn::ItemType) {
        self.declare(t.ident.to_string());
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        let ty = t.ident.to_string();
        self.declare(ty.clone());
        for item in &t.items {
            let name = match item {
                syn::TraitItem::Fn(f) => f.sig.ident.to_string(),
                syn::TraitItem::Const(c) => c.ident.to_string(),
                syn::TraitItem::Type(t) => t.ident.to_string(),
                _ => continue,
            };
            self.member(&ty, name);
        }
        visit::visit_item_trait(self, t);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let syn::Type::Path(path) = &*i.self_ty {
            if let Some(last) = path.path.segments.last() {
                let ty = last.ident.to_string();
                for item in &i.items {
                    let name = match item {
                        syn::ImplItem::Fn(f) => f.sig.ident.to_string(),
                        syn::ImplItem::Const(c) => c.ident.to_string(),
                        syn::ImplItem::Type(t) => t.ident.to_string(),
                        _ => continue,
                    };
                    self.member(&ty, name);
                }
            }
        }
        visit::visit_item_impl(self, i);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.items.insert(f.sig.ident.to_string());
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_impl_item_const(&mut self, c: &'ast syn::ImplItemConst) {
        self.items.insert(c.ident.to_string());
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.items.insert(f.sig.ident.to_string());
        visit::visit_item_fn(self, f);
    }

    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        self.items.insert(c.ident.to_string());
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        self.items.insert(s.ident.to_string());
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.items.insert(m.ident.to_string());
        visit::visit_item_mod(self, m);
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        if let Some(name) = &m.ident {
            self.items.insert(name.to_string());
        }
    }
}

/// Whether `text` holds `name` as a whole path (not the start of a longer one).
fn written(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let after = text[at + name.len()..].chars().next();
        let before = text[..at].chars().next_back();
        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The names of the packages in `Cargo.lock`, as code spells them (`-` as `_`), and
/// the standard library's crates.
fn external_crates(root: &Path) -> Result<BTreeSet<String>, String> {
    let lock = root.join("Cargo.lock");
    let text = fs::read_to_string(&lock).map_err(|e| format!("{}: {e}", lock.display()))?;
    let mut out: BTreeSet<String> = ["std", "core", "alloc"].map(String::from).into();
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("name = \"")
            .and_then(|n| n.strip_suffix('"'))
        {
            if !name.starts_with("allot") {
                out.insert(name.replace('-', "_"));
            }
        }
    }
    Ok(out)
}

/// Every file and folder of the tree at `root`, as paths relative to it with `/`
/// (folders ending in `/`), leaving out `target/` and `.git/`.
pub fn files(root: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(next) = stack.pop() {
        let entries = fs::read_dir(&next).map_err(|e| format!("{}: {e}", next.display()))?;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == ".git" || name == "target" {
                continue;
            }
            let relative = crate::relative(root, &path);
            if path.is_dir() {
                out.push(format!("{relative}/"));
                stack.push(path);
            } else {
                out.push(relative);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// What in `map` (the text of ARCHITECTURE.md) breaks the rules, given the tree's
/// paths (relative to its root, folders ending in `/`) and names.
pub fn breaches(map: &str, paths: &[String], names: &Names) -> Vec<String> {
    let mut found = Vec::new();
    let count = map.lines().count();
    if count > MAX_LINES {
        found.push(format!("{count} lines (at most {MAX_LINES})"));
    }
    for (n, line) in prose_lines(map) {
        if let Some(word) = dated_or_hashed(line) {
            found.push(format!("line {n}: `{word}` dates or hashes the map"));
        }
        for span in code_spans(line) {
            if let Some(breach) = check_span(span, paths, names) {
                found.push(format!("line {n}: {breach}"));
            }
        }
        for target in link_targets(line) {
            if let Some(breach) = check_link(target, paths) {
                found.push(format!("line {n}: {breach}"));
            }
        }
    }
    found
}

/// The lines outside fenced code blocks, numbered from 1.
fn prose_lines(map: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in map.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The inline code spans of a line (single backticks).
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect()
}

/// The targets of the line's Markdown links, `[text](target)`.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                out.push(&after[..end]);
                rest = &after[end..];
            }
            None => break,
        }
    }
    out
}

fn dated_or_hashed(line: &str) -> Option<&str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .find(|word| is_iso_date(word) || is_hash(word))
}

fn is_iso_date(word: &str) -> bool {
    let b = word.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && [0, 1, 2, 3, 5, 6, 8, 9]
            .iter()
            .all(|&i| b[i].is_ascii_digit())
        && (word.starts_with("19") || word.starts_with("20"))
}

fn is_hash(word: &str) -> bool {
    word.len() >= 7
        && word.len() <= 40
        && word
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

fn check_span(span: &str, paths: &[String], names: &Names) -> Option<String> {
    if let Some(breach) = check_rust_path(span, names) {
        return Some(breach);
    }
    if !names_a_file(span) {
        return None;
    }
    if span.starts_with("../") {
        return Some(format!("`{span}` is outside the repository"));
    }
    (!exists(span, paths)).then(|| format!("`{span}` names no file or folder of the tree"))
}

/// Whether a code span is meant as a file or folder name (see the module doc).
fn names_a_file(span: &str) -> bool {
    if span.is_empty()
        || span.contains(char::is_whitespace)
        || span.starts_with(['/', '-', '$'])
        || span.contains(['{', '=', ':', '*', '<', '(', '@', '?', '&', ','])
    {
        return false;
    }
    let extension = span
        .rsplit_once('.')
        .map(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
        .unwrap_or(false);
    span.contains('/') || extension
}

/// Whether `span` is a path from the root or the tail of one (whole components).
fn exists(span: &str, paths: &[String]) -> bool {
    let wanted = span.trim_start_matches("./").trim_end_matches('/');
    paths.iter().any(|p| {
        let p = p.trim_end_matches('/');
        p == wanted || p.ends_with(&format!("/{wanted}"))
    })
}

fn check_link(target: &str, paths: &[String]) -> Option<String> {
    let target = target.split('#').next().unwrap_or_default();
    if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    if target.starts_with("../") || target.starts_with('/') {
        return Some(format!("link `{target}` leaves the repository"));
    }
    let wanted = target.trim_start_matches("./").trim_end_matches('/');
    let found = paths.iter().any(|p| p.trim_end_matches('/') == wanted);
    (!found).then(|| format!("link `{target}` names no file or folder of the tree"))
}

/// Checks a span that reads as a Rust path (`Type::name`, `module::item`).
fn check_rust_path(span: &str, names: &Names) -> Option<String> {
    let path = span
        .split(['(', '<', '!', ' ', '{'])
        .next()
        .unwrap_or_default();
    if !path.contains("::") || span.starts_with(['/', '-', '$']) {
        return None;
    }
    let segments: Vec<&str> = path.split("::").collect();
    let is_ident =
        |s: &&str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !segments.iter().all(is_ident) || names.external.contains(segments[0]) {
        return None;
    }
    let capitalised = |s: &str| s.starts_with(|c: char| c.is_ascii_uppercase());
    let last_type = (0..segments.len().saturating_sub(1))
        .rev()
        .find(|&i| capitalised(segments[i]));
    match last_type {
        Some(i) => {
            let (ty, member) = (segments[i], segments[i + 1]);
            if !names.has_type(ty) {
                Some(format!("`{span}`: no type `{ty}` in the workspace"))
            } else if !names.has_member(ty, member) {
                Some(format!("`{span}`: `{ty}` has no `{member}`"))
            } else {
                None
            }
        }
        None => {
            let last = segments[segments.len() - 1];
            (!names.has_item(last))
                .then(|| format!("`{span}`: no item or module `{last}` in the workspace"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        let mut names = Names::default();
        let file = syn::parse_file(
            "pub struct State { views: u32 } impl State { pub fn apply(&self) {} }
             pub enum Change { PutTrait } mod ops { pub fn bump() {} }",
        )
        .expect("parses");
        names.visit_file(&file);
        names
    }

    fn paths() -> Vec<String> {
        [
            "crates/",
            "crates/allot-store/",
            "crates/allot-store/src/engine/load.rs",
            "docs/",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn check(map: &str) -> Vec<String> {
        breaches(map, &paths(), &names())
    }

    #[test]
    fn names_that_exist_pass() {
        let map = "The `State::apply` of `Change::PutTrait`, `ops::bump`, `engine/load.rs`, \
                   `crates/allot-store/`, `GET /allocations/{uuid}`, `--bind`, `sqlite:PATH`, \
                   [docs](docs/).";
        assert_eq!(check(map), Vec::<String>::new());
    }

    #[test]
    fn names_that_do_not_exist_are_breaches() {
        let found = check("`State::warm_consumer`, `Host::read`, `ops::gone`, `engine/saved.rs`");
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(
            found[0].contains("`State` has no `warm_consumer`"),
            "{found:?}"
        );
        assert!(found[1].contains("no type `Host`"), "{found:?}");
    }

    #[test]
    fn outside_links_dates_hashes_and_length_are_breaches() {
        let found = check("[x](../shared/HARD-PARTS.md) on 2026-11-28 at 0840656, `../shared`");
        assert_eq!(found.len(), 3, "{found:?}");
        let long = "line\n".repeat(MAX_LINES + 1);
        assert_eq!(check(&long).len(), 1);
    }

    #[test]
    fn fenced_blocks_are_not_read() {
        assert!(check("```\n`State::gone` 2026-01-01\n```\n").is_empty());
    }
}
