//! Named shapes (an allot extension, issue 47): the deployment's flavours, each kept
//! as the request a scheduler would make for one instance of it.
//!
//! A shape is a name and a request: the query string of `GET
//! /allocation_candidates`, as the HTTP layer checked it when the shape was written
//! (the core knows no query strings, so it keeps the text and never reads it; the
//! server parses it again each time it counts, with the time of that count). The
//! view holds them (`Change::PutShape`), so that `GET /headroom?shape=NAME` and the
//! background counts behind `/metrics`' `allot_headroom` and `allot_stranded` read
//! them without a store.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::candidates::{CandidateQuery, SearchOptions};
use crate::change::Change;
use crate::error::{Error, Result};
use crate::model::{ProviderId, Timestamp};
use crate::names::ResourceClass;
use crate::state::State;

/// The most shapes a deployment keeps: each is counted in the background for
/// `/metrics`, so their number bounds that work. Clouds have tens of flavours,
/// the largest a few hundred.
pub const MAX_SHAPES: usize = 1000;

/// The longest request a shape keeps, in bytes: far above any flavour's (a few
/// hundred bytes), far below what would make counting it costly.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// A shape's name: 1 to 255 characters, none of them a control character or `/`
/// (it is a path segment, and a `/metrics` label), and not `.` or `..`: URL clients
/// resolve those (and `%2E%2E`) as dot segments before sending (RFC 3986, 5.2.4),
/// so no request could reach such a shape. Nova's flavour names fit: they are at
/// most 255 characters, and `/` is the one a URL could not carry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShapeName(Arc<str>);

impl ShapeName {
    /// The longest name, in characters (a MariaDB key column's `VARCHAR(255)`).
    pub const MAX_CHARS: usize = 255;

    /// Checks `name`'s form (see the type's doc).
    pub fn parse(name: &str) -> Option<Self> {
        let ok = !name.is_empty()
            && name != "."
            && name != ".."
            && name.chars().count() <= Self::MAX_CHARS
            && !name.chars().any(|c| c.is_control() || c == '/');
        ok.then(|| ShapeName(Arc::from(name)))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ShapeName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShapeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

// Written as the bare name; read back through `parse`, so that a damaged record is
// refused rather than trusted (as the other names are).
impl serde::Serialize for ShapeName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ShapeName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a well-formed shape name"))
        })
    }
}

/// A named shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    /// Its name.
    pub name: ShapeName,
    /// The query string of `GET /allocation_candidates` for one instance, as it was
    /// written (checked by the HTTP layer; without a leading `?`).
    pub request: String,
    /// When it was first written.
    pub created_at: Timestamp,
    /// When it was last written.
    pub updated_at: Timestamp,
}

/// The shapes of a view, by name; shared between versions until one changes them.
pub(crate) type Shapes = Arc<BTreeMap<ShapeName, Arc<Shape>>>;

impl State {
    /// The named shape, if there is one.
    pub fn shape(&self, name: &str) -> Option<&Shape> {
        self.shapes.get(name).map(|s| &**s)
    }

    /// Every named shape, by name.
    pub fn shapes(&self) -> impl ExactSizeIterator<Item = &Shape> {
        self.shapes.values().map(|s| &**s)
    }

    /// Writes shape `name` with `request` (already checked): a new one, or a new
    /// request for one that exists (its `created_at` kept). The bool says whether it
    /// is new; the shape is as written. Refused when it would be one more than [`MAX_SHAPES`], or the request
    /// is longer than [`MAX_REQUEST_BYTES`].
    pub fn plan_put_shape(
        &self,
        name: ShapeName,
        request: String,
        now: Timestamp,
    ) -> Result<(Shape, bool, Vec<Change>)> {
        if request.len() > MAX_REQUEST_BYTES {
            return Err(Error::invalid(format!(
                "A shape's request is at most {MAX_REQUEST_BYTES} bytes; this one is {}.",
                request.len()
            )));
        }
        let old = self.shape(name.as_str());
        if old.is_none() && self.shapes.len() >= MAX_SHAPES {
            return Err(Error::conflict(
                crate::ConflictCode::Other,
                format!(
                    "There are {MAX_SHAPES} shapes already, the most allot keeps: delete \
                     one first."
                ),
            ));
        }
        let shape = Shape {
            name,
            request,
            created_at: old.map_or(now, |s| s.created_at),
            updated_at: now,
        };
        let changes = vec![Change::PutShape(Box::new(shape.clone()))];
        Ok((shape, old.is_none(), changes))
    }

    /// Deletes shape `name`.
    pub fn plan_delete_shape(&self, name: &str) -> Result<Vec<Change>> {
        match self.shapes.get_key_value(name) {
            Some((key, _)) => Ok(vec![Change::DeleteShape(key.clone())]),
            None => Err(Error::not_found(format!("No shape named {name:?}."))),
        }
    }

    /// The work of `Change::PutShape`.
    pub(crate) fn upsert_shape(&mut self, shape: &Shape) {
        Arc::make_mut(&mut self.shapes).insert(shape.name.clone(), Arc::new(shape.clone()));
    }

    /// The work of `Change::DeleteShape`.
    pub(crate) fn remove_shape(&mut self, name: &ShapeName) {
        Arc::make_mut(&mut self.shapes).remove(name);
    }
}

/// Every shape counted on one version of the view: what `/metrics`' `allot_headroom`
/// and `allot_stranded` say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShapeCounts {
    /// How many more of each shape fit ([`State::headroom`]), by name.
    pub headroom: Vec<(ShapeName, u64)>,
    /// The shapes the core refused to count (a class or trait they name is gone
    /// since they were written), and why.
    pub refused: Vec<(ShapeName, Error)>,
    /// Free units, by class, on the roots where no shape fits at all now (see
    /// [`State::count_shapes`]); empty when no shape was counted.
    pub stranded: BTreeMap<ResourceClass, u64>,
    /// Whether some count was cut short by the search's step budget (its headroom
    /// is then a lower bound, and the roots it did not reach count as fitting).
    pub truncated: bool,
}

impl State {
    /// Counts `shapes` (each name with its request, parsed at `self`'s time): the
    /// headroom of each, and the units stranded: on each root where not one
    /// instance of any shape fits now, the free units (capacity less usage and live
    /// pending claims) of its tree's providers, by class. Sharing pools are left
    /// out (they are no root's alone: a pool serves every root of its aggregates),
    /// and so are drained roots (emptied on purpose, not stranded).
    pub fn count_shapes(
        &self,
        shapes: &[(ShapeName, CandidateQuery)],
        options: &SearchOptions,
    ) -> ShapeCounts {
        let mut out = ShapeCounts::default();
        let mut fit: Vec<ProviderId> = Vec::new();
        for (name, query) in shapes {
            match self.headroom_and_fits(query, options, &mut fit) {
                Ok(counted) => {
                    out.truncated |= counted.truncated;
                    out.headroom.push((name.clone(), counted.total));
                }
                Err(e) => out.refused.push((name.clone(), e)),
            }
        }
        if out.headroom.is_empty() {
            return out;
        }
        let fit: BTreeSet<ProviderId> = fit.into_iter().collect();
        let now = shapes.first().map_or(0, |(_, q)| q.now);
        for p in self.providers() {
            let root = p.row.root;
            if self.sharing.contains(&p.id())
                || self.sharing.contains(&root)
                || fit.contains(&root)
                || self.is_drained(root)
            {
                continue;
            }
            for (class, inv) in p.inventories.iter() {
                let free = inv.capacity() - i128::from(p.used(class.as_str(), now));
                let free = u64::try_from(free.max(0)).unwrap_or(u64::MAX);
                if free > 0 {
                    let sum = out.stranded.entry(class.clone()).or_default();
                    *sum = sum.saturating_add(free);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in [
            "m1.small",
            "GPU large (2x A100)",
            "ü",
            "...",
            &"x".repeat(255),
        ] {
            assert_eq!(ShapeName::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", ".", "..", "a/b", "tab\there", "nl\n", &"x".repeat(256)] {
            assert!(ShapeName::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn put_keeps_created_at_and_delete_names_what_is_missing() {
        let mut s = State::default();
        let name = ShapeName::parse("m1.small").unwrap();
        let (_, new, changes) = s
            .plan_put_shape(name.clone(), "resources=VCPU:1".into(), 10)
            .unwrap();
        assert!(new);
        s.apply(&changes);
        let (_, new, changes) = s
            .plan_put_shape(name.clone(), "resources=VCPU:2".into(), 20)
            .unwrap();
        assert!(!new);
        s.apply(&changes);
        let got = s.shape("m1.small").unwrap();
        assert_eq!((got.created_at, got.updated_at), (10, 20));
        assert_eq!(got.request, "resources=VCPU:2");
        assert_eq!(s.shapes().len(), 1);
        let e = s.plan_put_shape(name.clone(), "x".repeat(MAX_REQUEST_BYTES + 1), 30);
        assert!(matches!(e, Err(Error::Invalid(_))));
        s.apply(&s.plan_delete_shape("m1.small").unwrap());
        assert!(s.shape("m1.small").is_none());
        assert!(matches!(
            s.plan_delete_shape("m1.small"),
            Err(Error::NotFound(_))
        ));
    }

    #[test]
    fn the_count_is_capped() {
        let mut s = State::default();
        for i in 0..MAX_SHAPES {
            let name = ShapeName::parse(&format!("s{i}")).unwrap();
            s.apply(
                &s.plan_put_shape(name, "resources=VCPU:1".into(), 1)
                    .unwrap()
                    .2,
            );
        }
        let more = ShapeName::parse("one-more").unwrap();
        assert!(matches!(
            s.plan_put_shape(more, "resources=VCPU:1".into(), 2),
            Err(Error::Conflict { .. })
        ));
        // Rewriting one that exists is not one more.
        let again = ShapeName::parse("s0").unwrap();
        assert!(s
            .plan_put_shape(again, "resources=VCPU:2".into(), 2)
            .is_ok());
    }
}
