//! Read-side queries over the [`State`]: which providers match the filters of
//! `GET /resource_providers`.
//!
//! The filters combine with AND. The order of the checks matters to clients only
//! through the errors: like Placement, names of traits and resource classes are
//! checked step by step, and a step that already rules out every provider ends the
//! search with an empty answer before the later steps check their names.

use uuid::Uuid;

use crate::error::Error;
use crate::model::{Provider, Timestamp};
use crate::names::{ProviderRef, RequestedName, ResourceClass, TraitName};
use crate::state::State;

/// The filters of a provider listing, already parsed. Empty fields filter nothing.
///
/// Trait and class names are [`RequestedName`]s: Placement answers text that is no
/// name as it answers a name it does not have, at the same step of the search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderQuery {
    /// Exact name (an empty name filters nothing, as in Placement).
    pub name: Option<String>,
    /// Exact uuid (a spelling that names no provider matches none).
    pub uuid: Option<ProviderRef>,
    /// Only providers in the same tree as this provider.
    pub in_tree: Option<ProviderRef>,
    /// Traits: the provider must have at least one trait of every group.
    pub required_traits: Vec<Vec<RequestedName<TraitName>>>,
    /// Traits the provider must have none of.
    pub forbidden_traits: Vec<RequestedName<TraitName>>,
    /// Aggregates: the provider must be in at least one aggregate of every group.
    pub member_of: Vec<Vec<Uuid>>,
    /// Aggregates the provider must be in none of.
    pub forbidden_aggregates: Vec<Uuid>,
    /// Resources the provider must have room for, by class, in the order asked.
    pub resources: Vec<(RequestedName<ResourceClass>, u64)>,
    /// The moment the question is asked: pending claims live then count as used,
    /// expired ones do not (see `crate::ops::claims`).
    pub now: Timestamp,
}

impl State {
    /// The providers matching `query`, in creation order.
    ///
    /// Refuses unknown traits (`Invalid trait(s) in "required" parameter`) and unknown
    /// resource classes (`Invalid resource class in resources parameter`).
    pub fn query_providers(&self, query: &ProviderQuery) -> crate::Result<Vec<&Provider>> {
        let name = query.name.as_deref().filter(|n| !n.is_empty());

        let tree_root = match &query.in_tree {
            None => None,
            Some(t) => match self.provider_by_ref(t) {
                Some(p) => Some(p.row.root),
                None => return Ok(vec![]),
            },
        };

        for name in query.required_traits.iter().flatten() {
            self.known_trait(name)?;
        }
        if !query.required_traits.is_empty()
            && !self
                .providers()
                .any(|p| has_required_traits(p, &query.required_traits))
        {
            return Ok(vec![]);
        }
        for name in &query.forbidden_traits {
            self.known_trait(name)?;
        }

        if !query.member_of.is_empty()
            && !self.providers().any(|p| in_aggregates(p, &query.member_of))
        {
            return Ok(vec![]);
        }

        for (class, _) in &query.resources {
            if !class.name().is_some_and(|c| self.class_exists(c)) {
                return Err(Error::invalid(format!(
                    "Invalid resource class in resources parameter: No such resource class \
                     {class}."
                )));
            }
        }

        let uuid = query.uuid.as_ref().map(ProviderRef::uuid);
        Ok(self
            .providers()
            .filter(|p| name.is_none_or(|n| p.row.name == n))
            .filter(|p| uuid.is_none_or(|u| u == Some(p.uuid())))
            .filter(|p| tree_root.is_none_or(|r| p.row.root == r))
            .filter(|p| has_required_traits(p, &query.required_traits))
            .filter(|p| !query.forbidden_traits.iter().any(|t| has_trait(p, t)))
            .filter(|p| in_aggregates(p, &query.member_of))
            .filter(|p| {
                !query
                    .forbidden_aggregates
                    .iter()
                    .any(|a| p.aggregates.contains(a))
            })
            .filter(|p| {
                query.resources.iter().all(|(class, amount)| {
                    class
                        .name()
                        .is_some_and(|c| self.has_room(p, c, *amount, query.now))
                })
            })
            .collect())
    }

    /// Whether one more allocation of `amount` of `class` fits on `provider`: it has
    /// inventory of the class, the amount respects the inventory's `min_unit`,
    /// `max_unit` and `step_size`, and what is used plus the amount stays within
    /// `(total - reserved) * allocation_ratio`. What is used counts the pending claims
    /// live at `now`.
    pub fn has_room(
        &self,
        provider: &Provider,
        class: &ResourceClass,
        amount: u64,
        now: Timestamp,
    ) -> bool {
        let Some(inv) = provider.inventories.get(class) else {
            return false;
        };
        inv.fits(provider.used(class.as_str(), now), amount) && inv.admits(amount).is_ok()
    }

    fn known_trait(&self, name: &RequestedName<TraitName>) -> crate::Result<()> {
        if name.name().is_some_and(|n| self.trait_exists(n)) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "Invalid trait(s) in \"required\" parameter: No such trait(s): {name}."
            )))
        }
    }
}

fn has_trait(p: &Provider, t: &RequestedName<TraitName>) -> bool {
    t.name().is_some_and(|n| p.traits.contains(n))
}

fn has_required_traits(p: &Provider, groups: &[Vec<RequestedName<TraitName>>]) -> bool {
    groups.iter().all(|any| any.iter().any(|t| has_trait(p, t)))
}

fn in_aggregates(p: &Provider, groups: &[Vec<Uuid>]) -> bool {
    groups
        .iter()
        .all(|any| any.iter().any(|a| p.aggregates.contains(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Change;
    use crate::model::Inventory;

    const AGG1: Uuid = Uuid::from_u128(0xa1);
    const AGG2: Uuid = Uuid::from_u128(0xa2);

    fn uuid(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    /// Four providers: 1 (root) with child 2, and roots 3 and 4.
    ///
    /// | provider | traits                          | aggregates | inventory                     |
    /// |----------|---------------------------------|------------|-------------------------------|
    /// | p1       | HW_CPU_X86_AVX                  | AGG1       | VCPU 8                        |
    /// | p2       | HW_CPU_X86_AVX, STORAGE_DISK_SSD| AGG1, AGG2 | DISK_GB 100 r10 min5 max50 s5 |
    /// | p3       | STORAGE_DISK_SSD                | AGG2       | VCPU 4 ratio 2.0              |
    /// | p4       |                                 |            |                               |
    fn world() -> State {
        let mut s = State::new();
        for (n, parent) in [(1, None), (2, Some(1)), (3, None), (4, None)] {
            let parent = parent.map(|p| uuid(p).into());
            let (_, c) = s
                .create_provider(uuid(n), &format!("p{n}"), parent, n as i64)
                .unwrap();
            s.apply(&c);
        }
        let id = |s: &State, n| s.provider_by_uuid(&uuid(n)).unwrap().id();
        let traits = |names: &[&str]| names.iter().map(|t| TraitName::new_unchecked(*t)).collect();
        let mut changes = vec![
            Change::SetTraits(id(&s, 1), traits(&["HW_CPU_X86_AVX"])),
            Change::SetTraits(id(&s, 2), traits(&["HW_CPU_X86_AVX", "STORAGE_DISK_SSD"])),
            Change::SetTraits(id(&s, 3), traits(&["STORAGE_DISK_SSD"])),
            Change::SetAggregates(id(&s, 1), vec![AGG1]),
            Change::SetAggregates(id(&s, 2), vec![AGG1, AGG2]),
            Change::SetAggregates(id(&s, 3), vec![AGG2]),
        ];
        let disk = Inventory {
            reserved: 10,
            min_unit: 5,
            max_unit: 50,
            step_size: crate::testing::step(5),
            ..Inventory::with_total(100)
        };
        let vcpu3 = Inventory {
            allocation_ratio: 2.0,
            ..Inventory::with_total(4)
        };
        changes.push(Change::SetInventories(
            id(&s, 1),
            vec![(
                ResourceClass::new_unchecked("VCPU"),
                Inventory::with_total(8),
            )],
        ));
        changes.push(Change::SetInventories(
            id(&s, 2),
            vec![(ResourceClass::new_unchecked("DISK_GB"), disk)],
        ));
        changes.push(Change::SetInventories(
            id(&s, 3),
            vec![(ResourceClass::new_unchecked("VCPU"), vcpu3)],
        ));
        s.apply(&changes);
        s
    }

    fn names(s: &State, q: &ProviderQuery) -> Vec<String> {
        s.query_providers(q)
            .unwrap()
            .iter()
            .map(|p| p.row.name.clone())
            .collect()
    }

    fn groups(g: &[&[&str]]) -> Vec<Vec<RequestedName<TraitName>>> {
        g.iter()
            .map(|any| any.iter().map(|t| TraitName::requested(t)).collect())
            .collect()
    }

    fn class(name: &str) -> RequestedName<ResourceClass> {
        ResourceClass::requested(name)
    }

    #[test]
    fn filters() {
        let s = world();
        let cases: Vec<(&str, ProviderQuery, &[&str])> = vec![
            (
                "nothing",
                ProviderQuery::default(),
                &["p1", "p2", "p3", "p4"],
            ),
            (
                "name",
                ProviderQuery {
                    name: Some("p3".into()),
                    ..Default::default()
                },
                &["p3"],
            ),
            (
                "empty name",
                ProviderQuery {
                    name: Some("".into()),
                    ..Default::default()
                },
                &["p1", "p2", "p3", "p4"],
            ),
            (
                "uuid",
                ProviderQuery {
                    uuid: Some(uuid(2).into()),
                    ..Default::default()
                },
                &["p2"],
            ),
            (
                "uuid other spelling",
                ProviderQuery {
                    uuid: Some(ProviderRef::parse(&uuid(2).simple().to_string())),
                    ..Default::default()
                },
                &[],
            ),
            (
                "in_tree child",
                ProviderQuery {
                    in_tree: Some(uuid(2).into()),
                    ..Default::default()
                },
                &["p1", "p2"],
            ),
            (
                "in_tree root",
                ProviderQuery {
                    in_tree: Some(uuid(3).into()),
                    ..Default::default()
                },
                &["p3"],
            ),
            (
                "in_tree missing",
                ProviderQuery {
                    in_tree: Some(uuid(9).into()),
                    ..Default::default()
                },
                &[],
            ),
            (
                "required all",
                ProviderQuery {
                    required_traits: groups(&[&["HW_CPU_X86_AVX"], &["STORAGE_DISK_SSD"]]),
                    ..Default::default()
                },
                &["p2"],
            ),
            (
                "required any",
                ProviderQuery {
                    required_traits: groups(&[&["HW_CPU_X86_AVX", "STORAGE_DISK_SSD"]]),
                    ..Default::default()
                },
                &["p1", "p2", "p3"],
            ),
            (
                "forbidden",
                ProviderQuery {
                    forbidden_traits: vec![TraitName::requested("HW_CPU_X86_AVX")],
                    ..Default::default()
                },
                &["p3", "p4"],
            ),
            (
                "required and forbidden",
                ProviderQuery {
                    required_traits: groups(&[&["STORAGE_DISK_SSD"]]),
                    forbidden_traits: vec![TraitName::requested("HW_CPU_X86_AVX")],
                    ..Default::default()
                },
                &["p3"],
            ),
            (
                "member_of",
                ProviderQuery {
                    member_of: vec![vec![AGG1]],
                    ..Default::default()
                },
                &["p1", "p2"],
            ),
            (
                "member_of any",
                ProviderQuery {
                    member_of: vec![vec![AGG1, AGG2]],
                    ..Default::default()
                },
                &["p1", "p2", "p3"],
            ),
            (
                "member_of all",
                ProviderQuery {
                    member_of: vec![vec![AGG1], vec![AGG2]],
                    ..Default::default()
                },
                &["p2"],
            ),
            (
                "member_of unknown",
                ProviderQuery {
                    member_of: vec![vec![uuid(0xff)]],
                    ..Default::default()
                },
                &[],
            ),
            (
                "forbidden aggregate",
                ProviderQuery {
                    forbidden_aggregates: vec![AGG2],
                    ..Default::default()
                },
                &["p1", "p4"],
            ),
            (
                "vcpu 4",
                ProviderQuery {
                    resources: vec![(class("VCPU"), 4)],
                    ..Default::default()
                },
                &["p1", "p3"],
            ),
            // p3: (4 - 0) * 2.0 = 8
            (
                "vcpu 8",
                ProviderQuery {
                    resources: vec![(class("VCPU"), 8)],
                    ..Default::default()
                },
                &["p1", "p3"],
            ),
            (
                "vcpu 9",
                ProviderQuery {
                    resources: vec![(class("VCPU"), 9)],
                    ..Default::default()
                },
                &[],
            ),
            // p2's disk: min 5, max 50, step 5, capacity 90.
            (
                "disk 50",
                ProviderQuery {
                    resources: vec![(class("DISK_GB"), 50)],
                    ..Default::default()
                },
                &["p2"],
            ),
            (
                "disk over max_unit",
                ProviderQuery {
                    resources: vec![(class("DISK_GB"), 55)],
                    ..Default::default()
                },
                &[],
            ),
            (
                "disk under min_unit",
                ProviderQuery {
                    resources: vec![(class("DISK_GB"), 1)],
                    ..Default::default()
                },
                &[],
            ),
            (
                "disk off step",
                ProviderQuery {
                    resources: vec![(class("DISK_GB"), 12)],
                    ..Default::default()
                },
                &[],
            ),
            (
                "two classes",
                ProviderQuery {
                    resources: vec![(class("VCPU"), 1), (class("DISK_GB"), 5)],
                    ..Default::default()
                },
                &[],
            ),
            (
                "class nobody has",
                ProviderQuery {
                    resources: vec![(class("MEMORY_MB"), 1)],
                    ..Default::default()
                },
                &[],
            ),
            (
                "everything",
                ProviderQuery {
                    in_tree: Some(uuid(1).into()),
                    required_traits: groups(&[&["HW_CPU_X86_AVX"]]),
                    member_of: vec![vec![AGG2]],
                    resources: vec![(class("DISK_GB"), 10)],
                    ..Default::default()
                },
                &["p2"],
            ),
        ];
        for (label, q, want) in cases {
            assert_eq!(names(&s, &q), want, "{label}");
        }
    }

    #[test]
    fn unknown_names_and_the_order_of_checks() {
        let s = world();
        let err = |q: ProviderQuery| s.query_providers(&q).unwrap_err().to_string();
        assert_eq!(
            err(ProviderQuery {
                required_traits: groups(&[&["HW_CPU_X86_AVX"], &["BOGUS"]]),
                ..Default::default()
            }),
            "Invalid trait(s) in \"required\" parameter: No such trait(s): BOGUS."
        );
        assert_eq!(
            err(ProviderQuery {
                forbidden_traits: vec![TraitName::requested("BOGUS")],
                ..Default::default()
            }),
            "Invalid trait(s) in \"required\" parameter: No such trait(s): BOGUS."
        );
        assert_eq!(
            err(ProviderQuery {
                resources: vec![(class("VCPU"), 1), (class("CUSTOM_NOPE"), 1)],
                ..Default::default()
            }),
            "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE."
        );
        // Text that is no name is answered as a name that does not exist.
        assert_eq!(
            err(ProviderQuery {
                forbidden_traits: vec![TraitName::requested("not a trait")],
                ..Default::default()
            }),
            "Invalid trait(s) in \"required\" parameter: No such trait(s): not a trait."
        );
        assert_eq!(
            err(ProviderQuery {
                resources: vec![(class("vcpu"), 1)],
                ..Default::default()
            }),
            "Invalid resource class in resources parameter: No such resource class vcpu."
        );
        // A step that matches nothing ends the search before later names are checked.
        let quiet = [
            ProviderQuery {
                in_tree: Some(uuid(9).into()),
                required_traits: groups(&[&["BOGUS"]]),
                ..Default::default()
            },
            ProviderQuery {
                required_traits: groups(&[&["HW_CPU_X86_SSE"]]),
                forbidden_traits: vec![TraitName::requested("BOGUS")],
                ..Default::default()
            },
            ProviderQuery {
                member_of: vec![vec![uuid(0xff)]],
                resources: vec![(class("BOGUS"), 1)],
                ..Default::default()
            },
        ];
        for q in quiet {
            assert_eq!(s.query_providers(&q).unwrap().len(), 0, "{q:?}");
        }
        // But a name filter does not.
        assert!(s
            .query_providers(&ProviderQuery {
                name: Some("zz".into()),
                resources: vec![(class("BOGUS"), 1)],
                ..Default::default()
            })
            .is_err());
    }
}
