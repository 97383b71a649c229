//! How long production files and functions may be.
//!
//! The measure of a function is the lines from its `fn` line to its closing brace
//! (doc comments and attributes above it do not count; a nested function or closure
//! counts within its parent, and is measured on its own too). Code for tests does not
//! count: modules and items under `#[cfg(test)]` (or the `testing` feature), and files
//! that only tests reach ([`crate::sources`]). A file is measured up to its first test
//! module.
//!
//! The one exception is a function whose body is a flat `match` whose arms each call
//! one function or build one value: a table in code, which reads best whole. It must
//! say so with the comment [`FLAT_MATCH_MARKER`] just above it (among or right above
//! its doc comment and attributes), and the check verifies that its body is such a
//! match, so that the marker cannot excuse anything else.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, Block, Expr, Item, Signature};

use crate::sources::{for_tests, Source};

/// The most lines a production function may have.
pub const MAX_FN_LINES: usize = 100;
/// The most lines a production source file may have before its tests.
pub const MAX_FILE_LINES: usize = 1_000;
/// The comment that names a flat `match` over [`MAX_FN_LINES`] as a table in code.
pub const FLAT_MATCH_MARKER: &str = "// size: flat match (a table in code)";

/// A production function and its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// The line of its `fn`, from 1.
    pub line: usize,
    /// Its lines, `fn` line to closing brace.
    pub lines: usize,
    /// Marked as a table in code ([`FLAT_MATCH_MARKER`]).
    pub marked: bool,
    /// Its body is a flat `match`.
    pub flat_match: bool,
}

/// Every production function of a file, nested ones included, in source order.
pub fn functions(source: &Source) -> Vec<Function> {
    let lines: Vec<&str> = source.text.lines().collect();
    let mut visitor = Functions {
        lines: &lines,
        found: Vec::new(),
    };
    visitor.visit_file(&source.syntax);
    visitor.found
}

/// A file's lines before its first test module (all of them if it has none).
pub fn lines_before_tests(source: &Source) -> usize {
    let first_test = source.syntax.items.iter().find_map(|item| match item {
        Item::Mod(module) if for_tests(&module.attrs) => {
            Some(first_line(&module.attrs, module.mod_token.span))
        }
        _ => None,
    });
    match first_test {
        Some(line) => line.saturating_sub(1),
        None => source.text.lines().count(),
    }
}

/// What breaks the rules in one file: a line of text per breach.
pub fn breaches(source: &Source, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    let before = lines_before_tests(source);
    if before > MAX_FILE_LINES {
        found.push(format!(
            "{name}: {before} lines before its tests (at most {MAX_FILE_LINES})"
        ));
    }
    for f in functions(source) {
        if f.marked && !f.flat_match {
            found.push(format!(
                "{name}:{}: fn {} is marked as a flat match, but its body is not one \
                 (a single `match` whose arms each call one function or build one value)",
                f.line, f.name
            ));
        } else if f.lines > MAX_FN_LINES && !f.marked {
            found.push(format!(
                "{name}:{}: fn {} is {} lines (at most {MAX_FN_LINES}; a flat match may \
                 be marked `{FLAT_MATCH_MARKER}`)",
                f.line, f.name, f.lines
            ));
        }
    }
    found
}

struct Functions<'a> {
    lines: &'a [&'a str],
    found: Vec<Function>,
}

impl Functions<'_> {
    fn record(&mut self, attrs: &[Attribute], sig: &Signature, block: &Block) {
        let line = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let first = first_line(attrs, sig.span());
        self.found.push(Function {
            name: sig.ident.to_string(),
            line,
            lines: end + 1 - line,
            marked: marked(self.lines, first, line),
            flat_match: is_flat_match(block),
        });
    }
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if !item_for_tests(item) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(&f.attrs, &f.sig, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if for_tests(&f.attrs) {
            return;
        }
        self.record(&f.attrs, &f.sig, &f.block);
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if for_tests(&f.attrs) {
            return;
        }
        if let Some(block) = &f.default {
            self.record(&f.attrs, &f.sig, block);
        }
        visit::visit_trait_item_fn(self, f);
    }
}

fn item_for_tests(item: &Item) -> bool {
    let attrs = match item {
        Item::Fn(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Const(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        _ => return false,
    };
    for_tests(attrs)
}

/// The first line an item takes: its first attribute's (a doc comment is one), or
/// `fallback`'s.
fn first_line(attrs: &[Attribute], fallback: Span) -> usize {
    attrs
        .iter()
        .map(|a| a.pound_token.span.start().line)
        .chain(std::iter::once(fallback.start().line))
        .min()
        .unwrap_or(1)
}

/// Whether the marker stands on the line right above the item, or among its doc
/// comment and attributes (lines `first - 1 .. fn_line`, counted from 1).
fn marked(lines: &[&str], first: usize, fn_line: usize) -> bool {
    let from = first.saturating_sub(2);
    let to = fn_line.saturating_sub(1).min(lines.len());
    lines
        .get(from..to)
        .is_some_and(|region| region.iter().any(|l| l.trim() == FLAT_MATCH_MARKER))
}

/// Whether a body is one `match` (possibly wrapped in one call, as `Ok(match ...)`),
/// each of whose arms is one call or one value rather than a block of statements or
/// further branching.
pub fn is_flat_match(block: &Block) -> bool {
    let [syn::Stmt::Expr(expr, None)] = block.stmts.as_slice() else {
        return false;
    };
    let Some(matched) = as_match(expr) else {
        return false;
    };
    matched.arms.iter().all(|arm| is_one_value(&arm.body))
}

fn as_match(expr: &Expr) -> Option<&syn::ExprMatch> {
    match expr {
        Expr::Match(m) => Some(m),
        Expr::Paren(p) => as_match(&p.expr),
        Expr::Call(call) if call.args.len() == 1 => call.args.first().and_then(as_match),
        _ => None,
    }
}

fn is_one_value(expr: &Expr) -> bool {
    match expr {
        Expr::Block(block) => match block.block.stmts.as_slice() {
            [syn::Stmt::Expr(inner, _)] => is_one_value(inner),
            [syn::Stmt::Macro(_)] => true,
            _ => false,
        },
        Expr::If(_)
        | Expr::Match(_)
        | Expr::Loop(_)
        | Expr::While(_)
        | Expr::ForLoop(_)
        | Expr::Closure(_)
        | Expr::Let(_)
        | Expr::Unsafe(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source {
        Source {
            path: "x.rs".into(),
            text: text.to_owned(),
            syntax: syn::parse_file(text).expect("parses"),
        }
    }

    fn long_fn(name: &str, body_lines: usize) -> String {
        let mut text = format!("fn {name}() {{\n");
        for i in 0..body_lines {
            text.push_str(&format!("    let _x{i} = \"}}{{\";\n"));
        }
        text.push_str("}\n");
        text
    }

    #[test]
    fn a_function_over_the_bound_is_a_breach_and_one_at_it_is_not() {
        let at = source(&long_fn("at_bound", MAX_FN_LINES - 2));
        assert_eq!(functions(&at)[0].lines, MAX_FN_LINES);
        assert!(breaches(&at, "x.rs").is_empty());
        let over = source(&long_fn("over_bound", MAX_FN_LINES - 1));
        let found = breaches(&over, "x.rs");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("fn over_bound is 101 lines"), "{found:?}");
    }

    #[test]
    fn test_code_does_not_count() {
        let text = format!(
            "fn short() {{}}\n#[cfg(test)]\nmod tests {{\n{}}}\n",
            long_fn("long_test", 200)
        );
        let s = source(&text);
        assert!(breaches(&s, "x.rs").is_empty());
        assert_eq!(lines_before_tests(&s), 1);
    }

    #[test]
    fn nested_functions_count_in_their_parent_and_alone() {
        let text = format!("fn outer() {{\n{}}}\n", long_fn("inner", 150));
        let found = breaches(&source(&text), "x.rs");
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn a_marked_flat_match_is_excused_and_a_marked_block_is_not() {
        let mut table =
            format!("{FLAT_MATCH_MARKER}\n/// Doc.\nfn table(x: u32) -> u32 {{\n    match x {{\n");
        for i in 0..120 {
            table.push_str(&format!("        {i} => f({i}),\n"));
        }
        table.push_str("        _ => 0,\n    }\n}\n");
        let found = functions(&source(&table));
        assert!(found[0].marked && found[0].flat_match, "{found:?}");
        assert!(breaches(&source(&table), "x.rs").is_empty());

        let pretend = format!("{FLAT_MATCH_MARKER}\n{}", long_fn("pretend", 150));
        let found = breaches(&source(&pretend), "x.rs");
        assert!(found[0].contains("is marked as a flat match"), "{found:?}");

        let branching = format!(
            "{FLAT_MATCH_MARKER}\nfn b(x: u32) -> u32 {{\n    match x {{\n        0 => {{ let y = 1; y }}\n        _ => 0,\n    }}\n}}\n"
        );
        assert!(!breaches(&source(&branching), "x.rs").is_empty());
    }

    #[test]
    fn a_long_file_is_a_breach() {
        let text = "fn f() {}\n".repeat(MAX_FILE_LINES + 1);
        let found = breaches(&source(&text), "x.rs");
        assert!(
            found[0].contains("1001 lines before its tests"),
            "{found:?}"
        );
    }
}
