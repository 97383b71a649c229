//! The view's interner: one copy of each name and text that many records carry.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::model::{Claim, ConsumerRow};
use crate::names::{ResourceClass, Text, TraitName};

/// The view's one copy of each name and text that many records carry: the resource
/// classes of inventories and allocations, the traits of providers, and the projects,
/// users and types of consumers. A change arrives with its own copies (parsed from a
/// request or read from the store); `apply` swaps them for these, so that a million
/// allocations of `VCPU` share one string instead of holding a million.
///
/// Texts no record holds any more are forgotten by a sweep when the set has doubled
/// since the last one: a release at the moment a record lets go could not tell whether
/// an older version of the view, still read, holds the text too.
#[derive(Debug, Default)]
pub(super) struct Interned {
    classes: HashSet<ResourceClass>,
    traits: HashSet<TraitName>,
    texts: HashSet<Text>,
    /// How many texts the last sweep kept.
    swept: usize,
    /// Classes, traits and texts of the sets handed out lately (see [`Recent`]).
    recent_classes: Recent,
    recent_traits: Recent,
    recent_texts: Recent,
}

/// The addresses of a few values of an interner's set handed out lately. A caller
/// passing one of these very allocations again (a store loading millions of rows
/// that share a handful of names passes the view's own copies back) is answered
/// without hashing the text. Sound because a value in the set is alive, so no other
/// allocation can have its address; a sweep, which may free some, forgets them all.
#[derive(Debug, Default)]
struct Recent {
    addresses: [usize; 8],
    next: usize,
}

impl Recent {
    fn address(text: &str) -> usize {
        text.as_ptr() as usize
    }

    fn holds(&self, text: &str) -> bool {
        let a = Self::address(text);
        self.addresses.contains(&a)
    }

    fn note(&mut self, text: &str) {
        self.addresses[self.next] = Self::address(text);
        self.next = (self.next + 1) % self.addresses.len();
    }
}

/// The set's copy of `name` (adding `name` if it has none), answered without hashing
/// when `name` is one of the copies handed out lately.
fn intern<T>(set: &mut HashSet<T>, recent: &mut Recent, name: &T) -> T
where
    T: Clone + Eq + std::hash::Hash + std::borrow::Borrow<str>,
{
    if recent.holds(name.borrow()) {
        return name.clone();
    }
    let held = match set.get(name.borrow()) {
        Some(held) => held.clone(),
        None => {
            set.insert(name.clone());
            name.clone()
        }
    };
    recent.note(held.borrow());
    held
}

impl Interned {
    pub(super) fn class(&mut self, name: &ResourceClass) -> ResourceClass {
        intern(&mut self.classes, &mut self.recent_classes, name)
    }

    pub(super) fn trait_name(&mut self, name: &TraitName) -> TraitName {
        intern(&mut self.traits, &mut self.recent_traits, name)
    }

    pub(super) fn text(&mut self, text: &Text) -> Text {
        if self.recent_texts.holds(text) {
            return text.clone();
        }
        if let Some(held) = self.texts.get(text) {
            let held = held.clone();
            self.recent_texts.note(&held);
            return held;
        }
        self.texts.insert(text.clone());
        if self.texts.len() > 2 * self.swept.max(1024) {
            // Only the set's own copy left: no record in any version holds it. (The
            // caller still holds the text just added, so it stays.) Classes and
            // traits are never forgotten: they are few, and records of their own.
            // (A static text, the empty one, has no count and is kept.)
            self.texts
                .retain(|t| Text::strong_count(t).is_none_or(|n| n > 1));
            self.swept = self.texts.len();
            self.recent_texts = Recent::default();
        }
        self.recent_texts.note(text);
        text.clone()
    }

    pub(super) fn claim(&mut self, claim: &Claim) -> Claim {
        Claim {
            project_id: self.text(&claim.project_id),
            user_id: self.text(&claim.user_id),
            consumer_type: claim.consumer_type.as_ref().map(|t| self.text(t)),
            tag: claim.tag.as_ref().map(|t| self.text(t)),
            allocations: claim
                .allocations
                .iter()
                .map(|a| crate::model::ClaimAmount {
                    class: self.class(&a.class),
                    ..a.clone()
                })
                .collect(),
            ..claim.clone()
        }
    }

    pub(super) fn consumer_row(&mut self, row: &ConsumerRow) -> ConsumerRow {
        ConsumerRow {
            project_id: self.text(&row.project_id),
            user_id: self.text(&row.user_id),
            consumer_type: row.consumer_type.as_ref().map(|t| self.text(t)),
            ..row.clone()
        }
    }
}

/// The interner, whoever held it last: a panic while it was held left it usable
/// (every entry is whole).
pub(super) fn lock(interned: &Mutex<Interned>) -> std::sync::MutexGuard<'_, Interned> {
    interned.lock().unwrap_or_else(|e| e.into_inner())
}
