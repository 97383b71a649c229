//! Custom resource classes: create, rename (the 1.2–1.6 PUT), ensure (the 1.7 PUT),
//! delete; and every class's metadata (an allot extension, see [`crate::metadata`]).

use super::Plan;
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::metadata::{self, ClassMetadata};
use crate::model::{ClassRecord, Timestamp};
use crate::names::{is_custom_name, ResourceClass};
use crate::state::State;

/// Whether [`State::ensure_class`] created the class or found it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    /// The class was created.
    Created,
    /// The class already existed.
    Existed,
}

/// Parses the name of a custom class to create: `CUSTOM_` and Placement's alphabet, or
/// Placement's 400. Callers parse request text with this before calling
/// [`State::create_class`], [`State::ensure_class`] or [`State::rename_class`].
pub fn parse_custom_class(name: &str) -> crate::Result<ResourceClass> {
    if is_custom_name(name) {
        // Trusted: a custom name is a well-formed one, checked just now.
        Ok(ResourceClass::new_unchecked(name))
    } else {
        Err(Error::invalid(format!(
            "'{name}' does not match '^CUSTOM\\_[A-Z0-9_]+$'"
        )))
    }
}

/// Refuses a well-formed but standard name where only a custom one may be created.
fn only_custom(name: ResourceClass) -> crate::Result<ResourceClass> {
    if name.is_custom() {
        Ok(name)
    } else {
        parse_custom_class(name.as_str())
    }
}

impl State {
    /// Creates a custom resource class; a class of that name must not exist.
    pub fn create_class(&self, name: ResourceClass, now: Timestamp) -> Plan<()> {
        let name = only_custom(name)?;
        if self.class_exists(&name) {
            // Placement gives a taken class name no code of its own (unlike a taken
            // provider name), and clients branch on codes.
            return Err(Error::conflict(
                ConflictCode::Other,
                format!("Conflicting resource class already exists: {name}"),
            ));
        }
        let record = ClassRecord {
            name,
            created_at: now,
            updated_at: now,
        };
        Ok((
            (),
            vec![Change::PutClass {
                record,
                old_name: None,
            }],
        ))
    }

    /// Creates a custom resource class unless it exists (the 1.7 PUT).
    pub fn ensure_class(&self, name: ResourceClass, now: Timestamp) -> Plan<Ensured> {
        let class = only_custom(name)?;
        if self.class_exists(&class) {
            return Ok((Ensured::Existed, vec![]));
        }
        let record = ClassRecord {
            name: class,
            created_at: now,
            updated_at: now,
        };
        Ok((
            Ensured::Created,
            vec![Change::PutClass {
                record,
                old_name: None,
            }],
        ))
    }

    /// Renames a custom resource class (the 1.2–1.6 PUT). Returns the new name.
    pub fn rename_class(
        &self,
        old: &ResourceClass,
        new: ResourceClass,
        now: Timestamp,
    ) -> Plan<ResourceClass> {
        let new_name = only_custom(new)?;
        if !self.class_exists(old) {
            return Err(Error::not_found(format!("No such resource class {old}.")));
        }
        let Some(existing) = self.custom_class(old) else {
            return Err(Error::invalid(format!(
                "Cannot update standard resource class {old}"
            )));
        };
        if self.class_exists(&new_name) {
            return Err(Error::conflict(
                ConflictCode::Other,
                format!("Resource class already exists: {new_name}"),
            ));
        }
        let record = ClassRecord {
            name: new_name.clone(),
            created_at: existing.created_at,
            updated_at: now,
        };
        let old_name = Some(existing.name.clone());
        Ok((new_name, vec![Change::PutClass { record, old_name }]))
    }

    /// Deletes a custom resource class that no inventory uses.
    pub fn delete_class(&self, name: &ResourceClass) -> Plan<()> {
        if !self.class_exists(name) {
            return Err(Error::not_found(format!("No such resource class {name}.")));
        }
        let Some(existing) = self.custom_class(name) else {
            return Err(Error::invalid(format!(
                "Error in delete resource class: Cannot delete standard resource class {name}."
            )));
        };
        if self.providers().any(|p| p.inventories.contains_key(name)) {
            return Err(Error::conflict(
                ConflictCode::Other,
                format!(
                    "Error in delete resource class: Cannot delete resource class {name}. \
                     Class is in use in inventory."
                ),
            ));
        }
        Ok(((), vec![Change::DeleteClass(existing.name.clone())]))
    }

    /// A class's metadata: the compiled-in one of a standard class, what was set on a
    /// custom class (all fields unset if nothing was), or `None` if no such class.
    pub fn class_metadata(&self, name: &ResourceClass) -> Option<ClassMetadata> {
        if let Some(standard) = metadata::standard(name.as_str()) {
            return Some(standard);
        }
        self.custom_class(name)?;
        Some(self.class_metadata.get(name).cloned().unwrap_or_default())
    }

    /// Replaces a custom class's metadata (fields left unset are cleared). A standard
    /// class's metadata is fixed, like the class: refused as Placement refuses to
    /// update a standard class. Setting what is already there changes nothing.
    pub fn set_class_metadata(
        &self,
        name: &ResourceClass,
        metadata: ClassMetadata,
    ) -> Plan<ClassMetadata> {
        if !self.class_exists(name) {
            return Err(Error::not_found(format!("No such resource class {name}.")));
        }
        let Some(existing) = self.custom_class(name) else {
            return Err(Error::invalid(format!(
                "Cannot update the metadata of standard resource class {name}."
            )));
        };
        let current = self.class_metadata.get(name);
        let unchanged = match current {
            Some(m) => *m == metadata,
            None => metadata.is_empty(),
        };
        if unchanged {
            return Ok((metadata, vec![]));
        }
        let stored = (!metadata.is_empty()).then(|| metadata.clone());
        Ok((
            metadata,
            vec![Change::SetClassMetadata(existing.name.clone(), stored)],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::rc;

    fn applied<T>(state: &mut State, plan: impl FnOnce(&State) -> Plan<T>) {
        let (_, changes) = plan(state).expect("plan");
        state.apply(&changes);
    }

    #[test]
    fn create_rename_delete() {
        let mut s = State::new();
        applied(&mut s, |s| s.create_class(rc("CUSTOM_A"), 10));
        assert!(s.class_exists(&rc("CUSTOM_A")));
        let dup = s.create_class(rc("CUSTOM_A"), 11).unwrap_err();
        assert!(matches!(
            dup,
            Error::Conflict {
                code: ConflictCode::Other,
                ..
            }
        ));
        applied(&mut s, |s| {
            s.rename_class(&rc("CUSTOM_A"), rc("CUSTOM_B"), 12)
        });
        assert!(!s.class_exists(&rc("CUSTOM_A")));
        assert_eq!(s.custom_class(&rc("CUSTOM_B")).unwrap().created_at, 10);
        assert_eq!(s.custom_class(&rc("CUSTOM_B")).unwrap().updated_at, 12);
        applied(&mut s, |s| s.delete_class(&rc("CUSTOM_B")));
        assert!(!s.class_exists(&rc("CUSTOM_B")));
    }

    #[test]
    fn standard_classes_are_fixed() {
        let s = State::new();
        assert!(matches!(
            s.delete_class(&rc("VCPU")),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            s.rename_class(&rc("VCPU"), rc("CUSTOM_X"), 1),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            s.create_class(rc("VCPU"), 1),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            s.delete_class(&rc("CUSTOM_NONE")),
            Err(Error::NotFound(_))
        ));
    }

    fn meta(units: &str) -> ClassMetadata {
        ClassMetadata {
            units: Some(units.into()),
            display_name: Some("Widgets".into()),
            description: None,
        }
    }

    #[test]
    fn metadata_follows_the_class() {
        let mut s = State::new();
        applied(&mut s, |s| s.create_class(rc("CUSTOM_A"), 1));
        // None until set.
        assert_eq!(
            s.class_metadata(&rc("CUSTOM_A")),
            Some(ClassMetadata::default())
        );
        applied(&mut s, |s| {
            s.set_class_metadata(&rc("CUSTOM_A"), meta("count"))
        });
        assert_eq!(s.class_metadata(&rc("CUSTOM_A")), Some(meta("count")));
        // The same again changes nothing.
        let (_, changes) = s
            .set_class_metadata(&rc("CUSTOM_A"), meta("count"))
            .unwrap();
        assert!(changes.is_empty());
        // A rename keeps it.
        applied(&mut s, |s| {
            s.rename_class(&rc("CUSTOM_A"), rc("CUSTOM_B"), 2)
        });
        assert_eq!(s.class_metadata(&rc("CUSTOM_B")), Some(meta("count")));
        assert_eq!(s.class_metadata(&rc("CUSTOM_A")), None);
        // A delete removes it: a class made again under the name starts bare.
        applied(&mut s, |s| s.delete_class(&rc("CUSTOM_B")));
        applied(&mut s, |s| s.create_class(rc("CUSTOM_B"), 3));
        assert_eq!(
            s.class_metadata(&rc("CUSTOM_B")),
            Some(ClassMetadata::default())
        );
        // Clearing stores nothing.
        applied(&mut s, |s| {
            s.set_class_metadata(&rc("CUSTOM_B"), meta("GiB"))
        });
        let (_, changes) = s
            .set_class_metadata(&rc("CUSTOM_B"), ClassMetadata::default())
            .unwrap();
        assert_eq!(
            changes,
            vec![Change::SetClassMetadata(rc("CUSTOM_B"), None)]
        );
    }

    #[test]
    fn standard_metadata_is_fixed_and_unknown_classes_have_none() {
        let s = State::new();
        assert_eq!(
            s.class_metadata(&rc("MEMORY_MB")).unwrap().units.as_deref(),
            Some("MiB")
        );
        assert!(matches!(
            s.set_class_metadata(&rc("VCPU"), meta("count")),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            s.set_class_metadata(&rc("CUSTOM_NONE"), meta("count")),
            Err(Error::NotFound(_))
        ));
        assert_eq!(s.class_metadata(&rc("CUSTOM_NONE")), None);
    }

    #[test]
    fn ensure_is_idempotent() {
        let mut s = State::new();
        let (first, changes) = s.ensure_class(rc("CUSTOM_X"), 1).unwrap();
        s.apply(&changes);
        let (second, changes2) = s.ensure_class(rc("CUSTOM_X"), 2).unwrap();
        assert_eq!((first, second), (Ensured::Created, Ensured::Existed));
        assert!(changes2.is_empty());
    }
}
