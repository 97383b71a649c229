//! Inventories: add one (the 1.0 POST), update one, replace all, delete one, delete all.
//!
//! Placement checks very little about an inventory beyond its JSON schema (the bounds
//! of each field are the HTTP layer's business): only that its capacity,
//! `(total - reserved) * allocation_ratio`, is positive (or, from microversion 1.26,
//! not negative), that its class exists, and that removing it leaves no allocation
//! without inventory. In particular it does *not* require `min_unit <= max_unit` or
//! `max_unit <= total`, and neither do we.
//!
//! The messages are the whole messages Placement answers with on each endpoint (they
//! differ from endpoint to endpoint, and its test suite looks for them), so the HTTP
//! layer passes them on unchanged.
//!
//! Classes come as [`RequestedName`] names: the schemas let through text that is no class
//! name (a class too long, keys of the replace-all body that are not class names, any
//! path segment), and Placement answers it as it answers a class it does not have, at
//! the same point.

use uuid::Uuid;

use super::{bump, bumped_generation, check_generation, GivenGeneration, Plan};
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Inventory, Provider, ProviderId, Timestamp};
use crate::names::{RequestedName, ResourceClass};
use crate::state::State;

/// How strict the capacity rule is: Placement let `reserved` equal `total` from
/// microversion 1.26 on (a provider whose whole inventory is set aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservedRule {
    /// Before 1.26: capacity must be positive, so `reserved < total`.
    BelowTotal,
    /// From 1.26: capacity must not be negative, so `reserved <= total`.
    UpToTotal,
}

impl ReservedRule {
    /// The rule of a microversion `1.minor`.
    pub fn for_minor(minor: u16) -> Self {
        if minor >= 26 {
            ReservedRule::UpToTotal
        } else {
            ReservedRule::BelowTotal
        }
    }
}

/// Checks one inventory's capacity; `Err` holds the reason, without the endpoint's
/// prefix.
fn check_capacity(
    provider: Uuid,
    class: &str,
    inv: &Inventory,
    rule: ReservedRule,
) -> Result<(), String> {
    // Placement validates the capacity it reports, truncated like Python's `int()`:
    // signed, so that `reserved > total` (or a negative ratio, which the schema
    // allows) shows up as a negative number.
    let capacity = inv.reported_capacity();
    match rule {
        ReservedRule::BelowTotal if capacity <= 0 => Err(format!(
            "Invalid inventory for '{class}' on resource provider '{provider}'. \
             The reserved value is greater than or equal to total."
        )),
        ReservedRule::UpToTotal if capacity < 0 => Err(format!(
            "Invalid inventory for '{class}' on resource provider '{provider}'. \
             The reserved value is greater than total."
        )),
        _ => Ok(()),
    }
}

fn update_refused(provider: Uuid, reason: &str) -> Error {
    Error::invalid(format!(
        "Unable to update inventory for resource provider {provider}: {reason}"
    ))
}

const GENERATION_CONFLICT: &str = "resource provider generation conflict";

impl State {
    /// How much of `class` on `provider` allocations use and pending claims live at
    /// `now` promise (see [`State::used`]): an inventory they use cannot go.
    pub fn inventory_usage(
        &self,
        provider: ProviderId,
        class: &ResourceClass,
        now: Timestamp,
    ) -> u64 {
        self.used(provider, class, now)
    }

    /// The class a request names, if it is a name and such a class exists.
    fn existing_class<'r>(
        &self,
        class: &'r RequestedName<ResourceClass>,
    ) -> Option<&'r ResourceClass> {
        class.name().filter(|c| self.class_exists(c))
    }

    /// The classes among `classes` that allocations (or claims live at `now`) on
    /// `provider` use, in resource class order (standard classes first, as Placement
    /// lists them).
    fn classes_in_use<'a>(
        &self,
        provider: &Provider,
        classes: impl Iterator<Item = &'a ResourceClass>,
        now: Timestamp,
    ) -> Vec<&'a ResourceClass> {
        let mut used: Vec<&ResourceClass> = classes
            .filter(|c| self.inventory_usage(provider.id(), c, now) > 0)
            .collect();
        let order = |c: &ResourceClass| {
            self.class_names()
                .position(|n| n == c.as_str())
                .unwrap_or(usize::MAX)
        };
        used.sort_by_key(|c| (order(c), c.to_string()));
        used
    }

    fn in_use_message(provider: &Provider, classes: &[&ResourceClass]) -> String {
        let names: Vec<&str> = classes.iter().map(|c| c.as_str()).collect();
        format!(
            "Inventory for '{}' on resource provider '{}' in use.",
            names.join(", "),
            provider.uuid()
        )
    }

    /// The inventories of a provider after replacing one class's, planned by
    /// [`Self::inventories_written`].
    fn inventory_changes(
        provider: &Provider,
        replace: Option<(&ResourceClass, Inventory)>,
        remove: Option<&ResourceClass>,
        now: Timestamp,
    ) -> (u64, Vec<Change>) {
        let mut all = provider.inventories.clone();
        if let Some(class) = remove {
            all.remove(class);
        }
        if let Some((class, inv)) = replace {
            all.insert(class.clone(), inv);
        }
        Self::inventories_written(provider, all.into_iter().collect(), now)
    }

    /// What a write that leaves `provider` with `inventories` answers (the
    /// provider's new generation) and changes: the inventories, and the bump.
    fn inventories_written(
        provider: &Provider,
        inventories: Vec<(ResourceClass, Inventory)>,
        now: Timestamp,
    ) -> (u64, Vec<Change>) {
        (
            bumped_generation(provider),
            vec![
                Change::SetInventories(provider.id(), inventories),
                bump(provider, now),
            ],
        )
    }

    /// Adds an inventory of a class the provider has none of (`POST .../inventories`,
    /// which takes no generation). Returns the provider's new generation.
    pub fn add_inventory(
        &self,
        provider: &Uuid,
        class: &RequestedName<ResourceClass>,
        inventory: Inventory,
        rule: ReservedRule,
        now: Timestamp,
    ) -> Plan<u64> {
        let p = self.provider_required(provider)?;
        let refuse = |reason: &str| {
            Error::invalid(format!(
                "Unable to create inventory for resource provider {provider}: {reason}"
            ))
        };
        check_capacity(p.uuid(), class.as_str(), &inventory, rule).map_err(|r| refuse(&r))?;
        let Some(class) = self.existing_class(class) else {
            return Err(refuse(&format!("No such resource class {class}.")));
        };
        if p.inventories.contains_key(class) {
            return Err(Error::conflict(
                ConflictCode::ConcurrentUpdate,
                format!(
                    "Update conflict: Inventory for '{class}' on resource provider '{provider}' \
                     already exists."
                ),
            ));
        }
        Ok(Self::inventory_changes(
            p,
            Some((class, inventory)),
            None,
            now,
        ))
    }

    /// Replaces the inventory of a class the provider already has
    /// (`PUT .../inventories/{class}`). Returns the provider's new generation.
    pub fn update_inventory(
        &self,
        provider: &Uuid,
        generation: impl Into<GivenGeneration>,
        class: &RequestedName<ResourceClass>,
        inventory: Inventory,
        rule: ReservedRule,
        now: Timestamp,
    ) -> Plan<u64> {
        let p = self.provider_required(provider)?;
        check_generation(p, generation.into(), GENERATION_CONFLICT)?;
        check_capacity(p.uuid(), class.as_str(), &inventory, rule)
            .map_err(|r| update_refused(p.uuid(), &r))?;
        let Some(class) = self.existing_class(class) else {
            // Not caught by Placement's handler: its generic "not found" answer.
            return Err(Error::not_found(format!("No such resource class {class}.")));
        };
        let Some((existing, _)) = p.inventories.get_key_value(class) else {
            return Err(Error::invalid(format!(
                "No inventory record with resource class for resource provider {provider}: \
                 No inventory of class {class} found."
            )));
        };
        Ok(Self::inventory_changes(
            p,
            Some((existing, inventory)),
            None,
            now,
        ))
    }

    /// Replaces all of a provider's inventories (`PUT .../inventories`). Classes not in
    /// `inventories` are removed, which allocations may forbid. Returns the provider's
    /// new generation.
    ///
    /// An entry with no inventory is one the request gave under a name with something
    /// that is no inventory at all: it is refused as the unknown class it names, in
    /// its turn (after the generation and the other entries' capacity), as Placement
    /// refuses it only once it reads the entry.
    pub fn set_inventories(
        &self,
        provider: &Uuid,
        generation: impl Into<GivenGeneration>,
        inventories: &[(RequestedName<ResourceClass>, Option<Inventory>)],
        rule: ReservedRule,
        now: Timestamp,
    ) -> Plan<u64> {
        let p = self.provider_required(provider)?;
        check_generation(p, generation.into(), GENERATION_CONFLICT)?;
        for (class, inv) in inventories {
            if let Some(inv) = inv {
                check_capacity(p.uuid(), class.as_str(), inv, rule)
                    .map_err(|r| update_refused(p.uuid(), &r))?;
            }
        }
        let mut all: std::collections::BTreeMap<ResourceClass, Inventory> = Default::default();
        for (class, inv) in inventories {
            let (Some(existing), Some(inv)) = (self.existing_class(class), inv) else {
                return Err(Error::invalid(format!(
                    "Unknown resource class in inventory for resource provider {provider}: \
                     No such resource class {class}."
                )));
            };
            all.insert(existing.clone(), *inv);
        }
        let removed = p.inventories.keys().filter(|c| !all.contains_key(*c));
        let in_use = self.classes_in_use(p, removed, now);
        if !in_use.is_empty() {
            return Err(Error::conflict(
                ConflictCode::InventoryInUse,
                format!("update conflict: {}", Self::in_use_message(p, &in_use)),
            ));
        }
        Ok(Self::inventories_written(p, all.into_iter().collect(), now))
    }

    /// Deletes one class's inventory (`DELETE .../inventories/{class}`, which takes no
    /// generation). Returns the provider's new generation.
    pub fn delete_inventory(
        &self,
        provider: &Uuid,
        class: &RequestedName<ResourceClass>,
        now: Timestamp,
    ) -> Plan<u64> {
        let p = self.provider_required(provider)?;
        let not_found = |reason: String| {
            Error::not_found(format!(
                "No inventory of class {class} found for delete: {reason}"
            ))
        };
        let Some(class) = self.existing_class(class) else {
            return Err(not_found(format!("No such resource class {class}.")));
        };
        let in_use = self.classes_in_use(p, std::iter::once(class), now);
        if !in_use.is_empty() {
            // Placement labels this conflict "concurrent update", not "inventory in
            // use" as its other endpoints do; clients may depend on it, so we do too.
            return Err(Error::conflict(
                ConflictCode::ConcurrentUpdate,
                format!(
                    "Unable to delete inventory of class {class}: {}",
                    Self::in_use_message(p, &in_use)
                ),
            ));
        }
        if !p.inventories.contains_key(class) {
            return Err(not_found(format!(
                "No inventory of class {class} found for delete"
            )));
        }
        Ok(Self::inventory_changes(p, None, Some(class), now))
    }

    /// Deletes all of a provider's inventories (`DELETE .../inventories`, 1.5, which
    /// takes no generation). The generation is bumped even when there was nothing to
    /// delete. Returns the provider's new generation.
    pub fn delete_inventories(&self, provider: &Uuid, now: Timestamp) -> Plan<u64> {
        let p = self.provider_required(provider)?;
        let in_use = self.classes_in_use(p, p.inventories.keys(), now);
        if !in_use.is_empty() {
            return Err(Error::conflict(
                ConflictCode::InventoryInUse,
                Self::in_use_message(p, &in_use),
            ));
        }
        Ok(Self::inventories_written(p, Vec::new(), now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{new_provider, rc};

    const RP: Uuid = Uuid::from_u128(0x1234);

    fn c(name: &str) -> RequestedName<ResourceClass> {
        ResourceClass::requested(name)
    }

    fn state() -> State {
        let mut s = State::new();
        s.apply(&[new_provider(1, RP, None, 1)]);
        s
    }

    fn apply(s: &mut State, plan: impl FnOnce(&State) -> Plan<u64>) -> u64 {
        let (generation, changes) = plan(s).expect("plan");
        s.apply(&changes);
        generation
    }

    /// Entries of a whole-set write, every one an inventory.
    fn entries(
        list: &[(RequestedName<ResourceClass>, Inventory)],
    ) -> Vec<(RequestedName<ResourceClass>, Option<Inventory>)> {
        list.iter().map(|(c, i)| (c.clone(), Some(*i))).collect()
    }

    fn inv(total: u64, reserved: u64, ratio: f64) -> Inventory {
        Inventory {
            reserved,
            allocation_ratio: ratio,
            ..Inventory::with_total(total)
        }
    }

    fn provider(s: &State) -> &Provider {
        s.provider_by_uuid(&RP).unwrap()
    }

    #[test]
    fn capacity_rule_by_microversion() {
        use ReservedRule::*;
        // (total, reserved, ratio, rule, accepted)
        let cases = [
            (10, 0, 1.0, BelowTotal, true),
            (10, 9, 1.0, BelowTotal, true),
            (10, 10, 1.0, BelowTotal, false),
            (10, 10, 1.0, UpToTotal, true),
            (10, 11, 1.0, UpToTotal, false),
            (256, 512, 1.0, BelowTotal, false),
            // A ratio of zero leaves no capacity; only 1.26 accepts that.
            (10, 0, 0.0, BelowTotal, false),
            (10, 0, 0.0, UpToTotal, true),
            // Fractions are truncated: 1 * 0.5 is 0.
            (10, 9, 0.5, BelowTotal, false),
            (10, 8, 0.5, BelowTotal, true),
            // The schema allows negative ratios; they make the capacity negative.
            (10, 0, -1.0, UpToTotal, false),
            // ... and a tiny negative capacity truncates to zero.
            (10, 9, -0.5, UpToTotal, true),
        ];
        for (total, reserved, ratio, rule, ok) in cases {
            let r = check_capacity(RP, "VCPU", &inv(total, reserved, ratio), rule);
            assert_eq!(r.is_ok(), ok, "{total} {reserved} {ratio} {rule:?}");
        }
        let msg = check_capacity(RP, "DISK_GB", &inv(1, 1, 1.0), BelowTotal).unwrap_err();
        assert!(
            msg.ends_with("The reserved value is greater than or equal to total."),
            "{msg}"
        );
        let msg = check_capacity(RP, "DISK_GB", &inv(1, 2, 1.0), UpToTotal).unwrap_err();
        assert!(
            msg.ends_with("The reserved value is greater than total."),
            "{msg}"
        );
        assert_eq!(ReservedRule::for_minor(25), BelowTotal);
        assert_eq!(ReservedRule::for_minor(26), UpToTotal);
    }

    #[test]
    fn add_bumps_and_refuses_duplicates_and_unknown_classes() {
        let mut s = state();
        let rule = ReservedRule::BelowTotal;
        assert_eq!(
            apply(&mut s, |s| s.add_inventory(
                &RP,
                &c("DISK_GB"),
                inv(2048, 512, 1.0),
                rule,
                5
            )),
            1
        );
        assert_eq!(provider(&s).row.generation, 1);
        assert_eq!(provider(&s).row.updated_at, 5);
        assert_eq!(provider(&s).inventories["DISK_GB"].reserved, 512);

        let dup = s
            .add_inventory(&RP, &c("DISK_GB"), inv(1, 0, 1.0), rule, 6)
            .unwrap_err();
        assert!(
            matches!(&dup, Error::Conflict { code: ConflictCode::ConcurrentUpdate, message }
            if message.starts_with("Update conflict"))
        );
        let unknown = s
            .add_inventory(&RP, &c("NO_CLASS_14"), inv(1, 0, 1.0), rule, 6)
            .unwrap_err();
        assert_eq!(
            unknown,
            Error::invalid(format!(
                "Unable to create inventory for resource provider {RP}: No such resource class NO_CLASS_14."
            ))
        );
        // Capacity is checked before the class.
        let both = s
            .add_inventory(&RP, &c("NO_CLASS"), inv(1, 2, 1.0), rule, 6)
            .unwrap_err();
        assert!(
            both.to_string().contains("greater than or equal to total"),
            "{both}"
        );
        let missing = s.add_inventory(&Uuid::from_u128(9), &c("VCPU"), inv(1, 0, 1.0), rule, 6);
        assert!(matches!(missing, Err(Error::NotFound(_))));
    }

    #[test]
    fn update_checks_generation_capacity_class_and_presence() {
        let mut s = state();
        let rule = ReservedRule::BelowTotal;
        apply(&mut s, |s| {
            s.add_inventory(&RP, &c("DISK_GB"), inv(2048, 512, 1.0), rule, 5)
        });

        let stale = s
            .update_inventory(&RP, 0, &c("DISK_GB"), inv(2048, 0, 1.0), rule, 6)
            .unwrap_err();
        assert!(
            matches!(&stale, Error::Conflict { code: ConflictCode::ConcurrentUpdate, message }
            if message == GENERATION_CONFLICT)
        );
        let bad = s
            .update_inventory(&RP, 1, &c("DISK_GB"), inv(2048, 4096, 1.0), rule, 6)
            .unwrap_err();
        assert!(matches!(&bad, Error::Invalid(m) if m.starts_with(&format!(
            "Unable to update inventory for resource provider {RP}: Invalid inventory for 'DISK_GB'"))));
        let absent = s
            .update_inventory(&RP, 1, &c("MEMORY_MB"), inv(2048, 0, 1.0), rule, 6)
            .unwrap_err();
        assert!(
            matches!(&absent, Error::Invalid(m) if m.starts_with("No inventory record with resource class"))
        );
        let unknown = s
            .update_inventory(&RP, 1, &c("HOUSE"), inv(2048, 0, 1.0), rule, 6)
            .unwrap_err();
        assert_eq!(unknown, Error::not_found("No such resource class HOUSE."));

        assert_eq!(
            apply(&mut s, |s| s.update_inventory(
                &RP,
                1,
                &c("DISK_GB"),
                inv(2048, 1024, 1.0),
                rule,
                7
            )),
            2
        );
        assert_eq!(provider(&s).inventories["DISK_GB"].reserved, 1024);
        // From 1.26 the whole inventory may be reserved.
        let up_to = ReservedRule::UpToTotal;
        assert_eq!(
            apply(&mut s, |s| s.update_inventory(
                &RP,
                2,
                &c("DISK_GB"),
                inv(512, 512, 1.0),
                up_to,
                8
            )),
            3
        );
    }

    #[test]
    fn set_replaces_everything() {
        let mut s = state();
        let rule = ReservedRule::BelowTotal;
        let two = vec![
            (c("IPV4_ADDRESS"), inv(253, 0, 1.0)),
            (c("DISK_GB"), inv(1024, 0, 1.0)),
        ];
        assert_eq!(
            apply(&mut s, |s| s.set_inventories(
                &RP,
                0,
                &entries(&two),
                rule,
                3
            )),
            1
        );
        let classes: Vec<&str> = provider(&s)
            .inventories
            .keys()
            .map(|c| c.as_str())
            .collect();
        assert_eq!(classes, ["DISK_GB", "IPV4_ADDRESS"]);

        let stale = s
            .set_inventories(&RP, 99, &entries(&two), rule, 4)
            .unwrap_err();
        assert!(matches!(
            stale,
            Error::Conflict {
                code: ConflictCode::ConcurrentUpdate,
                ..
            }
        ));
        let house = vec![(c("HOUSE"), inv(253, 0, 1.0))];
        let unknown = s
            .set_inventories(&RP, 1, &entries(&house), rule, 4)
            .unwrap_err();
        assert!(
            matches!(&unknown, Error::Invalid(m) if m.starts_with("Unknown resource class in inventory"))
        );
        // An entry that is no inventory at all is refused as the unknown class it
        // names, in its turn: after the generation and the other entries' capacity.
        let no_inventory = [(c("house"), None)];
        assert!(matches!(
            s.set_inventories(&RP, 99, &no_inventory, rule, 4)
                .unwrap_err(),
            Error::Conflict {
                code: ConflictCode::ConcurrentUpdate,
                ..
            }
        ));
        let mut after_full = entries(&[(c("IPV4_ADDRESS"), inv(253, 253, 1.0))]);
        after_full.push((c("house"), None));
        assert!(matches!(
            s.set_inventories(&RP, 1, &after_full, rule, 4).unwrap_err(),
            Error::Invalid(m) if m.contains("reserved")
        ));
        assert_eq!(
            s.set_inventories(&RP, 1, &no_inventory, rule, 4)
                .unwrap_err(),
            Error::invalid(format!(
                "Unknown resource class in inventory for resource provider {RP}: \
                 No such resource class house."
            ))
        );
        // Text that is no class name is answered as an unknown class.
        let lower = vec![(c("VCPU"), inv(1, 0, 1.0)), (c("house"), inv(1, 0, 1.0))];
        assert_eq!(
            s.set_inventories(&RP, 1, &entries(&lower), rule, 4)
                .unwrap_err(),
            Error::invalid(format!(
                "Unknown resource class in inventory for resource provider {RP}: \
                 No such resource class house."
            ))
        );
        let full = vec![(c("IPV4_ADDRESS"), inv(253, 253, 1.0))];
        let refused = s
            .set_inventories(&RP, 1, &entries(&full), rule, 4)
            .unwrap_err();
        assert!(refused
            .to_string()
            .contains("greater than or equal to total"));
        assert_eq!(
            apply(&mut s, |s| s.set_inventories(
                &RP,
                1,
                &entries(&full),
                ReservedRule::UpToTotal,
                4
            )),
            2
        );
        assert_eq!(provider(&s).inventories.len(), 1);

        assert_eq!(
            apply(&mut s, |s| s.set_inventories(&RP, 2, &[], rule, 5)),
            3
        );
        assert!(provider(&s).inventories.is_empty());
    }

    #[test]
    fn custom_classes_must_exist() {
        let mut s = state();
        let gold = vec![(c("CUSTOM_GOLD"), inv(5, 0, 1.0))];
        assert!(s
            .set_inventories(&RP, 0, &entries(&gold), ReservedRule::BelowTotal, 1)
            .is_err());
        let (_, c) = s.create_class(rc("CUSTOM_GOLD"), 1).unwrap();
        s.apply(&c);
        assert_eq!(
            apply(&mut s, |s| s.set_inventories(
                &RP,
                0,
                &entries(&gold),
                ReservedRule::BelowTotal,
                2
            )),
            1
        );
    }

    #[test]
    fn delete_one_and_all() {
        let mut s = state();
        let rule = ReservedRule::BelowTotal;
        apply(&mut s, |s| {
            s.add_inventory(&RP, &c("DISK_GB"), inv(1024, 0, 1.0), rule, 2)
        });
        apply(&mut s, |s| {
            s.add_inventory(&RP, &c("IPV4_ADDRESS"), inv(255, 2, 1.0), rule, 3)
        });
        assert_eq!(
            apply(&mut s, |s| s.delete_inventory(&RP, &c("IPV4_ADDRESS"), 4)),
            3
        );
        assert_eq!(provider(&s).inventories.len(), 1);
        let again = s.delete_inventory(&RP, &c("IPV4_ADDRESS"), 5).unwrap_err();
        assert_eq!(
            again,
            Error::not_found(
                "No inventory of class IPV4_ADDRESS found for delete: \
                 No inventory of class IPV4_ADDRESS found for delete"
            )
        );
        let unknown = s.delete_inventory(&RP, &c("HOUSE"), 5).unwrap_err();
        assert!(
            matches!(&unknown, Error::NotFound(m) if m.ends_with("No such resource class HOUSE."))
        );

        assert_eq!(apply(&mut s, |s| s.delete_inventories(&RP, 6)), 4);
        assert!(provider(&s).inventories.is_empty());
        // Deleting nothing still bumps the generation, as Placement does.
        assert_eq!(apply(&mut s, |s| s.delete_inventories(&RP, 7)), 5);
        assert_eq!(provider(&s).row.generation, 5);
    }

    #[test]
    fn in_use_message_lists_classes_in_class_order() {
        let s = state();
        let p = provider(&s);
        assert_eq!(
            State::in_use_message(p, &[&rc("VCPU"), &rc("DISK_GB")]),
            format!("Inventory for 'VCPU, DISK_GB' on resource provider '{RP}' in use.")
        );
        // No allocations exist yet: nothing is ever in use.
        assert!(s
            .classes_in_use(p, [rc("VCPU"), rc("DISK_GB")].iter(), 0)
            .is_empty());
        assert_eq!(s.inventory_usage(p.id(), &rc("VCPU"), 0), 0);
    }
}
