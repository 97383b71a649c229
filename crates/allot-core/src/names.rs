//! Validated names: resource classes and traits, and providers as requests name them.
//!
//! A name that reaches the domain has been checked once, at the boundary; the rest of
//! the code passes these types around and never re-checks a raw string. A provider
//! named by a request ([`ProviderRef`]) is sorted the same way, once: a uuid spelled
//! the one way that can name a provider, or text that names none.
//!
//! Some endpoints let any text through their schema and answer a malformed name with
//! the same message, at the same point, as a well-formed one that does not exist. Their
//! requests carry a [`RequestedName`]: the boundary has sorted the text into "a name"
//! or "not a name", and the operation reports both kinds in Placement's order.

use std::borrow::Borrow;
use std::fmt;

use uuid::Uuid;

/// The longest resource class or trait name Placement accepts.
pub const MAX_NAME_LEN: usize = 255;

/// The prefix every operator-defined class and trait carries.
pub const CUSTOM_PREFIX: &str = "CUSTOM_";

/// Whether `name` has the form of a custom name: `CUSTOM_` then one or more of
/// `A-Z`, `0-9`, `_`, at most [`MAX_NAME_LEN`] characters in all.
pub fn is_custom_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN
        && name.len() > CUSTOM_PREFIX.len()
        && name.starts_with(CUSTOM_PREFIX)
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether `name` has the form of any resource class or trait name (standard names
/// use the same alphabet as custom ones).
pub fn is_well_formed_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// The standard trait that makes a provider's inventory usable by the trees it shares
/// an aggregate with. Here rather than in the generated [`crate::standard`] because the
/// state indexes sharing providers by it and the candidate search reads that index.
pub const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// Shared, immutable text: a clone is a reference count, not a copy. One thin pointer
/// (8 bytes, where `Arc<str>` takes 16 with its length): the view holds names and
/// consumers' texts in records by the million, so the width of the pointer counts.
pub type Text = arcstr::ArcStr;

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        ///
        /// Shared [`Text`]: a clone is a reference count, not a copy, so the view
        /// holds each name once however many records carry it (the state interns
        /// them).
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Text);

        impl $name {
            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Whether this is an operator-defined (`CUSTOM_*`) name.
            pub fn is_custom(&self) -> bool {
                self.0.starts_with(CUSTOM_PREFIX)
            }

            /// Wraps a name without checking it. Only for trusted names: ones checked
            /// before (read back from a store, found in the state, or just checked)
            /// and literals in tests. Every call site says why its name is trusted.
            pub fn new_unchecked(name: impl AsRef<str>) -> Self {
                $name(Text::from(name.as_ref()))
            }

            /// Checks that `name` is well formed (see [`is_well_formed_name`]).
            /// Whether such a class or trait exists is a question for the state.
            pub fn parse(name: &str) -> Option<Self> {
                is_well_formed_name(name).then(|| $name(Text::from(name)))
            }

            /// Sorts request text into a well-formed name or text that is not one
            /// (see [`RequestedName`]).
            pub fn requested(text: &str) -> RequestedName<Self> {
                match Self::parse(text) {
                    Some(name) => RequestedName::Name(name),
                    None => RequestedName::NotAName(text.to_owned()),
                }
            }
        }

        // Written as the bare name; read back through `parse`, so that a damaged
        // record (the store's change log) is refused rather than trusted.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!("{text:?} is not a well-formed name"))
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// The name of a resource class: a standard one (`VCPU`, `DISK_GB`, ...) or a
    /// custom one (`CUSTOM_*`).
    ResourceClass
);
name_type!(
    /// The name of a trait: a standard one (`HW_CPU_X86_AVX2`, ...) or a custom one
    /// (`CUSTOM_*`).
    TraitName
);

/// A name as a request gave it, sorted at the boundary: a well-formed name (which may
/// or may not exist) or text that cannot be one (and so names nothing). For the
/// endpoints that report both alike, after checks that come before any name's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestedName<N> {
    /// A well-formed name.
    Name(N),
    /// Text that is not a name, kept for the error message.
    NotAName(String),
}

impl<N: AsRef<str>> RequestedName<N> {
    /// The text as the request gave it.
    pub fn as_str(&self) -> &str {
        match self {
            RequestedName::Name(name) => name.as_ref(),
            RequestedName::NotAName(text) => text,
        }
    }

    /// The name, if the text is one.
    pub fn name(&self) -> Option<&N> {
        match self {
            RequestedName::Name(name) => Some(name),
            RequestedName::NotAName(_) => None,
        }
    }
}

impl<N: AsRef<str>> fmt::Display for RequestedName<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The uuid a string names, if it is written the one way Placement stores provider
/// uuids: lowercase hex with dashes. Placement compares the uuids of URLs, query
/// strings and parent references with the stored text, so any other spelling (no
/// dashes, capitals, braces) names no provider.
pub fn canonical_uuid(s: &str) -> Option<Uuid> {
    Uuid::try_parse(s)
        .ok()
        .filter(|u| u.hyphenated().to_string() == s)
}

/// A provider as a request names it. Placement looks providers up by the text of
/// their uuid, so only the canonical spelling (see [`canonical_uuid`]) can name one;
/// any other spelling names none, and is kept as given for the refusal to repeat.
/// Like [`RequestedName`], it is the boundary's sorting of request text: the core
/// never looks at the text again, only at the uuid when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProviderRef {
    /// A uuid in its canonical spelling.
    Uuid(Uuid),
    /// Any other text.
    Spelled(String),
}

impl ProviderRef {
    /// Reads the text a request gives for a provider.
    pub fn parse(text: &str) -> ProviderRef {
        match canonical_uuid(text) {
            Some(uuid) => ProviderRef::Uuid(uuid),
            None => ProviderRef::Spelled(text.to_owned()),
        }
    }

    /// The uuid, when the spelling can name a provider.
    pub fn uuid(&self) -> Option<Uuid> {
        match self {
            ProviderRef::Uuid(uuid) => Some(*uuid),
            ProviderRef::Spelled(_) => None,
        }
    }
}

impl From<Uuid> for ProviderRef {
    fn from(uuid: Uuid) -> Self {
        ProviderRef::Uuid(uuid)
    }
}

impl std::fmt::Display for ProviderRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderRef::Uuid(uuid) => uuid.fmt(f),
            ProviderRef::Spelled(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_names() {
        assert!(is_custom_name("CUSTOM_GOLD"));
        assert!(is_custom_name("CUSTOM_A_1"));
        assert!(!is_custom_name("CUSTOM_"));
        assert!(!is_custom_name("CUSTOM_gold"));
        assert!(!is_custom_name("VCPU"));
        assert!(!is_custom_name("CUSTOM_Ü"));
        let long = format!("CUSTOM_{}", "A".repeat(MAX_NAME_LEN - 7));
        assert!(is_custom_name(&long));
        assert!(!is_custom_name(&format!("{long}A")));
    }

    #[test]
    fn sharing_trait_is_standard() {
        assert!(crate::standard::TRAITS.contains(&SHARING_TRAIT));
    }

    #[test]
    fn parse_checks_alphabet() {
        assert!(ResourceClass::parse("VCPU").is_some());
        assert!(ResourceClass::parse("vcpu").is_none());
        assert!(TraitName::parse("").is_none());
        assert!(TraitName::parse("HW CPU").is_none());
    }

    #[test]
    fn requested_sorts_text() {
        let good = ResourceClass::requested("VCPU");
        assert_eq!(good.name().map(ResourceClass::as_str), Some("VCPU"));
        let bad = TraitName::requested("not a trait");
        assert_eq!(bad, RequestedName::NotAName("not a trait".to_owned()));
        assert_eq!(bad.name(), None);
        assert_eq!(bad.to_string(), "not a trait");
        let long = "A".repeat(MAX_NAME_LEN + 1);
        assert!(ResourceClass::requested(&long).name().is_none());
    }

    #[test]
    fn canonical_uuids_only() {
        let u = "2290d4af-9e6e-400b-9d65-1ee01376f71a";
        assert!(canonical_uuid(u).is_some());
        for other in [
            "2290d4af9e6e400b9d651ee01376f71a",
            "2290D4AF-9E6E-400B-9D65-1EE01376F71A",
            "{2290d4af-9e6e-400b-9d65-1ee01376f71a}",
            "random_sauce",
            "",
        ] {
            assert_eq!(canonical_uuid(other), None, "{other}");
        }
    }
}
