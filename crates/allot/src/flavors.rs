//! Nova's flavors as named shapes (issue 47): [`parse_flavor_list`] reads what
//! `openstack flavor list --long -f json` prints, and [`map`] turns one flavor into the
//! query string of `GET /allocation_candidates` that Nova's scheduler would send to
//! Placement for it, with the extra specs that string does not carry listed beside it.
//!
//! The mapping is Nova's own, read from its source (openstack/nova at 00a030403f67,
//! August 2026):
//!
//! | what the flavor says | what the request gets | where Nova does it |
//! |---|---|---|
//! | `vcpus` | `VCPU`, unless some group already names `VCPU` or `PCPU` | `nova/scheduler/utils.py` `ResourceRequest.from_request_spec` |
//! | `ram` | `MEMORY_MB`, unless some group names it | same |
//! | `disk + ephemeral + ceil(swap / 1024)` | `DISK_GB`, unless some group names it; nothing when 0 | same, with `nova/compute/utils.py` `convert_mb_to_ceil_gb` |
//! | `resources[S]:CLASS=N` | `resources[S]=CLASS:N` (the suffix `S` as in 1.33) | `_process_extra_specs`, `RequestGroup.add_resource` (`nova/objects/request_spec.py`) |
//! | `trait[S]:NAME=required\|forbidden` | `required[S]=NAME` or `!NAME` | `_process_extra_specs`, `RequestGroup.add_trait` |
//! | `group_policy=none\|isolate` | `group_policy` | `_add_group_policy` |
//! | `hw:cpu_policy=dedicated` | `PCPU` = vcpus instead of `VCPU` | `_translate_pinning_policies` |
//! | `hw:cpu_policy=mixed` with `hw:cpu_dedicated_mask` (or `hw:cpu_realtime_mask`) | `PCPU` = the masked CPUs, `VCPU` = the rest | same, with `nova/virt/hardware.py` `get_dedicated_cpu_constraint`, `get_realtime_cpu_constraint` |
//! | `hw:emulator_threads_policy=isolate` (dedicated or mixed) | one more `PCPU` | same |
//! | `hw:cpu_thread_policy=isolate\|require` | `HW_CPU_HYPERTHREADING` forbidden / required | same |
//! | `hw:mem_encryption=true` (`hw:mem_encryption_model`) | `MEM_ENCRYPTION_CONTEXT:1`, `HW_CPU_X86_AMD_SEV[_ES\|_SNP]` | `_translate_mem_encryption_request`, `hardware.get_mem_encryption_constraint` |
//! | `hw:pmem=L1,L2,..` | `CUSTOM_PMEM_NAMESPACE_<L>:count` | `_translate_vpmems_request`, `hardware.get_vpmems` |
//! | `hw:tpm_version`, `hw:tpm_model` | `COMPUTE_SECURITY_TPM_*` | `_translate_vtpm_request`, `hardware.get_vtpm_constraint` |
//! | `hw:pci_numa_affinity_policy=socket` | `COMPUTE_SOCKET_PCI_NUMA_AFFINITY` | `_translate_pci_numa_affinity_policy` |
//! | `os:secure_boot=required` | `COMPUTE_SECURITY_UEFI_SECURE_BOOT` | `_translate_secure_boot_request` |
//! | `hw:maxphysaddr_mode` | `COMPUTE_ADDRESS_SPACE_PASSTHROUGH\|EMULATED` | `_translate_maxphysaddr_request` |
//!
//! Standard class and trait names are those allot knows (`allot_core::standard`): a
//! newer one Nova knows would be refused by allot's own query parser anyway.
//!
//! Classes whose amount ends at 0 are left out and groups left empty dropped
//! (`strip_zeros`), so `resources:VCPU=0` drops `VCPU` as Nova drops it. The string is
//! Nova's `to_querystring` without its `limit` (a scheduler setting, not the flavor's):
//! parameters sorted by name, each group's `CLASS:N` sorted as text, its required
//! traits sorted and then its forbidden ones; only `,`, `:` and `!` are left unencoded.
//!
//! A flavor Nova would refuse is an error naming the flavor and the spec: values its
//! API's extra spec validators refuse (`nova/api/validation/extra_specs/`), the CPU
//! rules `hardware.numa_get_constraints` checks when a server is created, a negative
//! amount (the scheduler drops it with a warning), and what Placement refuses at the
//! microversion Nova asks at (1.36): several suffixed groups with no `group_policy`, a
//! suffixed group with no resources, a trait both required and forbidden in a group.
//!
//! What a flavor alone cannot say is left out: boot from volume (Nova then leaves the
//! root disk out of `DISK_GB`; the shape counts it), the image's properties, ports'
//! and Cyborg device profiles' groups, `pci_passthrough:alias` (PCI in Placement needs
//! the deployment's aliases), Nova's request filters (`COMPUTE_STATUS_DISABLED`,
//! tenant and availability zone aggregates, image type traits), and the second query
//! with `VCPU` instead of `PCPU` that Nova sends for hosts still on `vcpu_pin_set`.
//! Every extra spec the translation does not read is in [`Mapped::unmapped`].

use std::collections::{BTreeMap, BTreeSet};

use allot_core::standard;
use serde_json::{Map, Value};

/// One flavor as `openstack flavor list --long -f json` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flavor {
    /// Nova's flavor id ("ID").
    pub id: String,
    /// "Name".
    pub name: String,
    /// "VCPUs".
    pub vcpus: u64,
    /// "RAM", in MB.
    pub ram_mb: u64,
    /// "Disk": the root disk in GB.
    pub disk_gb: u64,
    /// "Ephemeral", in GB.
    pub ephemeral_gb: u64,
    /// "Swap", in MB (`""` for none from older clients).
    pub swap_mb: u64,
    /// "Properties": the flavor's extra specs.
    pub extra_specs: BTreeMap<String, String>,
}

/// The flavors of `openstack flavor list --long -f json`'s output, a JSON array of
/// objects. Properties are taken in both forms python-openstackclient has printed:
/// a JSON object since it formats them with `format_columns.DictColumn` (commit
/// ad3369ed1, "Fix formatting of the flavor properties", release 5.5.0), and before
/// that a text of `key='value'` pairs joined by `, ` (osc-lib `utils.format_dict`).
/// `--long` adds "Swap", "RXTX Factor" and "Properties" to the list's columns
/// (`openstackclient/compute/v2/flavor.py`, `ListFlavor.take_action`).
pub fn parse_flavor_list(json: &str) -> Result<Vec<Flavor>, String> {
    let value: Value =
        serde_json::from_str(json).map_err(|e| format!("the flavor list is not JSON: {e}"))?;
    let Value::Array(rows) = value else {
        return Err(
            "the flavor list is not a JSON array (as `openstack flavor list \
                    --long -f json` prints it)"
                .to_owned(),
        );
    };
    rows.iter()
        .enumerate()
        .map(|(index, row)| flavor_of(index, row))
        .collect()
}

/// One entry of the list; errors name the entry by position and, once known, name.
fn flavor_of(index: usize, row: &Value) -> Result<Flavor, String> {
    let Value::Object(row) = row else {
        return Err(format!("entry {index} is not a JSON object"));
    };
    let name = match row.get("Name") {
        Some(Value::String(name)) => name.clone(),
        _ => return Err(format!("entry {index}: no text field \"Name\"")),
    };
    let at = |e: String| format!("entry {index} ({name:?}): {e}");
    let id = match row.get("ID") {
        Some(Value::String(id)) => id.clone(),
        Some(Value::Number(id)) => id.to_string(),
        _ => return Err(at("no field \"ID\"".to_owned())),
    };
    Ok(Flavor {
        id,
        vcpus: count(row, "VCPUs", false).map_err(at)?,
        ram_mb: count(row, "RAM", false).map_err(at)?,
        disk_gb: count(row, "Disk", false).map_err(at)?,
        ephemeral_gb: count(row, "Ephemeral", false).map_err(at)?,
        // Nova answers "" for no swap before compute microversion 2.75, and older
        // clients print what it answered.
        swap_mb: count(row, "Swap", true).map_err(at)?,
        extra_specs: properties(row.get("Properties")).map_err(at)?,
        name,
    })
}

/// A whole number field: a JSON number, or a text of digits; `""` is 0 where allowed.
fn count(row: &Map<String, Value>, field: &str, empty_is_zero: bool) -> Result<u64, String> {
    match row.get(field) {
        None => Err(format!(
            "no field {field:?} (is it the output of `openstack flavor list --long -f json`?)"
        )),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| format!("field {field:?} is {n}, not a whole number of 0 or more")),
        Some(Value::String(s)) if s.is_empty() && empty_is_zero => Ok(0),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| format!("field {field:?} is {s:?}, not a whole number of 0 or more")),
        Some(other) => Err(format!("field {field:?} is {other}, not a whole number")),
    }
}

/// "Properties": an object of texts (recent clients), or `key='value', ...` (older).
fn properties(value: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    match value {
        None => Err("no field \"Properties\" (the extra specs: list with --long)".to_owned()),
        Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(specs)) => specs
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => Ok((key.clone(), text.clone())),
                // Nova keeps extra specs as text; a number is its text.
                Value::Number(n) => Ok((key.clone(), n.to_string())),
                other => Err(format!(
                    "field \"Properties\": {key:?} is {other}, not a text"
                )),
            })
            .collect(),
        Some(Value::String(text)) => properties_text(text),
        Some(other) => Err(format!(
            "field \"Properties\" is {other}, neither an object nor a text"
        )),
    }
}

/// osc-lib's `format_dict`: `a='1', b='2'`, sorted by key. A value may hold `', ` in
/// principle, so a value ends only at a `'` followed by the end or by `, key='`.
fn properties_text(text: &str) -> Result<BTreeMap<String, String>, String> {
    let bad = |why: &str| format!("field \"Properties\" {text:?}: {why}");
    let mut specs = BTreeMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let eq = rest.find("='").ok_or_else(|| bad("expected key='value'"))?;
        let key = &rest[..eq];
        let after = &rest[eq + 2..];
        let end = value_end(after).ok_or_else(|| bad("a value's closing quote is missing"))?;
        if key.is_empty()
            || specs
                .insert(key.to_owned(), after[..end].to_owned())
                .is_some()
        {
            return Err(bad("an empty or repeated key"));
        }
        rest = &after[end + 1..];
        if !rest.is_empty() {
            rest = rest
                .strip_prefix(", ")
                .ok_or_else(|| bad("pairs are not separated by \", \""))?;
        }
    }
    Ok(specs)
}

/// Where the value starting `text` ends: the first `'` after which the text ends or
/// the next pair (`, key='`) begins.
fn value_end(text: &str) -> Option<usize> {
    text.match_indices('\'').map(|(at, _)| at).find(|&at| {
        let rest = &text[at + 1..];
        rest.is_empty()
            || rest.strip_prefix(", ").is_some_and(|next| {
                next.find("='")
                    .is_some_and(|eq| eq > 0 && !next[..eq].contains(['\'', ',', ' ']))
            })
    })
}

/// What a flavor maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// The flavor's name, the shape's.
    pub name: String,
    /// The query string of `GET /allocation_candidates` (microversion 1.39 syntax).
    pub request: String,
    /// Every extra spec the translation to Placement does not read, key and value, by
    /// key: what the scheduler's filters or the compute host decide instead.
    pub unmapped: Vec<(String, String)>,
}

/// The request Nova's scheduler would send to Placement for `flavor`, or an error
/// naming the flavor and the spec for a flavor Nova would refuse. The root disk is
/// always counted: a flavor alone cannot know that a server boots from a volume, for
/// which Nova leaves it out of `DISK_GB`.
pub fn map(flavor: &Flavor) -> Result<Mapped, String> {
    let name = &flavor.name;
    let request = translate(flavor).map_err(|e| format!("flavor {name:?}: {e}"))?;
    let query = request
        .query()
        .map_err(|e| format!("flavor {name:?}: {e}"))?;
    let unmapped = flavor
        .extra_specs
        .iter()
        .filter(|(key, _)| !request.read.contains(key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Ok(Mapped {
        name: flavor.name.clone(),
        request: query,
        unmapped,
    })
}

/// `ResourceRequest.from_request_spec` for a flavor with no image, in Nova's order.
fn translate(flavor: &Flavor) -> Result<Request, String> {
    let mut request = Request::default();
    extra_specs(flavor, &mut request)?;
    let cpus = cpu_constraints(flavor)?;
    pinning(flavor, &cpus, &mut request);
    defaults(flavor, &mut request);
    memory_and_devices(flavor, &mut request)?;
    security_traits(flavor, &mut request)?;
    request.strip_zeros();
    Ok(request)
}

/// One request group: `resources[S]` and `required[S]`.
#[derive(Debug, Default)]
struct Group {
    resources: BTreeMap<String, u64>,
    required: BTreeSet<String>,
    forbidden: BTreeSet<String>,
}

/// Nova's `ResourceRequest`: groups by suffix ("" the unsuffixed one), the policy, and
/// the extra specs the translation read.
#[derive(Debug, Default)]
struct Request {
    groups: BTreeMap<String, Group>,
    group_policy: Option<&'static str>,
    read: BTreeSet<String>,
}

impl Request {
    /// Sets the amount, as `RequestGroup.add_resource` does (the last one wins).
    fn add_resource(&mut self, suffix: &str, class: &str, amount: u64) {
        let group = self.groups.entry(suffix.to_owned()).or_default();
        group.resources.insert(class.to_owned(), amount);
    }

    fn add_trait(&mut self, suffix: &str, name: &str, required: bool) {
        let group = self.groups.entry(suffix.to_owned()).or_default();
        let set = if required {
            &mut group.required
        } else {
            &mut group.forbidden
        };
        set.insert(name.to_owned());
    }

    /// Whether some group names `class`, with any amount, 0 included
    /// (`merged_resources`): then the flavor's own number is not added.
    fn names(&self, class: &str) -> bool {
        self.groups
            .values()
            .any(|g| g.resources.contains_key(class))
    }

    /// The value of `key` in `flavor`'s extra specs, which the translation reads.
    fn read<'f>(&mut self, flavor: &'f Flavor, key: &str) -> Option<&'f str> {
        let value = flavor.extra_specs.get(key)?;
        self.read.insert(key.to_owned());
        Some(value)
    }

    fn strip_zeros(&mut self) {
        for group in self.groups.values_mut() {
            group.resources.retain(|_, amount| *amount > 0);
        }
        self.groups.retain(|_, g| {
            !(g.resources.is_empty() && g.required.is_empty() && g.forbidden.is_empty())
        });
    }

    /// `to_querystring` without `limit`, after Placement's own checks at 1.36.
    fn query(&self) -> Result<String, String> {
        if self.groups.is_empty() {
            return Err("it asks Placement for nothing (no resources, no traits)".to_owned());
        }
        let mut params = Vec::new();
        if let Some(policy) = self.group_policy {
            params.push(("group_policy".to_owned(), policy.to_owned()));
        }
        for (suffix, group) in &self.groups {
            if let Some(both) = group.required.intersection(&group.forbidden).next() {
                return Err(format!(
                    "trait {both} is both required and forbidden in group {suffix:?}, \
                     which Placement refuses"
                ));
            }
            if group.resources.is_empty() && !suffix.is_empty() {
                return Err(format!(
                    "group {suffix:?} asks for no resources, which Placement refuses \
                     (from 1.36, unless in a same_subtree, which a flavor cannot say)"
                ));
            }
            let mut amounts: Vec<String> = group
                .resources
                .iter()
                .map(|(c, n)| format!("{c}:{n}"))
                .collect();
            amounts.sort();
            if !amounts.is_empty() {
                params.push((format!("resources{suffix}"), amounts.join(",")));
            }
            let traits: Vec<String> = (group.required.iter().cloned())
                .chain(group.forbidden.iter().map(|t| format!("!{t}")))
                .collect();
            if !traits.is_empty() {
                params.push((format!("required{suffix}"), traits.join(",")));
            }
        }
        let suffixed = self.groups.keys().filter(|s| !s.is_empty()).count();
        if suffixed > 1 && self.group_policy.is_none() {
            return Err(
                "several suffixed groups and no group_policy, which Placement \
                        refuses"
                    .to_owned(),
            );
        }
        params.sort();
        let pairs: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        Ok(pairs.join("&"))
    }
}

/// Percent-encodes all but the unreserved characters and `,`, `:`, `!`, which a query
/// may hold as they are (RFC 3986) and which Placement's parameters are made of.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~,:!".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `_process_extra_specs`: `group_policy`, `resources[S]:CLASS`, `trait[S]:NAME`, with
/// the values the API's validators (`resources.py`, `traits.py`, `null.py`) allow.
fn extra_specs(flavor: &Flavor, request: &mut Request) -> Result<(), String> {
    for (key, value) in &flavor.extra_specs {
        if key == "group_policy" {
            request.group_policy = Some(one_of(key, value, &["none", "isolate"])?);
            request.read.insert(key.clone());
            continue;
        }
        let Some((is_resource, suffix, name)) = granular_key(key) else {
            continue;
        };
        request.read.insert(key.clone());
        if is_resource {
            if !standard::RESOURCE_CLASSES.contains(&name) && !custom(name) {
                return Err(format!(
                    "{key}: {name:?} is neither a standard resource class nor CUSTOM_[A-Z0-9_]+"
                ));
            }
            let amount = amount(value).map_err(|why| format!("{key}={value}: {why}"))?;
            request.add_resource(suffix, name, amount);
        } else {
            if !standard::TRAITS.contains(&name) && !custom(name) {
                return Err(format!(
                    "{key}: {name:?} is neither a standard trait nor CUSTOM_[A-Z0-9_]+"
                ));
            }
            let required = one_of(key, value, &["required", "forbidden"])? == "required";
            request.add_trait(suffix, name, required);
        }
    }
    Ok(())
}

/// Nova's `XS_KEYPAT`, `^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$`: whether it is
/// a resource (else a trait), the suffix ("" for none) and the name.
fn granular_key(key: &str) -> Option<(bool, &str, &str)> {
    let (is_resource, rest) = match key.strip_prefix("resources") {
        Some(rest) => (true, rest),
        None => (false, key.strip_prefix("trait")?),
    };
    let (suffix, name) = rest.split_once(':')?;
    let suffix_ok = suffix.len() <= 64
        && suffix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    suffix_ok.then_some((is_resource, suffix, name))
}

/// `CUSTOM_[A-Z0-9_]+`, the custom names the API's validators allow.
fn custom(name: &str) -> bool {
    name.strip_prefix("CUSTOM_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    })
}

/// An amount as `RequestGroup.add_resource` takes it: Python's `int()`, not negative.
fn amount(value: &str) -> Result<u64, String> {
    let n: i64 = value
        .trim()
        .parse()
        .map_err(|_| "not an integer".to_owned())?;
    u64::try_from(n).map_err(|_| "a negative amount, which Nova's scheduler drops".to_owned())
}

/// `value` if it is one of `allowed` (compared as Nova does, exactly), else an error.
fn one_of(key: &str, value: &str, allowed: &[&'static str]) -> Result<&'static str, String> {
    allowed
        .iter()
        .find(|a| **a == value)
        .copied()
        .ok_or_else(|| format!("{key}={value}: not one of {}", allowed.join(", ")))
}

/// An optional enumerated spec read as `hardware.py` reads them: unset or `""` is none.
fn choice(
    flavor: &Flavor,
    key: &str,
    allowed: &[&'static str],
) -> Result<Option<&'static str>, String> {
    match flavor.extra_specs.get(key).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(value) => one_of(key, value, allowed).map(Some),
    }
}

/// A boolean spec as the API's validators take it (oslo `bool_from_string`, strict);
/// unset is none.
fn boolean(flavor: &Flavor, key: &str) -> Result<Option<bool>, String> {
    let Some(value) = flavor.extra_specs.get(key) else {
        return Ok(None);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Ok(Some(true)),
        "0" | "f" | "false" | "off" | "n" | "no" => Ok(Some(false)),
        _ => Err(format!("{key}={value}: not a boolean")),
    }
}

/// `hw:cpu_policy` (`fields.CPUAllocationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CpuPolicy {
    Dedicated,
    Shared,
    Mixed,
}

/// What the CPU specs ask, once `hardware.numa_get_constraints` has checked them.
#[derive(Debug)]
struct Cpus {
    /// The flavor's `hw:cpu_policy` (`get_cpu_policy_constraint`).
    policy: Option<CpuPolicy>,
    /// `hw:cpu_thread_policy`.
    thread: Option<&'static str>,
    /// `hw:emulator_threads_policy`.
    emulator: Option<&'static str>,
    /// `hw:cpu_dedicated_mask`'s CPUs.
    dedicated: Option<BTreeSet<i64>>,
    /// The realtime CPUs, when `hw:cpu_realtime` is on.
    realtime: Option<BTreeSet<i64>>,
}

/// The CPU specs, with the errors `numa_get_constraints` raises when a server is made.
fn cpu_constraints(flavor: &Flavor) -> Result<Cpus, String> {
    let policy = match choice(flavor, "hw:cpu_policy", &["dedicated", "shared", "mixed"])? {
        Some("dedicated") => Some(CpuPolicy::Dedicated),
        Some("mixed") => Some(CpuPolicy::Mixed),
        Some(_) => Some(CpuPolicy::Shared),
        None => None,
    };
    let thread = choice(
        flavor,
        "hw:cpu_thread_policy",
        &["prefer", "isolate", "require"],
    )?;
    let emulator = choice(flavor, "hw:emulator_threads_policy", &["share", "isolate"])?;
    let cpus = Cpus {
        policy,
        thread,
        emulator,
        realtime: realtime_cpus(flavor, emulator.is_some())?,
        dedicated: dedicated_cpus(flavor)?,
    };
    check_cpus(flavor, &cpus)?;
    Ok(cpus)
}

/// `numa_get_constraints`' rules between the CPU policy, explicit `VCPU`/`PCPU`
/// amounts, `HW_CPU_HYPERTHREADING`, the thread and emulator policies and the masks.
fn check_cpus(flavor: &Flavor, cpus: &Cpus) -> Result<(), String> {
    let (vcpu, pcpu) = explicit_cpus(flavor);
    if cpus.policy.is_some() && (vcpu > 0 || pcpu > 0) {
        return Err("resources:VCPU or resources:PCPU together with hw:cpu_policy".to_owned());
    }
    if vcpu > 0 && pcpu > 0 {
        return Err("both resources:VCPU and resources:PCPU".to_owned());
    }
    let isolate = cpus.emulator == Some("isolate");
    let mut policy = cpus.policy;
    if pcpu > 0 {
        let want = flavor.vcpus.saturating_add(u64::from(isolate));
        if pcpu != want {
            return Err(format!(
                "resources:PCPU={pcpu}: must be the flavor's vcpus ({}){}",
                flavor.vcpus,
                if isolate {
                    " + 1 for hw:emulator_threads_policy=isolate"
                } else {
                    ""
                }
            ));
        }
        policy = Some(CpuPolicy::Dedicated);
    }
    if vcpu > 0 {
        policy = Some(CpuPolicy::Shared);
    }
    let hyperthreading = hyperthreading_trait(flavor);
    if cpus.thread.is_some() && hyperthreading.is_some() {
        return Err("trait:HW_CPU_HYPERTHREADING together with hw:cpu_thread_policy".to_owned());
    }
    let thread = cpus.thread.is_some() || hyperthreading.is_some();
    match policy {
        None | Some(CpuPolicy::Shared) => {
            let needs_pinning = if thread {
                Some("a CPU thread policy (hw:cpu_thread_policy or trait:HW_CPU_HYPERTHREADING)")
            } else if isolate {
                Some("hw:emulator_threads_policy=isolate")
            } else if cpus.dedicated.is_some() {
                Some("hw:cpu_dedicated_mask")
            } else if cpus.realtime.is_some() {
                Some("hw:cpu_realtime")
            } else {
                None
            };
            match needs_pinning {
                Some(what) => Err(format!("{what} needs hw:cpu_policy dedicated or mixed")),
                None => Ok(()),
            }
        }
        Some(CpuPolicy::Dedicated) if cpus.dedicated.is_some() => {
            Err("hw:cpu_dedicated_mask needs hw:cpu_policy=mixed, not dedicated".to_owned())
        }
        Some(CpuPolicy::Dedicated) => Ok(()),
        Some(CpuPolicy::Mixed) => match (&cpus.realtime, &cpus.dedicated) {
            (Some(_), Some(_)) => Err("hw:cpu_policy=mixed with both hw:cpu_dedicated_mask \
                                       and hw:cpu_realtime_mask"
                .to_owned()),
            (None, None) => Err("hw:cpu_policy=mixed needs hw:cpu_dedicated_mask or \
                                 hw:cpu_realtime_mask"
                .to_owned()),
            _ => Ok(()),
        },
    }
}

/// `hardware._get_vcpu_pcpu_resources`: the `VCPU` and `PCPU` amounts of the
/// unsuffixed group and the numbered ones only (its pattern is
/// `resources([1-9][0-9]*)?:`; other suffixes escape its checks, as in Nova).
fn explicit_cpus(flavor: &Flavor) -> (u64, u64) {
    let (mut vcpu, mut pcpu) = (0, 0);
    for (key, value) in &flavor.extra_specs {
        let Some((true, suffix, class)) = granular_key(key) else {
            continue;
        };
        if !numbered_or_none(suffix) {
            continue;
        }
        // A bad amount is an error already (`extra_specs` runs first).
        let n = amount(value).unwrap_or(0);
        match class {
            "VCPU" => vcpu = n.saturating_add(vcpu),
            "PCPU" => pcpu = n.saturating_add(pcpu),
            _ => {}
        }
    }
    (vcpu, pcpu)
}

/// `([1-9][0-9]*)?`.
fn numbered_or_none(suffix: &str) -> bool {
    suffix.is_empty() || (!suffix.starts_with('0') && suffix.bytes().all(|b| b.is_ascii_digit()))
}

/// `hardware._get_hyperthreading_trait`: the value of the first
/// `trait([1-9][0-9]*)?:HW_CPU_HYPERTHREADING`.
fn hyperthreading_trait(flavor: &Flavor) -> Option<&str> {
    flavor.extra_specs.iter().find_map(|(key, value)| {
        let (is_resource, suffix, name) = granular_key(key)?;
        let found = !is_resource && numbered_or_none(suffix) && name == "HW_CPU_HYPERTHREADING";
        found.then_some(value.as_str())
    })
}

/// `hardware.get_realtime_cpu_constraint` for a flavor: with `hw:cpu_realtime` on,
/// `hw:cpu_realtime_mask`'s CPUs, or all of them when unmasked.
fn realtime_cpus(flavor: &Flavor, emulator_policy: bool) -> Result<Option<BTreeSet<i64>>, String> {
    if boolean(flavor, "hw:cpu_realtime")? != Some(true) {
        return Ok(None);
    }
    let all = all_cpus(flavor)?;
    let key = "hw:cpu_realtime_mask";
    let realtime = match flavor.extra_specs.get(key) {
        Some(mask) if !mask.is_empty() => mask_cpus(flavor, key, mask)?,
        _ => all.clone(),
    };
    if realtime.is_empty() {
        return Err(format!("{key}: no realtime CPUs"));
    }
    if realtime == all && !emulator_policy {
        return Err(format!(
            "hw:cpu_realtime: {key} must leave a CPU out, or hw:emulator_threads_policy be set"
        ));
    }
    if !realtime.is_subset(&all) {
        return Err(format!("{key}: CPUs beyond the flavor's {}", flavor.vcpus));
    }
    Ok(Some(realtime))
}

/// `hardware.get_dedicated_cpu_constraint`: `hw:cpu_dedicated_mask`'s CPUs, which
/// must leave at least one shared and be the flavor's.
fn dedicated_cpus(flavor: &Flavor) -> Result<Option<BTreeSet<i64>>, String> {
    let key = "hw:cpu_dedicated_mask";
    let Some(mask) = flavor.extra_specs.get(key).filter(|m| !m.is_empty()) else {
        return Ok(None);
    };
    let dedicated = mask_cpus(flavor, key, mask)?;
    let all = all_cpus(flavor)?;
    if dedicated.is_empty() || all.difference(&dedicated).next().is_none() {
        return Err(format!(
            "{key}={mask}: must dedicate some CPUs and leave some shared"
        ));
    }
    if !dedicated.is_subset(&all) {
        return Err(format!(
            "{key}={mask}: CPUs beyond the flavor's {}",
            flavor.vcpus
        ));
    }
    Ok(Some(dedicated))
}

/// The flavor's CPUs, `0..vcpus`, for a flavor with masks; bounded as masks are.
fn all_cpus(flavor: &Flavor) -> Result<BTreeSet<i64>, String> {
    match i64::try_from(flavor.vcpus) {
        Ok(vcpus) if vcpus <= MAX_CPU + 1 => Ok((0..vcpus).collect()),
        _ => Err(format!(
            "CPU masks on {} vcpus, beyond {MAX_CPU}",
            flavor.vcpus
        )),
    }
}

/// A mask as `hardware.py` reads one: starting with `^`, what it leaves of all the
/// flavor's CPUs.
fn mask_cpus(flavor: &Flavor, key: &str, mask: &str) -> Result<BTreeSet<i64>, String> {
    let spec = if mask.trim().starts_with('^') {
        format!("0-{},{mask}", i128::from(flavor.vcpus) - 1)
    } else {
        mask.to_owned()
    };
    parse_cpu_spec(&spec).map_err(|why| format!("{key}={mask}: {why}"))
}

/// The largest CPU number a mask may name here: Nova has none, but a set of every
/// CPU up to an absurd number would only cost memory.
const MAX_CPU: i64 = 65_535;

/// `hardware.parse_cpu_spec`: `1-4,^3,6`, ranges and single CPUs, `^` excluding.
fn parse_cpu_spec(spec: &str) -> Result<BTreeSet<i64>, String> {
    let number = |text: &str| -> Result<i64, String> {
        let n: i64 = text
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not a CPU number"))?;
        if n > MAX_CPU {
            return Err(format!("CPU {n} is beyond {MAX_CPU}"));
        }
        Ok(n)
    };
    let (mut take, mut reject) = (BTreeSet::new(), BTreeSet::new());
    for rule in spec.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        if let Some((start, end)) = rule.split_once('-') {
            let (set, start) = match start.strip_prefix('^') {
                Some(start) => (&mut reject, start),
                None => (&mut take, start),
            };
            let (start, end) = (number(start)?, number(end)?);
            if start > end {
                return Err(format!("invalid range {rule:?}"));
            }
            set.extend(start..=end);
        } else if let Some(cpu) = rule.strip_prefix('^') {
            reject.insert(number(cpu)?);
        } else {
            take.insert(number(rule)?);
        }
    }
    Ok(take.difference(&reject).copied().collect())
}

/// `_translate_pinning_policies`: `PCPU` for dedicated CPUs (and one more for isolated
/// emulator threads), a mixed flavor's split, and the thread policy's trait.
fn pinning(flavor: &Flavor, cpus: &Cpus, request: &mut Request) {
    for key in [
        "hw:cpu_policy",
        "hw:cpu_thread_policy",
        "hw:emulator_threads_policy",
    ] {
        request.read(flavor, key);
    }
    let pinned = match cpus.policy {
        Some(CpuPolicy::Dedicated) => flavor.vcpus,
        Some(CpuPolicy::Mixed) => {
            // Only a mixed flavor reads the masks here.
            request.read(flavor, "hw:cpu_dedicated_mask");
            request.read(flavor, "hw:cpu_realtime");
            if cpus.realtime.is_some() {
                request.read(flavor, "hw:cpu_realtime_mask");
            }
            let masked = cpus.dedicated.as_ref().or(cpus.realtime.as_ref());
            let pinned = masked.map_or(0, |m| m.len() as u64);
            request.add_resource("", "VCPU", flavor.vcpus.saturating_sub(pinned));
            pinned
        }
        Some(CpuPolicy::Shared) | None => 0,
    };
    if matches!(cpus.policy, Some(CpuPolicy::Dedicated | CpuPolicy::Mixed)) {
        let emulator = u64::from(cpus.emulator == Some("isolate"));
        request.add_resource("", "PCPU", pinned.saturating_add(emulator));
    }
    match cpus.thread {
        Some("isolate") => request.add_trait("", "HW_CPU_HYPERTHREADING", false),
        Some("require") => request.add_trait("", "HW_CPU_HYPERTHREADING", true),
        _ => {}
    }
}

/// `_translate_mem_encryption_request` and `_translate_vpmems_request`.
fn memory_and_devices(flavor: &Flavor, request: &mut Request) -> Result<(), String> {
    if request.read(flavor, "hw:mem_encryption").is_some()
        && boolean(flavor, "hw:mem_encryption")? == Some(true)
    {
        // The model is read only when encryption is asked for
        // (`hardware.get_mem_encryption_constraint`); AMD SEV is the default. Nova
        // also needs a UEFI image, which a flavor cannot say.
        request.read(flavor, "hw:mem_encryption_model");
        let model = choice(
            flavor,
            "hw:mem_encryption_model",
            &["amd-sev", "amd-sev-es", "amd-sev-snp"],
        )?;
        let trait_name = match model {
            Some("amd-sev-es") => "HW_CPU_X86_AMD_SEV_ES",
            Some("amd-sev-snp") => "HW_CPU_X86_AMD_SEV_SNP",
            _ => "HW_CPU_X86_AMD_SEV",
        };
        request.add_resource("", "MEM_ENCRYPTION_CONTEXT", 1);
        request.add_trait("", trait_name, true);
    }
    if let Some(labels) = request.read(flavor, "hw:pmem") {
        // The validator's pattern, `([a-zA-Z0-9_]+(,)?)+`.
        let valid = !labels.is_empty()
            && !labels.starts_with(',')
            && !labels.contains(",,")
            && labels
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b',');
        if !valid {
            return Err(format!(
                "hw:pmem={labels}: not a list of labels [a-zA-Z0-9_]+"
            ));
        }
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for label in labels.split(',').filter(|l| !l.is_empty()) {
            *counts.entry(pmem_class(label)).or_default() += 1;
        }
        for (class, n) in counts {
            request.add_resource("", &class, n);
        }
    }
    Ok(())
}

/// `orc.normalize_name("PMEM_NAMESPACE_" + label)`: every run of characters but
/// letters and digits becomes one `_`, then upper case, after `CUSTOM_`.
fn pmem_class(label: &str) -> String {
    let mut name = String::from("CUSTOM_");
    let mut in_run = false;
    for c in format!("PMEM_NAMESPACE_{label}").chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_uppercase());
            in_run = false;
        } else if !in_run {
            name.push('_');
            in_run = true;
        }
    }
    name
}

/// `_translate_vtpm_request`, `_translate_pci_numa_affinity_policy`,
/// `_translate_secure_boot_request` and `_translate_maxphysaddr_request`: required
/// traits in the unsuffixed group, with `hardware.py`'s checks of the values.
fn security_traits(flavor: &Flavor, request: &mut Request) -> Result<(), String> {
    request.read(flavor, "hw:tpm_version");
    if let Some(version) = choice(flavor, "hw:tpm_version", &["1.2", "2.0"])? {
        // The model is read only with a version (`hardware.get_vtpm_constraint`).
        request.read(flavor, "hw:tpm_model");
        let model = choice(flavor, "hw:tpm_model", &["tpm-tis", "tpm-crb"])?;
        if model == Some("tpm-crb") && version != "2.0" {
            return Err("hw:tpm_model=tpm-crb: only valid with hw:tpm_version=2.0".to_owned());
        }
        let model_trait = match model {
            Some("tpm-crb") => "COMPUTE_SECURITY_TPM_CRB",
            _ => "COMPUTE_SECURITY_TPM_TIS",
        };
        let version_trait = match version {
            "2.0" => "COMPUTE_SECURITY_TPM_2_0",
            _ => "COMPUTE_SECURITY_TPM_1_2",
        };
        request.add_trait("", model_trait, true);
        request.add_trait("", version_trait, true);
    }
    request.read(flavor, "hw:pci_numa_affinity_policy");
    let pci = ["required", "legacy", "preferred", "socket"];
    if choice(flavor, "hw:pci_numa_affinity_policy", &pci)? == Some("socket") {
        request.add_trait("", "COMPUTE_SOCKET_PCI_NUMA_AFFINITY", true);
    }
    request.read(flavor, "os:secure_boot");
    let secure_boot = ["required", "disabled", "optional"];
    if choice(flavor, "os:secure_boot", &secure_boot)? == Some("required") {
        request.add_trait("", "COMPUTE_SECURITY_UEFI_SECURE_BOOT", true);
    }
    request.read(flavor, "hw:maxphysaddr_mode");
    match choice(flavor, "hw:maxphysaddr_mode", &["passthrough", "emulate"])? {
        Some("passthrough") => request.add_trait("", "COMPUTE_ADDRESS_SPACE_PASSTHROUGH", true),
        Some(_) => request.add_trait("", "COMPUTE_ADDRESS_SPACE_EMULATED", true),
        None => {}
    }
    Ok(())
}

/// The flavor's own numbers, for the classes no group names
/// (`ResourceRequest.from_request_spec`).
fn defaults(flavor: &Flavor, request: &mut Request) {
    if !request.names("VCPU") && !request.names("PCPU") {
        request.add_resource("", "VCPU", flavor.vcpus);
    }
    if !request.names("MEMORY_MB") {
        request.add_resource("", "MEMORY_MB", flavor.ram_mb);
    }
    if !request.names("DISK_GB") {
        // `convert_mb_to_ceil_gb`: swap in MB, up to whole GB. Boot from volume would
        // leave `disk_gb` out; a flavor alone cannot know.
        let disk = flavor
            .disk_gb
            .saturating_add(flavor.ephemeral_gb)
            .saturating_add(flavor.swap_mb.div_ceil(1024));
        if disk > 0 {
            request.add_resource("", "DISK_GB", disk);
        }
    }
}

#[cfg(test)]
mod tests;
