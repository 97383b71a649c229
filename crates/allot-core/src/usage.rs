//! Usages: how much of each resource class allocations use, per provider and per
//! project (`GET /resource_providers/{uuid}/usages`, `GET /usages`).
//!
//! A provider's usages come from the usage index `State::apply` keeps (derived from
//! the allocation records, and checked against them by `State::check_usage_index`).
//! A project's totals are summed from the allocation records on every request: they
//! group consumers by project, user and consumer type, which no index follows, and
//! they are asked for rarely (quota checks).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::model::{Consumer, Provider};
use crate::names::ResourceClass;
use crate::state::State;

/// The group Placement files consumers without a type under (and the 1.38 filter that
/// asks for only those).
pub const UNKNOWN_TYPE: &str = "unknown";

/// The 1.38 filter that asks for every consumer, in one group of this name.
pub const ALL_TYPES: &str = "all";

/// Which consumers a project's totals count, and how they are grouped (the 1.38
/// `consumer_type` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeFilter<'a> {
    /// No filter: one group per consumer type, consumers without one under
    /// [`UNKNOWN_TYPE`].
    EachType,
    /// `consumer_type=all`: every consumer, in one group named [`ALL_TYPES`].
    All,
    /// `consumer_type=unknown`: consumers without a type, in one group named
    /// [`UNKNOWN_TYPE`].
    Unknown,
    /// A named type: only consumers of that type, in one group of that name (none if
    /// no consumer has it; names are compared exactly, so `ALL` is a type name).
    Named(&'a str),
}

impl<'a> TypeFilter<'a> {
    /// The filter a `consumer_type` query parameter asks for (None when absent).
    pub fn from_param(param: Option<&'a str>) -> Self {
        match param {
            None => TypeFilter::EachType,
            Some(ALL_TYPES) => TypeFilter::All,
            Some(UNKNOWN_TYPE) => TypeFilter::Unknown,
            Some(name) => TypeFilter::Named(name),
        }
    }

    /// The group a consumer falls in, or None if the filter leaves it out.
    fn group<'c>(&self, consumer: &'c Consumer) -> Option<&'c str>
    where
        'a: 'c,
    {
        let own = consumer.row.consumer_type.as_deref();
        match self {
            TypeFilter::EachType => Some(own.unwrap_or(UNKNOWN_TYPE)),
            TypeFilter::All => Some(ALL_TYPES),
            TypeFilter::Unknown => own.is_none().then_some(UNKNOWN_TYPE),
            TypeFilter::Named(name) => (own == Some(*name)).then_some(*name),
        }
    }
}

/// The totals of one group of consumers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupUsage {
    /// Sum of allocations per class (only classes something is allocated of).
    pub usages: BTreeMap<ResourceClass, u64>,
    /// How many distinct consumers hold any of it.
    pub consumer_count: usize,
}

impl State {
    /// What allocations use of every class the provider has inventory of (0 when
    /// unused), in class order. Like Placement, classes are listed by inventory: usage
    /// of a class without inventory (which the allocation rules never leave) is not.
    pub fn provider_usages<'a>(&self, provider: &'a Provider) -> Vec<(&'a ResourceClass, u64)> {
        provider
            .inventories
            .keys()
            .map(|class| (class, self.usage(provider.id(), class)))
            .collect()
    }

    /// The consumers of a project (and, if given, of one user of it) holding
    /// anything.
    fn project_consumers<'s>(
        &'s self,
        project_id: &'s str,
        user_id: Option<&'s str>,
    ) -> impl Iterator<Item = &'s Consumer> + 's {
        self.consumers().filter(move |c| {
            !c.allocations.is_empty()
                && *c.row.project_id == *project_id
                && match user_id {
                    Some(u) => *c.row.user_id == *u,
                    None => true,
                }
        })
    }

    /// The sum of everything the consumers of a project (and, if given, of one user
    /// of it) hold, per class (the form of `GET /usages` before 1.38).
    pub fn project_usages(
        &self,
        project_id: &str,
        user_id: Option<&str>,
    ) -> BTreeMap<ResourceClass, u64> {
        let mut totals = BTreeMap::new();
        for consumer in self.project_consumers(project_id, user_id) {
            add_allocations(&mut totals, consumer);
        }
        totals
    }

    /// The same sums, grouped by consumer type as `filter` says, with the number of
    /// consumers in each group (the form of `GET /usages` from 1.38). A group exists
    /// only if its consumers hold something.
    pub fn project_usages_by_type(
        &self,
        project_id: &str,
        user_id: Option<&str>,
        filter: TypeFilter<'_>,
    ) -> BTreeMap<String, GroupUsage> {
        let mut groups: BTreeMap<String, (GroupUsage, BTreeSet<Uuid>)> = BTreeMap::new();
        for consumer in self.project_consumers(project_id, user_id) {
            let Some(name) = filter.group(consumer) else {
                continue;
            };
            let (group, members) = groups.entry(name.to_owned()).or_default();
            add_allocations(&mut group.usages, consumer);
            members.insert(consumer.row.uuid);
        }
        groups
            .into_iter()
            .map(|(name, (mut group, members))| {
                group.consumer_count = members.len();
                (name, group)
            })
            .collect()
    }
}

fn add_allocations(totals: &mut BTreeMap<ResourceClass, u64>, consumer: &Consumer) {
    for a in &consumer.allocations {
        *totals.entry(a.class.clone()).or_insert(0) += a.used;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Change;
    use crate::model::{Allocation, ConsumerRow, Inventory, ProviderId};
    use crate::testing::new_provider;

    fn class(name: &str) -> ResourceClass {
        ResourceClass::new_unchecked(name)
    }

    /// Two providers; consumers given as (id, project, user, type, [(provider, class,
    /// used)]).
    #[allow(clippy::type_complexity)]
    fn world(consumers: &[(u128, &str, &str, Option<&str>, &[(u64, &str, u64)])]) -> State {
        let mut s = State::new();
        for id in [1, 2] {
            s.apply(&[
                new_provider(id, Uuid::from_u128(id as u128), None, 0),
                Change::SetInventories(
                    ProviderId(id),
                    vec![
                        (class("DISK_GB"), Inventory::with_total(1000)),
                        (class("VCPU"), Inventory::with_total(100)),
                    ],
                ),
            ]);
        }
        for (id, project, user, kind, allocations) in consumers {
            let uuid = Uuid::from_u128(*id);
            s.apply(&[
                Change::PutConsumer {
                    row: ConsumerRow {
                        uuid,
                        project_id: (*project).into(),
                        user_id: (*user).into(),
                        consumer_type: kind.map(Into::into),
                        generation: 0,
                        created_at: 0,
                        updated_at: 0,
                    },
                    previous_generation: None,
                },
                Change::SetAllocations(
                    uuid,
                    allocations
                        .iter()
                        .map(|(p, c, used)| Allocation {
                            provider: ProviderId(*p),
                            class: class(c),
                            used: *used,
                        })
                        .collect(),
                ),
            ]);
        }
        s
    }

    fn sample() -> State {
        world(&[
            (10, "proj", "u1", None, &[(1, "DISK_GB", 1000)]),
            (11, "proj", "u1", None, &[(1, "VCPU", 6)]),
            (
                12,
                "proj",
                "u2",
                None,
                &[(1, "DISK_GB", 20), (2, "VCPU", 1)],
            ),
            (13, "proj", "u1", Some("INSTANCE"), &[(2, "DISK_GB", 10)]),
            (
                14,
                "proj",
                "u2",
                Some("PONY"),
                &[(1, "DISK_GB", 10), (2, "DISK_GB", 5)],
            ),
            (15, "other", "u1", Some("INSTANCE"), &[(1, "VCPU", 50)]),
            // A consumer row without allocations counts for nothing.
            (16, "proj", "u1", Some("EMPTY"), &[]),
        ])
    }

    fn sums(pairs: &[(&str, u64)]) -> BTreeMap<ResourceClass, u64> {
        pairs.iter().map(|(c, n)| (class(c), *n)).collect()
    }

    #[test]
    fn provider_usages_list_every_inventory_class() {
        let s = sample();
        let p1 = s.provider(ProviderId(1)).unwrap();
        let got: Vec<(&str, u64)> = s
            .provider_usages(p1)
            .into_iter()
            .map(|(c, n)| (c.as_str(), n))
            .collect();
        assert_eq!(got, [("DISK_GB", 1030), ("VCPU", 56)]);
        let empty = world(&[]);
        let p2 = empty.provider(ProviderId(2)).unwrap();
        assert!(empty.provider_usages(p2).iter().all(|(_, n)| *n == 0));
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn project_totals_by_project_and_user() {
        let s = sample();
        // (project, user, expected)
        let cases: &[(&str, Option<&str>, &[(&str, u64)])] = &[
            ("proj", None, &[("DISK_GB", 1045), ("VCPU", 7)]),
            ("proj", Some("u1"), &[("DISK_GB", 1010), ("VCPU", 6)]),
            ("proj", Some("u2"), &[("DISK_GB", 35), ("VCPU", 1)]),
            ("proj", Some("nobody"), &[]),
            ("other", None, &[("VCPU", 50)]),
            ("none", None, &[]),
        ];
        for (project, user, expected) in cases {
            assert_eq!(
                s.project_usages(project, *user),
                sums(expected),
                "{project} {user:?}"
            );
        }
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn project_totals_grouped_by_consumer_type() {
        let s = sample();
        let group = |pairs: &[(&str, u64)], count| GroupUsage {
            usages: sums(pairs),
            consumer_count: count,
        };
        // (filter, user, expected groups)
        let cases: Vec<(TypeFilter, Option<&str>, Vec<(&str, GroupUsage)>)> = vec![
            (
                TypeFilter::EachType,
                None,
                vec![
                    ("INSTANCE", group(&[("DISK_GB", 10)], 1)),
                    ("PONY", group(&[("DISK_GB", 15)], 1)),
                    ("unknown", group(&[("DISK_GB", 1020), ("VCPU", 7)], 3)),
                ],
            ),
            (
                TypeFilter::All,
                None,
                vec![("all", group(&[("DISK_GB", 1045), ("VCPU", 7)], 5))],
            ),
            (
                TypeFilter::Unknown,
                None,
                vec![("unknown", group(&[("DISK_GB", 1020), ("VCPU", 7)], 3))],
            ),
            (
                TypeFilter::Unknown,
                Some("u2"),
                vec![("unknown", group(&[("DISK_GB", 20), ("VCPU", 1)], 1))],
            ),
            (
                TypeFilter::Named("PONY"),
                None,
                vec![("PONY", group(&[("DISK_GB", 15)], 1))],
            ),
            (TypeFilter::Named("PONY"), Some("u1"), vec![]),
            (TypeFilter::Named("COW"), None, vec![]),
            // Consumers holding nothing form no group.
            (TypeFilter::Named("EMPTY"), None, vec![]),
            (TypeFilter::All, Some("nobody"), vec![]),
        ];
        for (filter, user, expected) in cases {
            let expected: BTreeMap<String, GroupUsage> = expected
                .into_iter()
                .map(|(n, g)| (n.to_owned(), g))
                .collect();
            assert_eq!(
                s.project_usages_by_type("proj", user, filter),
                expected,
                "{filter:?} {user:?}"
            );
        }
    }

    #[test]
    fn filters_from_parameters() {
        assert_eq!(TypeFilter::from_param(None), TypeFilter::EachType);
        assert_eq!(TypeFilter::from_param(Some("all")), TypeFilter::All);
        assert_eq!(TypeFilter::from_param(Some("unknown")), TypeFilter::Unknown);
        // Only the lowercase words are special.
        assert_eq!(
            TypeFilter::from_param(Some("ALL")),
            TypeFilter::Named("ALL")
        );
        assert_eq!(
            TypeFilter::from_param(Some("UNKNOWN")),
            TypeFilter::Named("UNKNOWN")
        );
    }
}
