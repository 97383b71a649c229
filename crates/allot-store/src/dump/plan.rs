//! The import's rulebook: a parsed dump is checked as a whole and turned into the
//! [`Change`]s that recreate it, before anything is written.
//!
//! [`plan_import`] reads as the list of checks in `docs/dump.md` ("What an import
//! checks"), in the same order: one function per family (classes, traits, the
//! providers' identities and trees, their inventories, traits and aggregates,
//! consumers and their allocations, claims and their amounts, and usage against
//! capacity). The order matters: problems are named in the order they are found, and
//! each check looks up what an earlier one accepted (the classes and traits the dump
//! defines, where each provider sits, which inventories stand).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::num::NonZeroU64;

use allot_core::drains::{Drain, DrainClaim, DrainState};
use allot_core::metadata::{self, ClassMetadata};
use allot_core::names::{is_custom_name, is_well_formed_name};
use allot_core::server_groups::{Policy, Scope, ServerGroup};
use allot_core::shapes::{Shape, ShapeName, MAX_REQUEST_BYTES, MAX_SHAPES};
use allot_core::{
    standard, Allocation, Change, Claim, ClaimAmount, ClaimState, ClassRecord, ConsumerRow,
    Inventory, ProviderId, ProviderRow, ResourceClass, Text, TraitName, TraitRecord,
};
use uuid::Uuid;

use super::{
    Counts, Dump, DumpClaim, DumpClass, DumpConsumer, DumpDrain, DumpInventory, DumpProvider,
    DumpServerGroup, DumpShape, DumpTrait, ImportError, MAX_PROBLEMS,
};

/// A dump checked and turned into changes, ready to persist.
#[derive(Debug)]
pub struct Plan {
    /// Everything to write, parents before children.
    pub changes: Vec<Change>,
    /// What the dump holds.
    pub counts: Counts,
    /// Accepted oddities (see [`plan_import`]).
    pub warnings: Vec<String>,
}

/// Checks a dump's integrity and turns it into the changes that recreate it.
///
/// Refused (every problem named): duplicate uuids or names; a parent missing, or a
/// cycle of parents; a custom class or trait whose name is not `CUSTOM_*`; an
/// inventory, allocation or pending claim on a class that is neither standard nor in
/// the dump; a provider trait neither standard nor in the dump; an allocation on a
/// provider that is not in the dump or has no inventory of the class; a pending claim
/// on a provider that is not in the dump; an allocation ratio that is not a finite
/// number; a step size of 0; a claim state that is not one.
///
/// Accepted with a warning: allocations that break their inventory's min/max/step,
/// and providers whose allocations (with live pending claims) exceed capacity.
/// Placement and allot both let an inventory change under existing allocations (a
/// lower total or allocation ratio, a new max_unit), so a real deployment can hold
/// these, and refusing them would leave it unable to move. Ended claims are not
/// checked against providers and classes: they may name ones deleted since.
///
/// The checks are the functions called below, in the order `docs/dump.md` lists
/// them; problems and warnings come out in that order.
pub fn plan_import(dump: &Dump) -> Result<Plan, ImportError> {
    let mut out = Findings::default();
    let names = Names {
        classes: check_classes(&dump.resource_classes, &mut out),
        traits: check_traits(&dump.traits, &mut out),
    };
    let index = check_provider_identities(&dump.providers, &mut out.problems);
    let roots = check_provider_parents(&dump.providers, &index, &mut out.problems);
    let inventories = check_providers(&dump.providers, &names, &index, &roots, &mut out);
    let providers = Providers { index, inventories };
    let mut used = Usage::new();
    check_consumers(&dump.consumers, &names, &providers, &mut used, &mut out);
    check_server_groups(&dump.server_groups, &mut out);
    check_claims(dump, &names, &providers, &mut used, &mut out);
    check_drains(&dump.drains, &mut out);
    check_shapes(&dump.shapes, &mut out);
    capacity_warnings(&used, &providers.inventories, &mut out.warnings);
    // Every record skipped above was named as a problem, so a plan that stands
    // writes all of the dump.
    out.problems.into_result(Plan {
        changes: out.changes,
        counts: dump.counts(),
        warnings: out.warnings,
    })
}

// ----- what the checks share -----

/// Collects problems up to [`MAX_PROBLEMS`], counting the ones past it.
#[derive(Default)]
struct Problems {
    list: Vec<String>,
    more: usize,
}

impl Problems {
    fn add(&mut self, problem: String) {
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(problem);
        } else {
            self.more += 1;
        }
    }

    fn into_result<T>(mut self, ok: T) -> Result<T, ImportError> {
        if self.list.is_empty() {
            return Ok(ok);
        }
        if self.more > 0 {
            self.list.push(format!("and {} more", self.more));
        }
        Err(ImportError::Invalid(self.list))
    }
}

/// What the checks produce as they go: the problems that refuse the import, the
/// warnings that do not, and the changes that write it (in the order written).
#[derive(Default)]
struct Findings {
    problems: Problems,
    warnings: Vec<String>,
    changes: Vec<Change>,
}

/// The custom classes and traits the dump defines, against which every use of a
/// class or trait is checked.
struct Names<'d> {
    classes: HashSet<&'d str>,
    traits: HashSet<&'d str>,
}

impl Names<'_> {
    /// Whether a class is standard or defined by the dump.
    fn class_known(&self, name: &str) -> bool {
        standard::RESOURCE_CLASSES.contains(&name) || self.classes.contains(name)
    }

    /// Whether a trait is standard or defined by the dump.
    fn trait_known(&self, name: &str) -> bool {
        standard::TRAITS.binary_search(&name).is_ok() || self.traits.contains(name)
    }
}

/// The providers as the consumers and claims look them up.
struct Providers<'d> {
    /// Each provider's position in the dump, by uuid (its id is the position plus 1).
    index: HashMap<Uuid, usize>,
    /// Every inventory that passed its checks, by provider uuid and class.
    inventories: HashMap<(Uuid, &'d str), Inventory>,
}

/// What is used on each inventory (allocations, and claims live when the dump was
/// taken), by provider uuid and class: for the capacity warnings.
type Usage<'d> = BTreeMap<(Uuid, &'d str), u64>;

/// The id an import hands out to the provider at a position in the dump: ids in the
/// dump's order keep listings in the same order.
fn id_of(position: usize) -> ProviderId {
    ProviderId(position as u64 + 1)
}

// ----- classes and traits -----

/// Each custom class: its name `CUSTOM_*` and unique, its metadata within limits.
/// Returns the names defined.
fn check_classes<'d>(classes: &'d [DumpClass], out: &mut Findings) -> HashSet<&'d str> {
    let mut names: HashSet<&str> = HashSet::new();
    for c in classes {
        if !is_custom_name(&c.name) {
            out.problems.add(format!(
                "resource class {:?} is not a custom class name (CUSTOM_*)",
                c.name
            ));
        }
        if !names.insert(&c.name) {
            out.problems
                .add(format!("resource class {} appears twice", c.name));
            continue;
        }
        let name = ResourceClass::new_unchecked(&c.name); // Checked just above.
        out.changes.push(Change::PutClass {
            record: ClassRecord {
                name: name.clone(),
                created_at: c.created_at,
                updated_at: c.updated_at,
            },
            old_name: None,
        });
        if let Some(metadata) = check_class_metadata(c, &mut out.problems) {
            out.changes
                .push(Change::SetClassMetadata(name, Some(metadata)));
        }
    }
    names
}

/// A class's metadata, each field within its limit; the metadata to set, if any.
fn check_class_metadata(c: &DumpClass, problems: &mut Problems) -> Option<ClassMetadata> {
    let m = c.metadata.as_ref()?;
    let metadata = ClassMetadata {
        units: m.units.clone(),
        display_name: m.display_name.clone(),
        description: m.description.clone(),
    };
    for (field, value, max) in [
        ("units", &metadata.units, metadata::MAX_UNITS),
        (
            "display_name",
            &metadata.display_name,
            metadata::MAX_DISPLAY_NAME,
        ),
        (
            "description",
            &metadata.description,
            metadata::MAX_DESCRIPTION,
        ),
    ] {
        if value.as_ref().is_some_and(|v| v.chars().count() > max) {
            problems.add(format!(
                "resource class {}: metadata {field} is longer than {max} characters",
                c.name
            ));
        }
    }
    (!metadata.is_empty()).then_some(metadata)
}

/// Each custom trait: its name `CUSTOM_*` and unique. Returns the names defined.
fn check_traits<'d>(traits: &'d [DumpTrait], out: &mut Findings) -> HashSet<&'d str> {
    let mut names: HashSet<&str> = HashSet::new();
    for t in traits {
        if !is_custom_name(&t.name) {
            out.problems.add(format!(
                "trait {:?} is not a custom trait name (CUSTOM_*)",
                t.name
            ));
        }
        if !names.insert(&t.name) {
            out.problems.add(format!("trait {} appears twice", t.name));
            continue;
        }
        out.changes.push(Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked(&t.name), // Checked just above.
            created_at: t.created_at,
        }));
    }
    names
}

// ----- providers and their trees -----

/// Each provider's uuid and name unique, and its name not empty. Returns each
/// provider's position by uuid.
fn check_provider_identities(
    providers: &[DumpProvider],
    problems: &mut Problems,
) -> HashMap<Uuid, usize> {
    let mut index: HashMap<Uuid, usize> = HashMap::new();
    let mut names: HashSet<&str> = HashSet::new();
    for (i, p) in providers.iter().enumerate() {
        if index.insert(p.uuid, i).is_some() {
            problems.add(format!("provider {} appears twice", p.uuid));
        }
        if !names.insert(&p.name) {
            problems.add(format!("provider name {:?} is used twice", p.name));
        }
        if p.name.is_empty() {
            problems.add(format!("provider {} has an empty name", p.uuid));
        }
    }
    index
}

/// Each provider's parents in the dump, up to a root, without a cycle. Returns each
/// provider's root position and depth; None where a parent is missing or the parents
/// go round in a cycle.
fn check_provider_parents(
    providers: &[DumpProvider],
    index: &HashMap<Uuid, usize>,
    problems: &mut Problems,
) -> Vec<Option<(usize, usize)>> {
    (0..providers.len())
        .map(|i| {
            root_of(providers, index, i)
                .map_err(|problem| problems.add(problem))
                .ok()
        })
        .collect()
}

/// The root position and depth of the provider at position `i`, following its
/// parents; or why there is none.
fn root_of(
    providers: &[DumpProvider],
    index: &HashMap<Uuid, usize>,
    i: usize,
) -> Result<(usize, usize), String> {
    let uuid = providers[i].uuid;
    let (mut at, mut depth) = (i, 0usize);
    while let Some(parent) = providers[at].parent {
        let Some(&next) = index.get(&parent) else {
            return Err(format!(
                "provider {uuid} has a parent {parent} that is not in the dump"
            ));
        };
        depth += 1;
        at = next;
        // More steps than providers means the walk went round a cycle.
        if depth > providers.len() {
            return Err(format!("provider {uuid} is in a cycle of parents"));
        }
    }
    Ok((at, depth))
}

/// Each provider's inventories, traits and aggregates, and the changes that write
/// the providers in a tree, parents first (by depth, then in the dump's order).
/// Returns every inventory that stands, for the consumers and claims.
fn check_providers<'d>(
    providers: &'d [DumpProvider],
    names: &Names,
    index: &HashMap<Uuid, usize>,
    roots: &[Option<(usize, usize)>],
    out: &mut Findings,
) -> HashMap<(Uuid, &'d str), Inventory> {
    let mut inventories = HashMap::new();
    let mut groups: Vec<(usize, usize, Vec<Change>)> = Vec::new();
    for (i, p) in providers.iter().enumerate() {
        let list = check_inventories(p, names, &mut inventories, &mut out.problems);
        let traits = check_provider_traits(p, names, &mut out.problems);
        check_aggregates(p, &mut out.problems);
        // A provider outside a tree was named as a problem: nothing to write.
        let Some((root, depth)) = roots[i] else {
            continue;
        };
        let row = ProviderRow {
            id: id_of(i),
            uuid: p.uuid,
            name: p.name.clone(),
            generation: p.generation,
            parent: p.parent.and_then(|u| index.get(&u)).map(|&j| id_of(j)),
            root: id_of(root),
            created_at: p.created_at,
            updated_at: p.updated_at,
        };
        groups.push((depth, i, provider_changes(row, list, traits, p)));
    }
    groups.sort_by_key(|(depth, i, _)| (*depth, *i));
    out.changes
        .extend(groups.into_iter().flat_map(|(_, _, group)| group));
    inventories
}

/// The changes that write one provider and what it holds.
fn provider_changes(
    row: ProviderRow,
    inventories: Vec<(ResourceClass, Inventory)>,
    traits: Vec<TraitName>,
    p: &DumpProvider,
) -> Vec<Change> {
    let id = row.id;
    let mut group = vec![Change::PutProvider {
        row,
        previous_generation: None,
    }];
    if !inventories.is_empty() {
        group.push(Change::SetInventories(id, inventories));
    }
    if !traits.is_empty() {
        group.push(Change::SetTraits(id, traits));
    }
    if !p.aggregates.is_empty() {
        group.push(Change::SetAggregates(id, p.aggregates.clone()));
    }
    group
}

// ----- inventories, provider traits, aggregates -----

/// A provider's inventories: each of a known class, a valid inventory, one per
/// class. Each that stands goes into `inventories` and the list returned.
fn check_inventories<'d>(
    p: &'d DumpProvider,
    names: &Names,
    inventories: &mut HashMap<(Uuid, &'d str), Inventory>,
    problems: &mut Problems,
) -> Vec<(ResourceClass, Inventory)> {
    let mut list = Vec::new();
    for inv in &p.inventories {
        if !names.class_known(&inv.resource_class) {
            problems.add(format!(
                "provider {}: inventory of {:?}, a class neither standard nor in the dump",
                p.uuid, inv.resource_class
            ));
            continue;
        }
        let inventory = match inventory(inv) {
            Ok(inventory) => inventory,
            Err(problem) => {
                problems.add(format!("provider {}: {problem}", p.uuid));
                continue;
            }
        };
        if inventories
            .insert((p.uuid, &inv.resource_class), inventory)
            .is_some()
        {
            problems.add(format!(
                "provider {}: two inventories of {}",
                p.uuid, inv.resource_class
            ));
            continue;
        }
        // Checked just above (known, so well formed).
        list.push((ResourceClass::new_unchecked(&inv.resource_class), inventory));
    }
    list
}

/// The inventory a dump's record describes, or why it describes none: an allocation
/// ratio that is not a finite number, or a step size of 0.
fn inventory(inv: &DumpInventory) -> Result<Inventory, String> {
    let class = &inv.resource_class;
    let ratio = &inv.allocation_ratio;
    let allocation_ratio = (ratio.parse::<f64>().ok())
        .filter(|r| r.is_finite())
        .ok_or_else(|| format!("allocation_ratio {ratio:?} of {class} is not a finite number"))?;
    // An inventory cannot be built with a step size of 0.
    let step_size =
        NonZeroU64::new(inv.step_size).ok_or_else(|| format!("step_size of {class} is 0"))?;
    Ok(Inventory {
        total: inv.total,
        reserved: inv.reserved,
        min_unit: inv.min_unit,
        max_unit: inv.max_unit,
        step_size,
        allocation_ratio,
    })
}

/// A provider's traits: each known, each once. Returns those that stand.
fn check_provider_traits(
    p: &DumpProvider,
    names: &Names,
    problems: &mut Problems,
) -> Vec<TraitName> {
    let mut list: Vec<TraitName> = Vec::new();
    for t in &p.traits {
        if !names.trait_known(t) {
            problems.add(format!(
                "provider {}: trait {t:?} is neither standard nor in the dump",
                p.uuid
            ));
        } else if list.iter().any(|n| n.as_str() == t) {
            problems.add(format!("provider {}: trait {t} appears twice", p.uuid));
        } else {
            list.push(TraitName::new_unchecked(t)); // Known, so well formed.
        }
    }
    list
}

/// A provider's aggregates: each once.
fn check_aggregates(p: &DumpProvider, problems: &mut Problems) {
    if p.aggregates.iter().collect::<BTreeSet<_>>().len() != p.aggregates.len() {
        problems.add(format!("provider {}: an aggregate appears twice", p.uuid));
    }
}

// ----- consumers and their allocations -----

/// Each consumer: unique, with its allocations. Adds what they use to `used`.
fn check_consumers<'d>(
    consumers: &'d [DumpConsumer],
    names: &Names,
    providers: &Providers,
    used: &mut Usage<'d>,
    out: &mut Findings,
) {
    let mut seen: HashSet<Uuid> = HashSet::new();
    for c in consumers {
        if !seen.insert(c.uuid) {
            out.problems
                .add(format!("consumer {} appears twice", c.uuid));
            continue;
        }
        let mut allocations = check_allocations(c, names, providers, used, out);
        out.changes.push(Change::PutConsumer {
            row: ConsumerRow {
                uuid: c.uuid,
                project_id: Text::from(c.project_id.as_str()),
                user_id: Text::from(c.user_id.as_str()),
                consumer_type: c.consumer_type.as_deref().map(Text::from),
                generation: c.generation,
                created_at: c.created_at,
                updated_at: c.updated_at,
            },
            previous_generation: None,
        });
        if !allocations.is_empty() {
            allocations.sort();
            out.changes
                .push(Change::SetAllocations(c.uuid, allocations));
        }
    }
}

/// A consumer's allocations: each on a provider in the dump, of a known class, once,
/// on an inventory of the class; one outside the inventory's min/max/step is kept
/// with a warning. Returns those that stand, having added them to `used`.
fn check_allocations<'d>(
    c: &'d DumpConsumer,
    names: &Names,
    providers: &Providers,
    used: &mut Usage<'d>,
    out: &mut Findings,
) -> Vec<Allocation> {
    let mut allocations = Vec::new();
    let mut seen: HashSet<(Uuid, &str)> = HashSet::new();
    for a in &c.allocations {
        let at = format!(
            "consumer {}: allocation of {} on provider {}",
            c.uuid, a.resource_class, a.provider
        );
        let Some(&i) = providers.index.get(&a.provider) else {
            out.problems
                .add(format!("{at}: no such provider in the dump"));
            continue;
        };
        if !names.class_known(&a.resource_class) {
            out.problems
                .add(format!("{at}: a class neither standard nor in the dump"));
            continue;
        }
        if !seen.insert((a.provider, &a.resource_class)) {
            out.problems.add(format!("{at}: appears twice"));
            continue;
        }
        let Some(inv) = providers
            .inventories
            .get(&(a.provider, a.resource_class.as_str()))
        else {
            out.problems
                .add(format!("{at}: the provider has no inventory of the class"));
            continue;
        };
        if inv.admits(a.used).is_err() {
            out.warnings.push(format!(
                "{at}: {} is outside the inventory's min_unit {}, max_unit {}, step_size {} \
                 (kept: the inventory changed after the allocation was made)",
                a.used, inv.min_unit, inv.max_unit, inv.step_size
            ));
        }
        let total = used.entry((a.provider, &a.resource_class)).or_default();
        *total = total.saturating_add(a.used);
        allocations.push(Allocation {
            provider: id_of(i),
            class: ResourceClass::new_unchecked(&a.resource_class), // Known.
            used: a.used,
        });
    }
    allocations
}

// ----- server groups -----

/// Each server group: unique, with a policy, scope and maximum allot knows. Members
/// need not exist (a member may hold nothing), and a group may be broken (imported
/// after a forced move): the rules refuse only writes that break it further.
fn check_server_groups(groups: &[DumpServerGroup], out: &mut Findings) {
    let mut seen: HashSet<Uuid> = HashSet::new();
    for g in groups {
        if !seen.insert(g.uuid) {
            out.problems
                .add(format!("server group {} appears twice", g.uuid));
            continue;
        }
        let (Some(policy), Some(scope)) = (Policy::parse(&g.policy), Scope::parse(&g.scope)) else {
            out.problems.add(format!(
                "server group {}: policy {:?} or scope {:?} is not one allot knows",
                g.uuid, g.policy, g.scope
            ));
            continue;
        };
        if g.max_server_per_host == 0 {
            out.problems
                .add(format!("server group {}: max_server_per_host is 0", g.uuid));
            continue;
        }
        let mut members = g.members.clone();
        members.sort_unstable();
        members.dedup();
        out.changes
            .push(Change::PutServerGroup(Box::new(ServerGroup {
                uuid: g.uuid,
                name: g.name.clone(),
                project_id: g.project_id.clone(),
                user_id: g.user_id.clone(),
                policy,
                max_per_domain: g.max_server_per_host,
                scope,
                enforce_on_allocations: g.enforce_on_allocations,
                members,
                created_at: g.created_at,
                updated_at: g.updated_at,
            })));
    }
}

// ----- drains -----

/// Each drain: unique, in a state that is one. Its roots and claims are kept as
/// given: a root deleted since holds nothing, and an ended claim holds no target.
fn check_drains(drains: &[DumpDrain], out: &mut Findings) {
    let mut seen: HashSet<Uuid> = HashSet::new();
    for d in drains {
        if !seen.insert(d.uuid) {
            out.problems.add(format!("drain {} appears twice", d.uuid));
            continue;
        }
        let Some(state) = DrainState::parse(&d.state) else {
            out.problems.add(format!(
                "drain {}: state {:?} is not open or confirmed",
                d.uuid, d.state
            ));
            continue;
        };
        let mut roots = d.roots.clone();
        roots.sort_unstable();
        let mut disabled = d.disabled.clone();
        disabled.sort_unstable();
        out.changes.push(Change::PutDrain(Box::new(Drain {
            uuid: d.uuid,
            roots,
            disabled,
            claims: d
                .claims
                .iter()
                .map(|c| DrainClaim {
                    consumer: c.consumer,
                    claim: c.claim,
                })
                .collect(),
            state,
            created_at: d.created_at,
            ended_at: d.ended_at,
        })));
    }
}

// ----- shapes -----

/// Each shape: a name of the form, once, with a request of a length allot keeps
/// (the request's parameters are the server's to read, when it counts the shape).
fn check_shapes(shapes: &[DumpShape], out: &mut Findings) {
    let mut seen: HashSet<&str> = HashSet::new();
    if shapes.len() > MAX_SHAPES {
        out.problems.add(format!(
            "{} shapes, more than the {MAX_SHAPES} allot keeps",
            shapes.len()
        ));
    }
    for s in shapes {
        if !seen.insert(&s.name) {
            out.problems
                .add(format!("shape {:?} appears twice", s.name));
            continue;
        }
        let Some(name) = ShapeName::parse(&s.name) else {
            out.problems.add(format!(
                "shape {:?}: not a shape name (1 to 255 characters, no control \
                 character or '/')",
                s.name
            ));
            continue;
        };
        if s.request.len() > MAX_REQUEST_BYTES {
            out.problems.add(format!(
                "shape {:?}: its request is longer than {MAX_REQUEST_BYTES} bytes",
                s.name
            ));
            continue;
        }
        out.changes.push(Change::PutShape(Box::new(Shape {
            name,
            request: s.request.clone(),
            created_at: s.created_at,
            updated_at: s.updated_at,
        })));
    }
}

// ----- claims and their amounts -----

/// Each claim: unique, in a state that is one, with its amounts. A claim live when
/// the dump was taken counted against capacity then, so its amounts go into `used`.
fn check_claims<'d>(
    dump: &'d Dump,
    names: &Names,
    providers: &Providers,
    used: &mut Usage<'d>,
    out: &mut Findings,
) {
    let mut seen: HashSet<Uuid> = HashSet::new();
    for c in &dump.claims {
        if !seen.insert(c.uuid) {
            out.problems.add(format!("claim {} appears twice", c.uuid));
            continue;
        }
        let Some(state) = ClaimState::parse(&c.state) else {
            out.problems.add(format!(
                "claim {}: state {:?} is not pending, confirmed, released or expired",
                c.uuid, c.state
            ));
            continue;
        };
        let Some(amounts) = check_claim_amounts(c, state, names, providers, out) else {
            continue;
        };
        let claim = claim_record(c, state, amounts);
        if claim.live(dump.exported_at) {
            for a in &c.allocations {
                let total = used.entry((a.provider, &a.resource_class)).or_default();
                *total = total.saturating_add(a.amount);
            }
        }
        out.changes.push(Change::PutClaim(Box::new(claim)));
    }
}

/// A claim's amounts: each of a well-formed class; a pending claim's also on a
/// provider in the dump and of a known class, and one on a provider without an
/// inventory of the class is kept with a warning. Ended claims are not checked
/// against providers and classes: they may name ones deleted since. Returns the
/// amounts, sorted, or None where one was named as a problem.
fn check_claim_amounts(
    c: &DumpClaim,
    state: ClaimState,
    names: &Names,
    providers: &Providers,
    out: &mut Findings,
) -> Option<Vec<ClaimAmount>> {
    let mut amounts = Vec::new();
    let mut ok = true;
    for a in &c.allocations {
        let at = format!(
            "claim {}: {} on provider {}",
            c.uuid, a.resource_class, a.provider
        );
        if !is_well_formed_name(&a.resource_class) {
            out.problems.add(format!("{at}: not a resource class name"));
            ok = false;
            continue;
        }
        if state == ClaimState::Pending {
            if !providers.index.contains_key(&a.provider) {
                out.problems.add(format!(
                    "{at}: a pending claim on a provider not in the dump"
                ));
                ok = false;
                continue;
            }
            if !names.class_known(&a.resource_class) {
                out.problems
                    .add(format!("{at}: a class neither standard nor in the dump"));
                ok = false;
                continue;
            }
            if !providers
                .inventories
                .contains_key(&(a.provider, a.resource_class.as_str()))
            {
                out.warnings
                    .push(format!("{at}: the provider has no inventory of the class"));
            }
        }
        amounts.push(ClaimAmount {
            provider: a.provider,
            class: ResourceClass::new_unchecked(&a.resource_class), // Well formed.
            amount: a.amount,
        });
    }
    amounts.sort();
    ok.then_some(amounts)
}

/// The claim a dump's record describes, with its checked state and amounts.
fn claim_record(c: &DumpClaim, state: ClaimState, amounts: Vec<ClaimAmount>) -> Claim {
    Claim {
        uuid: c.uuid,
        consumer: c.consumer,
        project_id: Text::from(c.project_id.as_str()),
        user_id: Text::from(c.user_id.as_str()),
        consumer_type: c.consumer_type.as_deref().map(Text::from),
        tag: c.tag.as_deref().map(Text::from),
        allocations: amounts.into_boxed_slice(),
        state,
        created_at: c.created_at,
        expires_at: c.expires_at,
        ended_at: c.ended_at,
    }
}

// ----- usage against capacity -----

/// A warning for each inventory whose usage (allocations, and claims live when the
/// dump was taken) exceeds its capacity: kept, as the source holds it.
fn capacity_warnings(
    used: &Usage,
    inventories: &HashMap<(Uuid, &str), Inventory>,
    warnings: &mut Vec<String>,
) {
    for (&(provider, class), &total) in used {
        if let Some(inv) = inventories.get(&(provider, class)) {
            if !inv.fits(0, total) {
                warnings.push(format!(
                    "provider {provider}: {total} of {class} in use, above its capacity {} \
                     (kept: the inventory changed after the allocations were made; \
                     nothing more fits until usage falls below it)",
                    inv.capacity()
                ));
            }
        }
    }
}
