//! `GET /allocation_candidates` (1.10): the candidates and what the client learns of
//! their providers. The largest body, and the one whose shape changes most across
//! microversions.
//!
//! The body can be megabytes, so it is not serialized from these types: [`body`]
//! writes it by hand with the pieces of [`super::write`], in the same bytes, and the
//! types stay as the shape it follows and the oracle its tests compare with.

use std::collections::BTreeMap;

use allot_core::candidates::{self as search, CandidateQuery, Candidates};
use allot_core::{ProviderId, State as View};
use serde::Serialize;
use uuid::Uuid;

use super::write::{self, UUID_LEN};
use super::Nullable;
use crate::microversion::Version;

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocationCandidates<'a> {
    /// The candidates, all in the form of the request's microversion.
    pub allocation_requests: Vec<AllocationRequest<'a>>,
    /// Every provider the candidates name (from 1.29 every provider of their trees),
    /// by uuid.
    pub provider_summaries: BTreeMap<Uuid, ProviderSummary<'a>>,
}

/// One candidate: what to `PUT` to `/allocations/{consumer}` to claim it. Its form
/// changed at 1.12 from a list of providers to an object keyed by provider uuid; the
/// variants serialize as the struct they hold, with no tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum AllocationRequest<'a> {
    /// Before 1.12.
    Listed(ListedRequest<'a>),
    /// From 1.12.
    Keyed(KeyedRequest<'a>),
}

/// A candidate before 1.12: a list of providers with their resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedRequest<'a> {
    /// One entry per provider, in the providers' creation order.
    pub allocations: Vec<ProviderResources<'a>>,
}

/// One provider's part of a [`ListedRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderResources<'a> {
    /// The provider.
    pub resource_provider: ProviderRef,
    /// Amount by class name.
    pub resources: BTreeMap<&'a str, u64>,
}

/// A provider named by its uuid alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderRef {
    /// The provider's uuid.
    pub uuid: Uuid,
}

/// A candidate from 1.12: providers keyed by uuid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyedRequest<'a> {
    /// What each provider gives.
    pub allocations: BTreeMap<Uuid, Resources<'a>>,
    /// From 1.34: for each request group (by suffix, `""` for the unsuffixed one), the
    /// providers that serve it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mappings: Option<BTreeMap<&'a str, Vec<Uuid>>>,
}

/// `{"resources": {class: amount}}`: one provider's part of a [`KeyedRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resources<'a> {
    /// Amount by class name.
    pub resources: BTreeMap<&'a str, u64>,
}

/// What the client learns of one provider, to weigh the candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderSummary<'a> {
    /// From 1.29: its parent, `null` for a root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_provider_uuid: Option<Nullable<Uuid>>,
    /// By class name: only the requested classes before 1.27, every inventory from 1.27.
    pub resources: BTreeMap<&'a str, SummaryResource>,
    /// From 1.29: the root of its tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_provider_uuid: Option<Uuid>,
    /// From 1.17: its traits, standard ones first, then custom ones in the order they
    /// were created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traits: Option<Vec<&'a str>>,
}

/// One inventory of a [`ProviderSummary`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SummaryResource {
    /// `(total - reserved) * allocation_ratio`, truncated (negative if `reserved`
    /// exceeds `total`).
    pub capacity: i64,
    /// What allocations use.
    pub used: u64,
}

/// The body of the answer in `form`, written straight from the search's answer and
/// the view: no map or list is built per candidate or per provider, each provider's
/// uuid is formatted once however many candidates name it, and one summary's lists
/// are refilled for every provider. The keys come out in the order the `BTreeMap`s of
/// [`AllocationCandidates`] would give them; the tests hold the two to the same bytes.
/// Written once, into a buffer sized for it up front.
pub fn body(view: &View, form: Form, query: &CandidateQuery, found: &Candidates) -> Vec<u8> {
    let answer = Answer::new(view, form, query, found);
    let mut out = Vec::with_capacity(answer.size_hint());
    answer.write(&mut out);
    out
}

/// Which forms and fields the body has at a microversion; the one place that maps
/// the microversion to this body's shape (the writer and the tests' oracle both
/// follow it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// Allocation requests as objects keyed by provider (1.12), not lists.
    pub keyed: bool,
    /// Allocation requests with `mappings` (1.34).
    pub with_mappings: bool,
    /// Summaries with traits (1.17).
    pub with_traits: bool,
    /// Summaries with every inventory, not only the requested classes (1.27).
    pub all_resources: bool,
    /// Summaries with parent and root (1.29).
    pub in_tree: bool,
}

impl Form {
    /// The form of the body at `version`.
    pub fn at(version: Version) -> Self {
        Form {
            keyed: version.at_least(12),
            with_mappings: version.at_least(34),
            with_traits: version.at_least(17),
            all_resources: version.at_least(27),
            in_tree: version.at_least(29),
        }
    }
}

/// The search's answer and what is needed to write it.
struct Answer<'a> {
    view: &'a View,
    query: &'a CandidateQuery,
    found: &'a Candidates,
    /// What the microversion asks for.
    form: Form,
    /// Indices of `found.classes`, sorted by name.
    class_order: Vec<usize>,
    /// Indices of `query.groups`, sorted by suffix.
    group_order: Vec<usize>,
    /// The providers to summarise, sorted by uuid.
    summaries: Vec<(Uuid, ProviderId)>,
    /// The summarised providers' uuids as text, sorted by provider id.
    texts: Vec<(ProviderId, [u8; UUID_LEN])>,
}

/// One allocation of a candidate: provider, class index, amount.
type Allocation = (ProviderId, usize, u64);

/// A candidate's allocations, one slice per provider (they are sorted by provider).
fn by_provider(allocations: &[Allocation]) -> impl Iterator<Item = &[Allocation]> {
    allocations.chunk_by(|a, b| a.0 == b.0)
}

/// Room for a quoted uuid and the punctuation around it.
const QUOTED_UUID: usize = UUID_LEN + 4;

impl<'a> Answer<'a> {
    fn new(view: &'a View, form: Form, query: &'a CandidateQuery, found: &'a Candidates) -> Self {
        // Class indices in name order, group indices in suffix order: sorted once, then
        // every candidate's maps are written in that order.
        let mut class_order: Vec<usize> = (0..found.classes.len()).collect();
        class_order.sort_by_key(|&i| found.class_name(i));
        let mut group_order: Vec<usize> = (0..query.groups.len()).collect();
        group_order.sort_by_key(|&i| query.groups[i].suffix.as_str());
        let mut summaries: Vec<(Uuid, ProviderId)> = found
            .summaries
            .iter()
            .map(|&id| (view.uuid_of(id), id))
            .collect();
        summaries.sort_unstable_by_key(|&(uuid, _)| uuid);
        summaries.dedup_by_key(|&mut (uuid, _)| uuid);
        // The summarised providers include every provider a candidate allocates from.
        let mut texts: Vec<(ProviderId, [u8; UUID_LEN])> = summaries
            .iter()
            .map(|(uuid, id)| (*id, write::uuid_text(uuid)))
            .collect();
        texts.sort_unstable_by_key(|&(id, _)| id);
        Answer {
            view,
            query,
            found,
            form,
            class_order,
            group_order,
            summaries,
            texts,
        }
    }

    /// A bound on the body's size, for its buffer: exact enough for the candidates
    /// (counted from their allocations), a generous guess per summary. Capacity that
    /// is never written is never touched, so it costs address space, not memory; what
    /// this saves is growing a megabytes-long buffer by doubling and copying it.
    fn size_hint(&self) -> usize {
        let classes: usize = 64;
        let mut size = 64;
        for r in &self.found.requests {
            size += 32;
            for part in by_provider(&r.allocations) {
                size += QUOTED_UUID + 48 + part.len() * (classes / 2 + write::INT);
            }
            if self.form.with_mappings {
                for (g, ids) in self.query.groups.iter().zip(&r.mappings) {
                    size += g.suffix.len() + 8 + ids.len() * QUOTED_UUID;
                }
            }
        }
        // A summary at 1.39 with a few inventories and traits is 300 to 400 bytes.
        size + self.summaries.len() * 768
    }

    /// A provider's uuid as text, formatted once per answer for the summarised ones.
    fn uuid_text(&self, id: ProviderId) -> [u8; UUID_LEN] {
        match self.texts.binary_search_by_key(&id, |&(id, _)| id) {
            Ok(at) => self.texts[at].1,
            // Not summarised (not expected): looked up in the view.
            Err(_) => write::uuid_text(&self.view.uuid_of(id)),
        }
    }

    /// A provider's quoted uuid.
    fn quoted_uuid(&self, out: &mut Vec<u8>, id: ProviderId) {
        write::quoted_uuid(out, &self.uuid_text(id));
    }

    /// `{"allocation_requests": [...], "provider_summaries": {...}}`.
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"allocation_requests\":[");
        for (i, request) in self.found.requests.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.write_request(out, request);
        }
        out.extend_from_slice(b"],\"provider_summaries\":{");
        let mut summary = search::ProviderSummary::default();
        let mut first = true;
        for &(uuid, id) in &self.summaries {
            if !self
                .view
                .fill_provider_summary(id, self.query.now, &mut summary)
            {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            write::quoted_uuid(out, &write::uuid_text(&uuid));
            out.push(b':');
            self.write_summary(out, &summary);
        }
        out.extend_from_slice(b"}}");
    }

    /// One candidate, as a list of providers (before 1.12) or an object keyed by
    /// provider uuid.
    fn write_request(&self, out: &mut Vec<u8>, request: &search::AllocationRequest) {
        let allocations = &request.allocations;
        if !self.form.keyed {
            // Providers in the order of their ids, as the search sorted them:
            // `{"resource_provider": {"uuid": ...}, "resources": {...}}` each.
            out.extend_from_slice(b"{\"allocations\":[");
            for (i, part) in by_provider(allocations).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"resource_provider\":{\"uuid\":");
                self.quoted_uuid(out, part[0].0);
                out.extend_from_slice(b"},\"resources\":");
                self.write_amounts(out, part);
                out.push(b'}');
            }
            out.extend_from_slice(b"]}");
            return;
        }
        // `{uuid: {"resources": {...}}}` in uuid order. A candidate has few providers:
        // they are sorted on the stack, each uuid looked up once; a list is allocated
        // only for a candidate of many providers.
        out.extend_from_slice(b"{\"allocations\":{");
        const ON_STACK: usize = 8;
        let mut few: [([u8; UUID_LEN], &[Allocation]); ON_STACK] = [([0; UUID_LEN], &[]); ON_STACK];
        let mut many: Vec<([u8; UUID_LEN], &[Allocation])> = Vec::new();
        let mut count = 0;
        for part in by_provider(allocations) {
            let entry = (self.uuid_text(part[0].0), part);
            if count < ON_STACK {
                few[count] = entry;
            } else {
                if many.is_empty() {
                    many.extend_from_slice(&few);
                }
                many.push(entry);
            }
            count += 1;
        }
        let parts = if count <= ON_STACK {
            &mut few[..count]
        } else {
            &mut many[..]
        };
        // The text orders as the uuid does.
        parts.sort_unstable_by_key(|&(text, _)| text);
        for (i, (text, part)) in parts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write::quoted_uuid(out, text);
            out.extend_from_slice(b":{\"resources\":");
            self.write_amounts(out, part);
            out.push(b'}');
        }
        out.push(b'}');
        if self.form.with_mappings {
            // Each group's providers, by suffix (from 1.34).
            out.extend_from_slice(b",\"mappings\":{");
            let groups = self
                .group_order
                .iter()
                .filter_map(|&g| Some((g, request.mappings.get(g)?)));
            for (i, (g, ids)) in groups.enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write::string(out, &self.query.groups[g].suffix);
                out.extend_from_slice(b":[");
                for (j, id) in ids.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    self.quoted_uuid(out, *id);
                }
                out.push(b']');
            }
            out.push(b'}');
        }
        out.push(b'}');
    }

    /// `{class: amount}` for one provider, in class name order.
    fn write_amounts(&self, out: &mut Vec<u8>, part: &[Allocation]) {
        out.push(b'{');
        let mut first = true;
        for &class in &self.class_order {
            let Some(a) = part.iter().find(|a| a.1 == class) else {
                continue;
            };
            if !first {
                out.push(b',');
            }
            first = false;
            write::string(out, self.found.class_name(class));
            out.push(b':');
            write::uint(out, a.2);
        }
        out.push(b'}');
    }

    /// One provider summary at the request's microversion.
    fn write_summary(&self, out: &mut Vec<u8>, summary: &search::ProviderSummary) {
        out.push(b'{');
        if self.form.in_tree {
            out.extend_from_slice(b"\"parent_provider_uuid\":");
            match &summary.parent_uuid {
                Some(parent) => write::quoted_uuid(out, &write::uuid_text(parent)),
                None => out.extend_from_slice(b"null"),
            }
            out.push(b',');
        }
        out.extend_from_slice(b"\"resources\":{");
        // The requested classes before 1.27, all of them from 1.27, by class name.
        let wanted = |r: &&search::SummaryResource| {
            self.form.all_resources || self.found.classes.iter().any(|c| c.as_str() == r.class)
        };
        let write_entry = |out: &mut Vec<u8>, i: usize, r: &search::SummaryResource| {
            if i > 0 {
                out.push(b',');
            }
            write::string(out, r.class);
            out.extend_from_slice(b":{\"capacity\":");
            write::int(out, r.capacity);
            out.extend_from_slice(b",\"used\":");
            write::uint(out, r.used);
            out.push(b'}');
        };
        let resources = &summary.resources;
        if resources.is_sorted_by_key(|r| r.class) {
            for (i, r) in resources.iter().filter(wanted).enumerate() {
                write_entry(out, i, r);
            }
        } else {
            // Not expected (the view keeps inventories by class), but the order on the
            // wire is the names' order whatever the view's is.
            let mut sorted: Vec<&search::SummaryResource> = resources.iter().collect();
            sorted.sort_by_key(|r| r.class);
            for (i, r) in sorted.into_iter().filter(wanted).enumerate() {
                write_entry(out, i, r);
            }
        }
        out.push(b'}');
        if self.form.in_tree {
            out.extend_from_slice(b",\"root_provider_uuid\":");
            write::quoted_uuid(out, &write::uuid_text(&summary.root_uuid));
        }
        if self.form.with_traits {
            out.extend_from_slice(b",\"traits\":[");
            for (i, t) in summary.traits.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write::string(out, t);
            }
            out.push(b']');
        }
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::candidates::parse;
    use allot_core::candidates::SearchOptions;
    use allot_core::ResourceClass;

    /// The answer as it was built before [`body`] wrote it straight from the search:
    /// the maps of [`AllocationCandidates`], the oracle for the bytes.
    fn render_by_maps<'a>(
        view: &'a View,
        form: Form,
        query: &'a CandidateQuery,
        found: &'a Candidates,
    ) -> AllocationCandidates<'a> {
        let Form {
            keyed,
            with_mappings,
            with_traits,
            all_resources,
            in_tree,
        } = form;

        let allocation_requests = found
            .requests
            .iter()
            .map(|r| {
                // Allocations grouped by provider (they are sorted by provider).
                let mut by_provider: Vec<(Uuid, BTreeMap<&str, u64>)> = Vec::new();
                for &(id, class, amount) in &r.allocations {
                    let uuid = view.uuid_of(id);
                    let name = found.class_name(class);
                    match by_provider.last_mut() {
                        Some((last, resources)) if *last == uuid => {
                            resources.insert(name, amount);
                        }
                        _ => by_provider.push((uuid, BTreeMap::from([(name, amount)]))),
                    }
                }
                if !keyed {
                    let allocations = by_provider
                        .into_iter()
                        .map(|(uuid, resources)| ProviderResources {
                            resource_provider: ProviderRef { uuid },
                            resources,
                        })
                        .collect();
                    return AllocationRequest::Listed(ListedRequest { allocations });
                }
                let mappings = with_mappings.then(|| {
                    query
                        .groups
                        .iter()
                        .zip(&r.mappings)
                        .map(|(g, ids)| {
                            let uuids = ids.iter().map(|id| view.uuid_of(*id)).collect();
                            (g.suffix.as_str(), uuids)
                        })
                        .collect()
                });
                AllocationRequest::Keyed(KeyedRequest {
                    allocations: by_provider
                        .into_iter()
                        .map(|(uuid, resources)| (uuid, Resources { resources }))
                        .collect(),
                    mappings,
                })
            })
            .collect();

        let mut provider_summaries = BTreeMap::new();
        for id in &found.summaries {
            let Some(s) = view.provider_summary(*id, query.now) else {
                continue;
            };
            let resources = s
                .resources
                .iter()
                .filter(|r| all_resources || found.classes.iter().any(|c| c.as_str() == r.class))
                .map(|r| {
                    let summary = SummaryResource {
                        capacity: r.capacity,
                        used: r.used,
                    };
                    (r.class, summary)
                })
                .collect();
            let summary = ProviderSummary {
                parent_provider_uuid: in_tree.then_some(s.parent_uuid),
                resources,
                root_provider_uuid: in_tree.then_some(s.root_uuid),
                traits: with_traits.then_some(s.traits),
            };
            provider_summaries.insert(s.uuid, summary);
        }
        AllocationCandidates {
            allocation_requests,
            provider_summaries,
        }
    }

    /// a sharing disk provider.
    fn cloud() -> View {
        use allot_core::{Change, Inventory, ResourceClass, TraitName};
        let mut s = View::new();
        let agg = Uuid::from_u128(0xa);
        let add = |s: &mut View, n: u128, parent: Option<u128>| {
            let parent = parent.map(|p| allot_core::ProviderRef::from(Uuid::from_u128(p)));
            let (_, c) = s
                .create_provider(Uuid::from_u128(n), &format!("p{n}"), parent, 0)
                .unwrap();
            s.apply(&c);
            s.provider_by_uuid(&Uuid::from_u128(n)).unwrap().id()
        };
        let root = add(&mut s, 1, None);
        let numa = [add(&mut s, 2, Some(1)), add(&mut s, 3, Some(1))];
        let gpus = [add(&mut s, 4, Some(2)), add(&mut s, 5, Some(2))];
        let other = add(&mut s, 6, None);
        let ss = add(&mut s, 7, None);
        let inv = |c: &str, t: u64| (ResourceClass::new_unchecked(c), Inventory::with_total(t));
        let mut changes = vec![
            Change::SetInventories(root, vec![inv("DISK_GB", 100)]),
            Change::SetInventories(other, vec![inv("VCPU", 4), inv("MEMORY_MB", 1024)]),
            Change::SetInventories(ss, vec![inv("DISK_GB", 1000)]),
            Change::SetTraits(
                ss,
                vec![TraitName::new_unchecked("MISC_SHARES_VIA_AGGREGATE")],
            ),
            Change::SetAggregates(ss, vec![agg]),
            Change::SetAggregates(root, vec![agg]),
            Change::SetTraits(root, vec![TraitName::new_unchecked("HW_CPU_X86_AVX2")]),
        ];
        for n in numa {
            changes.push(Change::SetInventories(
                n,
                vec![inv("VCPU", 8), inv("MEMORY_MB", 4096)],
            ));
            changes.push(Change::SetTraits(
                n,
                vec![TraitName::new_unchecked("HW_NUMA_ROOT")],
            ));
        }
        for g in gpus {
            changes.push(Change::SetInventories(g, vec![inv("VGPU", 1)]));
        }
        s.apply(&changes);
        s
    }

    /// Random query strings from the parameters' vocabulary never make the parser, the
    /// search or the renderer panic, at any microversion.
    #[test]
    fn random_queries_never_panic() {
        let view = cloud();
        let keys = [
            "resources",
            "resources1",
            "resources_A",
            "resources2",
            "required",
            "required1",
            "required_A",
            "member_of",
            "member_of1",
            "in_tree",
            "in_tree1",
            "group_policy",
            "limit",
            "root_required",
            "same_subtree",
            "bogus",
            "resources0",
        ];
        let values = [
            "VCPU:1",
            "VGPU:1",
            "DISK_GB:10",
            "VCPU:1,MEMORY_MB:512",
            "VGPU:2",
            "NOPE:1",
            "VCPU:0",
            "VCPU:-1",
            "VCPU:99999999999999999999999",
            "",
            ",",
            "VCPU",
            "HW_NUMA_ROOT",
            "!HW_NUMA_ROOT",
            "in:HW_NUMA_ROOT,HW_CPU_X86_AVX2",
            "CUSTOM_X",
            "!!X",
            "in:",
            "none",
            "isolate",
            "1",
            "0",
            "7",
            "_A,1",
            "_A",
            "1,2",
            ",,",
            "00000000-0000-0000-0000-00000000000a",
            "!00000000-0000-0000-0000-00000000000a",
            "in:00000000-0000-0000-0000-00000000000a,00000000-0000-0000-0000-00000000000b",
            "00000000-0000-0000-0000-000000000002",
            "00000000-0000-0000-0000-000000000001",
            "not-a-uuid",
            "%FF",
            "18446744073709551616",
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut answered = 0;
        for _ in 0..4000 {
            let n = next(6);
            let mut raw: Vec<String> = (0..n)
                .map(|_| format!("{}={}", keys[next(keys.len())], values[next(values.len())]))
                .collect();
            // Mostly with resources that exist.
            raw.insert(next(n + 1), format!("resources={}", values[next(4)]));
            let raw = raw.join("&");
            let version = Version(10 + next(30) as u16);
            let Ok(query) = parse(version, Some(&raw), 0, 0) else {
                continue;
            };
            for seed in [None, Some(3)] {
                let options = SearchOptions {
                    random_seed: seed,
                    ..Default::default()
                };
                if let Ok(found) = view.allocation_candidates(&query, &options) {
                    answered += usize::from(!found.requests.is_empty());
                    let form = Form::at(version);
                    let bytes = body(&view, form, &query, &found);
                    let maps = serde_json::to_vec(&render_by_maps(&view, form, &query, &found));
                    assert_eq!(bytes, maps.unwrap(), "{raw} at {version:?}");
                }
            }
        }
        assert!(answered > 300, "the queries reach the search ({answered})");
    }

    /// Candidates of more providers than `Answer::write_request` sorts on the stack are
    /// written as the maps wrote them.
    #[test]
    fn many_providers_in_one_candidate() {
        use allot_core::{Change, Inventory};
        let mut view = View::new();
        let (_, c) = view
            .create_provider(Uuid::from_u128(0xf00), "root", None, 0)
            .unwrap();
        view.apply(&c);
        let root = allot_core::ProviderRef::from(Uuid::from_u128(0xf00));
        let mut changes = Vec::new();
        // Uuids in an order unlike the creation order.
        for n in 0..10u128 {
            let uuid = Uuid::from_u128(((n * 7) % 10 + 1) << 64);
            let (_, c) = view
                .create_provider(uuid, &format!("gpu{n}"), Some(root.clone()), 0)
                .unwrap();
            view.apply(&c);
            let id = view.provider_by_uuid(&uuid).unwrap().id();
            let inv = (
                ResourceClass::new_unchecked("VGPU"),
                Inventory::with_total(1),
            );
            changes.push(Change::SetInventories(id, vec![inv]));
        }
        view.apply(&changes);
        let groups: Vec<String> = (1..=9).map(|n| format!("resources{n}=VGPU:1")).collect();
        let raw = format!("{}&group_policy=isolate&limit=3", groups.join("&"));
        for version in [29, 34, 39] {
            let version = Version(version);
            let query = parse(version, Some(&raw), 0, 0).unwrap();
            let found = view
                .allocation_candidates(&query, &SearchOptions::default())
                .unwrap();
            assert_eq!(found.requests.len(), 3);
            assert_eq!(found.requests[0].allocations.len(), 9);
            let form = Form::at(version);
            let bytes = body(&view, form, &query, &found);
            let maps = serde_json::to_vec(&render_by_maps(&view, form, &query, &found)).unwrap();
            assert_eq!(bytes, maps, "at {version:?}");
        }
    }
}
