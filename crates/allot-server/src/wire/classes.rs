//! `/resource_classes` (1.2), and the classes' metadata (an allot extension).

use allot_core::ClassMetadata;
use serde::Serialize;

use super::Link;

/// One resource class: `GET /resource_classes/{name}`, and the answer to a rename
/// (`PUT` before 1.7; from 1.7 the `PUT` has no body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceClassBody<'a> {
    /// Its `self` link.
    pub links: [Link; 1],
    /// Its metadata: only in `GET /resource_classes?with_metadata=true` (an allot
    /// extension; absent otherwise, so Placement clients see Placement's body).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ClassMetadataBody>,
    /// The class's name.
    pub name: &'a str,
}

impl<'a> ResourceClassBody<'a> {
    /// The body of the class `name`, whose URL is `url`.
    pub fn new(name: &'a str, url: String) -> Self {
        ResourceClassBody {
            links: [Link::to_self(url)],
            metadata: None,
            name,
        }
    }
}

/// A class's metadata: `GET` and `PUT /resource_classes/{name}/metadata`, and the
/// `metadata` of each class in `GET /resource_classes?with_metadata=true`. Every field
/// is always present, `null` when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassMetadataBody {
    /// One line on what the class counts.
    pub description: Option<String>,
    /// A name for people.
    pub display_name: Option<String>,
    /// What one unit is (`count`, `MiB`, `GiB`, `kbit/s`, ...).
    pub units: Option<String>,
}

impl From<ClassMetadata> for ClassMetadataBody {
    fn from(m: ClassMetadata) -> Self {
        ClassMetadataBody {
            description: m.description,
            display_name: m.display_name,
            units: m.units,
        }
    }
}

/// `GET /resource_classes`: standard classes first, then custom ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceClassList<'a> {
    /// Every class.
    pub resource_classes: Vec<ResourceClassBody<'a>>,
}
