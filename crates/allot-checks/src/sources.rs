//! The production source files of the workspace: every file a crate's `lib.rs` or
//! `main.rs` reaches through `mod` declarations that are not for tests.
//!
//! A module is for tests when its declaration carries `#[cfg(test)]` or a `cfg` that
//! names the `testing` feature (the test-support code some crates export to the
//! others' tests). Files under `tests/`, `benches/` and `examples/` are never reached
//! this way, so they are test-only by construction. Reading the module tree, rather
//! than globbing `src/`, is what tells `handlers/test_support.rs` from a handler.

use std::fs;
use std::path::{Path, PathBuf};

use syn::{Attribute, Item, ItemMod, Meta};

/// A production source file, parsed.
pub struct Source {
    /// Where it is.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// Its syntax tree.
    pub syntax: syn::File,
}

/// Every production source file of every crate under `root/crates`, in a stable order.
pub fn production(root: &Path) -> Result<Vec<Source>, String> {
    let mut found = Vec::new();
    let crates = root.join("crates");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .map_err(|e| format!("{}: {e}", crates.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        for root_file in ["src/lib.rs", "src/main.rs"] {
            let file = dir.join(root_file);
            if file.is_file() {
                walk(&file, ModuleDir::OfRoot, &mut found)?;
            }
        }
        let bins = dir.join("src/bin");
        if bins.is_dir() {
            let mut entries: Vec<PathBuf> = fs::read_dir(&bins)
                .map_err(|e| format!("{}: {e}", bins.display()))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect();
            entries.sort();
            for file in entries {
                walk(&file, ModuleDir::OfRoot, &mut found)?;
            }
        }
    }
    Ok(found)
}

/// Where a file's child modules live: beside it for a crate root or `mod.rs`, in a
/// folder of its own name otherwise (`a/b.rs`'s children are in `a/b/`).
#[derive(Clone, Copy)]
enum ModuleDir {
    OfRoot,
    Named,
}

fn walk(path: &Path, kind: ModuleDir, found: &mut Vec<Source>) -> Result<(), String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let syntax = syn::parse_file(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = match kind {
        ModuleDir::OfRoot => path.parent().map(Path::to_path_buf).unwrap_or_default(),
        ModuleDir::Named => path.with_extension(""),
    };
    let here = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut children = Vec::new();
    collect_children(&syntax.items, &dir, &here, &mut children);
    found.push(Source {
        path: path.to_path_buf(),
        text,
        syntax,
    });
    for (child, kind) in children {
        walk(&child, kind, found)?;
    }
    Ok(())
}

/// The files of the production modules declared in `items` (out-of-line `mod x;`, and
/// those inside inline modules), with where their own children live. `dir` is where
/// the children are; `here`, the folder of the declaring file, which a `#[path]`
/// attribute is relative to.
fn collect_children(items: &[Item], dir: &Path, here: &Path, out: &mut Vec<(PathBuf, ModuleDir)>) {
    for item in items {
        let Item::Mod(module) = item else { continue };
        if for_tests(&module.attrs) {
            continue;
        }
        match &module.content {
            Some((_, inner)) => {
                collect_children(inner, &dir.join(module.ident.to_string()), here, out)
            }
            None => {
                if let Some(file) = module_file(module, dir, here) {
                    out.push(file);
                }
            }
        }
    }
}

fn module_file(module: &ItemMod, dir: &Path, here: &Path) -> Option<(PathBuf, ModuleDir)> {
    if let Some(path) = path_attribute(&module.attrs) {
        let file = here.join(path);
        let kind = if file.file_name().is_some_and(|n| n == "mod.rs") {
            ModuleDir::OfRoot
        } else {
            ModuleDir::Named
        };
        return Some((file, kind));
    }
    let name = module.ident.to_string();
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return Some((flat, ModuleDir::Named));
    }
    let nested = dir.join(&name).join("mod.rs");
    nested.is_file().then_some((nested, ModuleDir::OfRoot))
}

fn path_attribute(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Whether attributes make an item test-only: `#[cfg(test)]`, or a `cfg` that names
/// `test` or the `testing` feature among its conditions (`cfg(any(test, feature =
/// "testing"))`). A `cfg(not(test))` is production code.
pub fn for_tests(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let Meta::List(list) = &attr.meta else {
            return false;
        };
        let tokens = list.tokens.to_string();
        !tokens.contains("not") && (has_word(&tokens, "test") || tokens.contains("\"testing\""))
    })
}

fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}
