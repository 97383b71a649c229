//! Custom traits: ensure (PUT) and delete.

use super::Plan;
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Timestamp, TraitRecord};
use crate::names::{is_custom_name, TraitName};
use crate::state::State;

pub use super::classes::Ensured;

/// Parses the name of a custom trait to create, or Placement's 400. Callers parse
/// request text with this before calling [`State::ensure_trait`].
pub fn parse_custom_trait(name: &str) -> crate::Result<TraitName> {
    if is_custom_name(name) {
        // Trusted: a custom name is a well-formed one, checked just now.
        Ok(TraitName::new_unchecked(name))
    } else {
        Err(Error::invalid(
            "The trait is invalid. A valid trait must be no longer than 255 characters, \
             start with the prefix \"CUSTOM_\" and use following characters: \"A\"-\"Z\", \
             \"0\"-\"9\" and \"_\"",
        ))
    }
}

impl State {
    /// Creates a custom trait unless it exists.
    pub fn ensure_trait(&self, name: TraitName, now: Timestamp) -> Plan<Ensured> {
        // Well formed is not enough: a standard name is refused as Placement does.
        let name = if name.is_custom() {
            name
        } else {
            parse_custom_trait(name.as_str())?
        };
        if self.trait_exists(&name) {
            return Ok((Ensured::Existed, vec![]));
        }
        let record = TraitRecord {
            name,
            created_at: now,
        };
        Ok((Ensured::Created, vec![Change::PutTrait(record)]))
    }

    /// Deletes a custom trait that no provider has.
    pub fn delete_trait(&self, name: &TraitName) -> Plan<()> {
        if !self.trait_exists(name) {
            return Err(Error::not_found(format!("No such trait(s): {name}.")));
        }
        let Some(record) = self.custom_trait(name) else {
            return Err(Error::invalid(format!(
                "Cannot delete standard trait {name}."
            )));
        };
        if self.providers().any(|p| p.traits.contains(name)) {
            return Err(Error::conflict(
                ConflictCode::Other,
                format!("The trait {name} is in use by a resource provider."),
            ));
        }
        Ok(((), vec![Change::DeleteTrait(record.name.clone())]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::tn;

    #[test]
    fn ensure_and_delete() {
        let mut s = State::new();
        assert!(matches!(
            s.ensure_trait(tn("HW_CPU_X86_AVX2"), 1),
            Err(Error::Invalid(_))
        ));
        let (e, c) = s.ensure_trait(tn("CUSTOM_T"), 1).unwrap();
        assert_eq!(e, Ensured::Created);
        s.apply(&c);
        assert!(s.trait_exists(&tn("CUSTOM_T")));
        assert_eq!(
            s.ensure_trait(tn("CUSTOM_T"), 2).unwrap().0,
            Ensured::Existed
        );
        let (_, c) = s.delete_trait(&tn("CUSTOM_T")).unwrap();
        s.apply(&c);
        assert!(!s.trait_exists(&tn("CUSTOM_T")));
        assert!(matches!(
            s.delete_trait(&tn("HW_CPU_X86_AVX2")),
            Err(Error::Invalid(_))
        ));
    }
}
