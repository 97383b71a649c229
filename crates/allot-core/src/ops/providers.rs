//! Resource providers themselves: create, update (rename, re-parent), delete.
//!
//! Providers form trees: a provider may have a parent, and every provider records the
//! root of its tree. Placement keeps that root denormalised on each row, so moving a
//! provider under another parent (1.37) rewrites the root of its whole subtree.

use uuid::Uuid;

use super::Plan;
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Provider, ProviderId, ProviderRow, Timestamp};
use crate::names::ProviderRef;
use crate::state::State;

/// A provider as clients see it: its row with the parent's and root's ids turned into
/// uuids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderInfo {
    /// The provider's uuid.
    pub uuid: Uuid,
    /// Its name.
    pub name: String,
    /// Its generation.
    pub generation: u64,
    /// Its parent's uuid, if it has one.
    pub parent_uuid: Option<Uuid>,
    /// The uuid of the root of its tree (its own when it has no parent).
    pub root_uuid: Uuid,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// What an update does to a provider's parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParentChange {
    /// The request says nothing of the parent: it stays as it is.
    Keep,
    /// The request gives no parent (`null`): the provider becomes a root.
    Clear,
    /// The request names a parent, which must exist.
    SetTo(ProviderRef),
}

/// The message Placement gives when an object cannot be written, inside the
/// handler's own "Unable to ..." wording.
fn action_failed(action: &str, reason: &str) -> String {
    format!("Object action {action} failed because: {reason}")
}

impl State {
    /// A provider's public view.
    pub fn provider_info(&self, provider: &Provider) -> ProviderInfo {
        self.row_info(&provider.row)
    }

    fn row_info(&self, row: &ProviderRow) -> ProviderInfo {
        ProviderInfo {
            uuid: row.uuid,
            name: row.name.clone(),
            generation: row.generation,
            parent_uuid: row.parent.map(|p| self.uuid_of(p)),
            root_uuid: if row.root == row.id {
                row.uuid
            } else {
                self.uuid_of(row.root)
            },
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }

    /// The provider a request names, if it names one (only a uuid spelled as
    /// [`crate::names::canonical_uuid`] accepts can).
    pub fn provider_by_ref(&self, provider: &ProviderRef) -> Option<&Provider> {
        provider.uuid().and_then(|u| self.provider_by_uuid(&u))
    }

    /// The provider and all its descendants, the provider first.
    pub fn subtree(&self, id: ProviderId) -> Vec<ProviderId> {
        let mut out = vec![id];
        let mut next = 0;
        while next < out.len() {
            if let Some(p) = self.providers.get(&out[next]) {
                out.extend(p.children.iter().copied());
            }
            next += 1;
        }
        out
    }

    /// Creates a provider, as a root or (given `parent`, as the request names it) under
    /// an existing provider. The caller picks the uuid (a random one when the client
    /// gave none).
    pub fn create_provider(
        &self,
        uuid: Uuid,
        name: &str,
        parent: Option<ProviderRef>,
        now: Timestamp,
    ) -> Plan<ProviderInfo> {
        let refuse = |reason: &str| {
            Error::invalid(format!(
                "Unable to create resource provider \"{name}\", {uuid}: {}",
                action_failed("create", reason)
            ))
        };
        if name.is_empty() {
            return Err(refuse("name is required"));
        }
        let id = self.next_provider_id();
        let (parent, root) = match parent {
            None => (None, id),
            Some(ProviderRef::Uuid(p)) if p == uuid => {
                return Err(refuse(
                    "parent provider UUID cannot be same as UUID. Please set parent provider \
                     UUID to None if there is no parent.",
                ))
            }
            Some(p) => match self.provider_by_ref(&p) {
                Some(parent) => (Some(parent.id()), parent.row.root),
                None => return Err(refuse("parent provider UUID does not exist.")),
            },
        };
        // The uuid is checked first, as the database's first unique constraint is.
        let duplicate = if self.provider_by_uuid(&uuid).is_some() {
            Some(format!("uuid: {uuid}"))
        } else if self.provider_by_name(name).is_some() {
            Some(format!("name: {name}"))
        } else {
            None
        };
        if let Some(what) = duplicate {
            return Err(Error::conflict(
                ConflictCode::Duplicate,
                format!("Conflicting resource provider {what} already exists."),
            ));
        }
        let row = ProviderRow {
            id,
            uuid,
            name: name.to_owned(),
            generation: 0,
            parent,
            root,
            created_at: now,
            updated_at: now,
        };
        let info = self.row_info(&row);
        Ok((
            info,
            vec![Change::PutProvider {
                row,
                previous_generation: None,
            }],
        ))
    }

    /// Renames a provider and, optionally, changes its parent.
    ///
    /// `parent` says whether the parent stays, goes (the provider becomes a root) or
    /// becomes the provider named (see [`ParentChange`]). Without `allow_reparenting`
    /// (before 1.37) a parent can only be given to a root provider (or the same parent
    /// given again); with it a provider may move to any provider outside its own
    /// subtree, or become a root. A move rewrites the root of every provider in the
    /// moved subtree. The generation does not change.
    ///
    /// Returns the provider as it is after the update, and its `updated_at` as it was
    /// before (what Placement reports as the response's last modification).
    pub fn update_provider(
        &self,
        uuid: &Uuid,
        name: &str,
        parent: ParentChange,
        allow_reparenting: bool,
        now: Timestamp,
    ) -> Plan<(ProviderInfo, Timestamp)> {
        let me = self.provider_required(uuid)?;
        let moved = self.tree_move(me, parent, allow_reparenting)?;
        if name != me.row.name && self.provider_by_name(name).is_some() {
            return Err(Error::conflict(
                ConflictCode::Duplicate,
                format!("Conflicting resource provider {name} already exists."),
            ));
        }

        let mut changes = Vec::new();
        let mut row = me.row.clone();
        row.name = name.to_owned();
        if let Some((new_parent, new_root)) = moved {
            row.parent = new_parent;
            row.root = new_root;
        }
        if row != me.row {
            row.updated_at = now;
            changes.push(Change::PutProvider {
                row: row.clone(),
                previous_generation: Some(me.row.generation),
            });
        }
        if let Some((_, new_root)) = moved {
            self.reroot_descendants(me, new_root, now, &mut changes);
        }
        let info = self.row_info(&row);
        Ok(((info, me.row.updated_at), changes))
    }

    /// The new (parent, root) of `me` if an update with `parent` changes the shape of
    /// its tree, None if not, or why the change is refused, in Placement's order and
    /// wording.
    fn tree_move(
        &self,
        me: &Provider,
        parent: ParentChange,
        allow_reparenting: bool,
    ) -> crate::Result<Option<(Option<ProviderId>, ProviderId)>> {
        let refuse = |action: &str, reason: &str| {
            Error::invalid(format!(
                "Unable to save resource provider {}: {}",
                me.uuid(),
                action_failed(action, reason)
            ))
        };
        let wanted_parent = match parent {
            ParentChange::Keep => me.row.parent.map(|p| ProviderRef::Uuid(self.uuid_of(p))),
            ParentChange::Clear => None,
            ParentChange::SetTo(p) => Some(p),
        };
        match wanted_parent {
            Some(p) => {
                let Some(new_parent) = self.provider_by_ref(&p) else {
                    // Placement words this one as a failed "create", even here.
                    return Err(refuse("create", "parent provider UUID does not exist."));
                };
                if me.row.parent.is_some_and(|old| old != new_parent.id()) && !allow_reparenting {
                    return Err(refuse(
                        "update",
                        "re-parenting a provider is not currently allowed.",
                    ));
                }
                if self.subtree(me.id()).contains(&new_parent.id()) {
                    return Err(refuse(
                        "update",
                        "creating loop in the provider tree is not allowed.",
                    ));
                }
                Ok(Some((Some(new_parent.id()), new_parent.row.root)))
            }
            None if me.row.parent.is_some() => {
                if !allow_reparenting {
                    return Err(refuse(
                        "update",
                        "un-parenting a provider is not currently allowed.",
                    ));
                }
                Ok(Some((None, me.id())))
            }
            None => Ok(None),
        }
    }

    /// The changes that give every descendant of `me` the root `new_root` (those that
    /// do not have it already), after a move of `me`.
    fn reroot_descendants(
        &self,
        me: &Provider,
        new_root: ProviderId,
        now: Timestamp,
        changes: &mut Vec<Change>,
    ) {
        for id in self.subtree(me.id()).into_iter().skip(1) {
            let Some(descendant) = self.provider(id) else {
                continue;
            };
            if descendant.row.root != new_root {
                let mut r = descendant.row.clone();
                r.root = new_root;
                r.updated_at = now;
                changes.push(Change::PutProvider {
                    row: r,
                    previous_generation: Some(descendant.row.generation),
                });
            }
        }
    }

    /// Deletes a provider with everything attached to it (inventories, traits,
    /// aggregate memberships). A provider with children, allocations or pending
    /// claims live at `now` cannot be deleted.
    pub fn delete_provider(&self, uuid: &Uuid, now: Timestamp) -> Plan<()> {
        let Some(provider) = self.provider_by_uuid(uuid) else {
            return Err(Error::not_found(format!(
                "No resource provider with uuid {uuid} found for delete"
            )));
        };
        if !provider.children.is_empty() {
            return Err(Error::conflict(
                ConflictCode::CannotDeleteParent,
                format!(
                    "Unable to delete parent resource provider {uuid}: It has child resource \
                     providers."
                ),
            ));
        }
        if self.provider_has_allocations(provider) {
            return Err(Error::conflict(
                ConflictCode::ProviderInUse,
                format!(
                    "Unable to delete resource provider {uuid}: Resource provider has allocations."
                ),
            ));
        }
        if provider.has_pending(now) {
            return Err(Error::conflict(
                ConflictCode::ProviderInUse,
                format!(
                    "Unable to delete resource provider {uuid}: Resource provider has pending \
                     claims."
                ),
            ));
        }
        // Claims on it that expired unswept are recorded as such first: no pending
        // record outlives its provider.
        let mut changes = self.expire_claims_on(provider, now);
        changes.push(Change::DeleteProvider(provider.id()));
        Ok(((), changes))
    }

    /// Whether any consumer holds an allocation against the provider.
    fn provider_has_allocations(&self, provider: &Provider) -> bool {
        self.provider_usage_index(provider.id()).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Uuid = Uuid::from_u128(0xa0);
    const B: Uuid = Uuid::from_u128(0xb0);
    const C: Uuid = Uuid::from_u128(0xc0);
    const D: Uuid = Uuid::from_u128(0xd0);

    fn s(u: Uuid) -> String {
        u.to_string()
    }

    fn create(state: &mut State, uuid: Uuid, name: &str, parent: Option<Uuid>, now: Timestamp) {
        let parent = parent.map(ProviderRef::Uuid);
        let (_, changes) = state
            .create_provider(uuid, name, parent, now)
            .expect("create");
        state.apply(&changes);
    }

    fn info(state: &State, uuid: Uuid) -> ProviderInfo {
        state.provider_info(state.provider_by_uuid(&uuid).expect("exists"))
    }

    /// a ─ b ─ c, and d on its own.
    fn forest() -> State {
        let mut st = State::new();
        create(&mut st, A, "a", None, 1);
        create(&mut st, B, "b", Some(A), 2);
        create(&mut st, C, "c", Some(B), 3);
        create(&mut st, D, "d", None, 4);
        st
    }

    fn message(e: Error) -> String {
        e.to_string()
    }

    #[test]
    fn create_sets_parent_and_root() {
        let st = forest();
        let c = info(&st, C);
        assert_eq!((c.parent_uuid, c.root_uuid, c.generation), (Some(B), A, 0));
        let a = info(&st, A);
        assert_eq!((a.parent_uuid, a.root_uuid), (None, A));
        assert_eq!((c.created_at, c.updated_at), (3, 3));
    }

    #[test]
    fn create_refusals() {
        let st = forest();
        let e = Uuid::from_u128(0xe0);
        let cases: Vec<(Uuid, &str, Option<String>, &str)> = vec![
            (
                e,
                "",
                None,
                "Object action create failed because: name is required",
            ),
            (
                e,
                "x",
                Some(s(e)),
                "parent provider UUID cannot be same as UUID",
            ),
            (
                e,
                "x",
                Some(s(Uuid::from_u128(9))),
                "parent provider UUID does not exist.",
            ),
            // Another spelling of an existing uuid names nothing.
            (
                e,
                "x",
                Some(A.simple().to_string()),
                "parent provider UUID does not exist.",
            ),
            (A, "zzz", None, "Conflicting resource provider uuid: "),
            (
                e,
                "b",
                None,
                "Conflicting resource provider name: b already exists.",
            ),
            (A, "b", None, "Conflicting resource provider uuid: "),
        ];
        for (uuid, name, parent, expected) in cases {
            let err = st
                .create_provider(uuid, name, parent.as_deref().map(ProviderRef::parse), 9)
                .unwrap_err();
            let text = message(err.clone());
            assert!(text.contains(expected), "{name:?}: {text}");
            if expected.starts_with("Conflicting") {
                assert!(matches!(
                    err,
                    Error::Conflict {
                        code: ConflictCode::Duplicate,
                        ..
                    }
                ));
            } else {
                assert!(matches!(err, Error::Invalid(_)));
                assert!(text.starts_with(&format!(
                    "Unable to create resource provider \"{name}\", {uuid}: "
                )));
            }
        }
    }

    #[test]
    fn rename_keeps_generation_and_bumps_updated_at_only_on_change() {
        let mut st = forest();
        let ((after, before), changes) = st
            .update_provider(&B, "b2", ParentChange::Keep, false, 10)
            .unwrap();
        assert_eq!(
            (
                after.name.as_str(),
                after.generation,
                after.updated_at,
                before
            ),
            ("b2", 0, 10, 2)
        );
        assert_eq!((after.parent_uuid, after.root_uuid), (Some(A), A));
        st.apply(&changes);
        assert!(st.provider_by_name("b").is_none());
        assert_eq!(st.provider_by_name("b2").unwrap().uuid(), B);
        let (_, none) = st
            .update_provider(&B, "b2", ParentChange::Keep, false, 11)
            .unwrap();
        assert!(none.is_empty());
        let dup = st
            .update_provider(&B, "d", ParentChange::Keep, true, 12)
            .unwrap_err();
        assert_eq!(
            dup,
            Error::conflict(
                ConflictCode::Duplicate,
                "Conflicting resource provider d already exists."
            )
        );
        let missing = st
            .update_provider(&Uuid::from_u128(5), "x", ParentChange::Keep, true, 12)
            .unwrap_err();
        assert!(matches!(missing, Error::NotFound(_)));
    }

    #[test]
    fn reparenting_rules_by_microversion() {
        let st = forest();
        let (a, b, c, d, nowhere) = (s(A), s(B), s(C), s(D), s(Uuid::from_u128(7)));
        // (provider, new parent, allow_reparenting, error wanted)
        let cases: Vec<(Uuid, Option<&str>, bool, Option<&str>)> = vec![
            // A root may get a parent at any version.
            (D, Some(&a), false, None),
            // The same parent again is no change.
            (B, Some(&a), false, None),
            (B, Some(&d), false, Some("Object action update failed because: re-parenting a provider is not currently allowed.")),
            (B, None, false, Some("Object action update failed because: un-parenting a provider is not currently allowed.")),
            (B, Some(&d), true, None),
            (B, None, true, None),
            // Loops, at every version.
            (A, Some(&a), true, Some("creating loop in the provider tree is not allowed.")),
            (A, Some(&b), true, Some("creating loop in the provider tree is not allowed.")),
            (A, Some(&c), false, Some("creating loop in the provider tree is not allowed.")),
            (D, Some(&nowhere), true, Some("Object action create failed because: parent provider UUID does not exist.")),
        ];
        for (who, parent, allow, wanted) in cases {
            let name = st.provider_by_uuid(&who).unwrap().row.name.clone();
            let change = match parent {
                Some(p) => ParentChange::SetTo(ProviderRef::parse(p)),
                None => ParentChange::Clear,
            };
            let got = st.update_provider(&who, &name, change, allow, 20);
            match (got, wanted) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => {
                    let text = message(e);
                    assert!(
                        text.starts_with(&format!("Unable to save resource provider {who}: ")),
                        "{text}"
                    );
                    assert!(text.contains(w), "{text}");
                }
                (got, wanted) => {
                    panic!("{who} -> {parent:?} allow={allow}: {got:?}, wanted {wanted:?}")
                }
            }
        }
    }

    #[test]
    fn moving_a_subtree_rewrites_roots() {
        let mut st = forest();
        // b (with c below it) moves under d.
        let ((b, _), changes) = st
            .update_provider(&B, "b", ParentChange::SetTo(D.into()), true, 30)
            .unwrap();
        assert_eq!((b.parent_uuid, b.root_uuid), (Some(D), D));
        st.apply(&changes);
        assert_eq!(info(&st, C).root_uuid, D);
        assert_eq!(info(&st, C).updated_at, 30);
        assert_eq!(info(&st, A).updated_at, 1);
        assert!(st.provider_by_uuid(&A).unwrap().children.is_empty());
        // b becomes a root: c follows.
        let ((b, _), changes) = st
            .update_provider(&B, "b", ParentChange::Clear, true, 31)
            .unwrap();
        assert_eq!((b.parent_uuid, b.root_uuid), (None, B));
        st.apply(&changes);
        assert_eq!(info(&st, C).root_uuid, B);
        assert_eq!(info(&st, C).parent_uuid, Some(B));
        // A root getting a parent before 1.37 moves its subtree too.
        let (_, changes) = st
            .update_provider(&B, "b", ParentChange::SetTo(A.into()), false, 32)
            .unwrap();
        st.apply(&changes);
        assert_eq!(info(&st, C).root_uuid, A);
        assert_eq!(st.subtree(st.provider_by_uuid(&A).unwrap().id()).len(), 3);
    }

    #[test]
    fn delete_refuses_parents() {
        let mut st = forest();
        let e = st.delete_provider(&B, 0).unwrap_err();
        assert_eq!(
            e,
            Error::conflict(
                ConflictCode::CannotDeleteParent,
                format!("Unable to delete parent resource provider {B}: It has child resource providers.")
            )
        );
        let (_, changes) = st.delete_provider(&C, 0).unwrap();
        st.apply(&changes);
        assert!(st.provider_by_uuid(&C).is_none());
        assert!(st.provider_by_uuid(&B).unwrap().children.is_empty());
        let (_, changes) = st.delete_provider(&B, 0).unwrap();
        st.apply(&changes);
        let gone = st.delete_provider(&B, 0).unwrap_err();
        assert_eq!(
            gone,
            Error::not_found(format!(
                "No resource provider with uuid {B} found for delete"
            ))
        );
        // Names are free again once deleted.
        assert!(st
            .create_provider(Uuid::from_u128(0xf0), "b", None, 40)
            .is_ok());
    }
}
