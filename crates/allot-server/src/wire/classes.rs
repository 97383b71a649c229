//! `/resource_classes` (1.2).

use serde::Serialize;

use super::Link;

/// One resource class: `GET /resource_classes/{name}`, and the answer to a rename
/// (`PUT` before 1.7; from 1.7 the `PUT` has no body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceClassBody<'a> {
    /// Its `self` link.
    pub links: [Link; 1],
    /// The class's name.
    pub name: &'a str,
}

impl<'a> ResourceClassBody<'a> {
    /// The body of the class `name`, whose URL is `url`.
    pub fn new(name: &'a str, url: String) -> Self {
        ResourceClassBody {
            links: [Link::to_self(url)],
            name,
        }
    }
}

/// `GET /resource_classes`: standard classes first, then custom ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceClassList<'a> {
    /// Every class.
    pub resource_classes: Vec<ResourceClassBody<'a>>,
}
