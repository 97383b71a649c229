//! Placement's operations at microversion 1.39, one function per family of URLs, each
//! request body the schema its handler validates with.

use serde_json::json;

use super::components::{CONSUMER, PROVIDER};
use super::op::{op, Op};
use crate::schemas;

/// The microversion the document describes.
const AT: u16 = 39;

/// Every Placement operation.
pub(crate) fn operations() -> Vec<Op> {
    let mut ops = root_and_classes();
    ops.extend(traits());
    ops.extend(providers());
    ops.extend(inventories());
    ops.extend(provider_members());
    ops.extend(allocations());
    ops.extend(candidates());
    ops
}

fn root_and_classes() -> Vec<Op> {
    let class = |m, id| op(m, "/resource_classes/{name}", id).errors(&[404]);
    vec![
        op("GET", "/", "versions")
            .about("versions", "The version document", "Version discovery: the one version, with its minimum and maximum microversions. Needs no token.")
            .open()
            .json(200, "Versions"),
        op("GET", "/resource_classes", "listResourceClasses")
            .since(2)
            .about("resource_classes", "List resource classes", "From 1.2 (404 before). allot: `with_metadata=true` adds each class's `metadata`.")
            .query("with_metadata", json!({"type": "string", "enum": ["true", "false"]}), "allot: include each class's metadata.")
            .json(200, "ResourceClassList"),
        op("POST", "/resource_classes", "createResourceClass")
            .since(2)
            .about("resource_classes", "Create a custom resource class", "From 1.2. 201 with `Location` and no body. 409 when the name is taken.")
            .body(schemas::resource_class(), json!({"name": "CUSTOM_FUZZ_NEW"}))
            .errors(&[409])
            .empty(201),
        class("GET", "showResourceClass")
            .about("resource_classes", "Show a resource class", "From 1.2; `Last-Modified` from 1.15.")
            .json(200, "ResourceClass"),
        class("PUT", "putResourceClass")
            .about("resource_classes", "Create a custom resource class if missing", "From 1.7 a bodiless create-if-missing: 201 when made, 204 when it existed; a standard class or a name not `CUSTOM_`: 400. From 1.2 to 1.6 a rename, with the body `{\"name\": ...}` (200 with the class).")
            .errors(&[409])
            .empty(201)
            .empty(204),
        class("DELETE", "deleteResourceClass")
            .about("resource_classes", "Delete a custom resource class", "From 1.2. 400 for a standard class, 409 while an inventory uses it.")
            .errors(&[409])
            .empty(204),
        op("GET", "/resource_classes/{name}/metadata", "showClassMetadata")
            .about("extensions", "Show a resource class's metadata", "allot extension, at every microversion: `units`, `display_name` and `description`, each a string or null.")
            .errors(&[404])
            .json(200, "ClassMetadata"),
        op("PUT", "/resource_classes/{name}/metadata", "updateClassMetadata")
            .about("extensions", "Replace a custom resource class's metadata", "allot extension, at every microversion. A field left out or null is unset; a standard class: 400.")
            .errors(&[404])
            .body(schemas::class_metadata(), json!({"units": "count", "display_name": "Fuzz"}))
            .json(200, "ClassMetadata"),
    ]
}

fn traits() -> Vec<Op> {
    let one = |m, id| op(m, "/traits/{name}", id).errors(&[404]);
    vec![
        op("GET", "/traits", "listTraits")
            .since(6)
            .about("traits", "List traits", "From 1.6 (404 before).")
            .query("name", json!({"type": "string"}), "`in:A,B` or `startswith:P`.")
            .query("associated", json!({"type": "string", "enum": ["true", "false"]}), "Only traits some provider has (or has not).")
            .json(200, "TraitList"),
        one("GET", "showTrait")
            .about("traits", "Check that a trait exists", "From 1.6: 204 when it exists.")
            .empty(204),
        one("PUT", "putTrait")
            .about("traits", "Create a custom trait", "From 1.6: 201 when made (with `Location`), 204 when it existed; a name not `CUSTOM_`: 400.")
            .empty(201)
            .empty(204),
        one("DELETE", "deleteTrait")
            .about("traits", "Delete a custom trait", "From 1.6. 400 for a standard trait, 409 while a provider has it.")
            .errors(&[409])
            .empty(204),
    ]
}

fn providers() -> Vec<Op> {
    let one = |m, id| op(m, "/resource_providers/{uuid}", id).errors(&[404]);
    let list = op("GET", "/resource_providers", "listResourceProviders")
        .about("resource_providers", "List resource providers", "Filters: `name`, `uuid`; `member_of` from 1.3 (`in:` any of, `!` none of from 1.32), `resources` from 1.4, `in_tree` from 1.14, `required` from 1.18 (`!` forbidden from 1.22, `in:` from 1.39). An unknown filter: 400. allot: `with_usages=true` adds usages and pending amounts, `limit` and `marker` page.")
        .query_schema(&schemas::provider_list_query(AT))
        .query_schema(&schemas::provider_list_extensions());
    vec![
        list.json(200, "ProviderList"),
        op("POST", "/resource_providers", "createResourceProvider")
            .about("resource_providers", "Create a resource provider", "From 1.20: 200 with the provider and `Location`; before, 201 with `Location` and no body. `parent_provider_uuid` from 1.14. 409 when the name or uuid is taken.")
            .body(schemas::provider_create(true), json!({"name": "fuzz-new"}))
            .errors(&[409])
            .json(200, "Provider")
            .empty(201),
        one("GET", "showResourceProvider")
            .about("resource_providers", "Show a resource provider", "`parent_provider_uuid` and `root_provider_uuid` from 1.14; links grow with the microversion.")
            .json(200, "Provider"),
        one("PUT", "updateResourceProvider")
            .about("resource_providers", "Rename or reparent a resource provider", "`parent_provider_uuid` from 1.14; from 1.37 a provider may be moved to another parent or made a root.")
            .body(schemas::provider_update(true), json!({"name": "fuzz-provider"}))
            .errors(&[409])
            .json(200, "Provider"),
        one("DELETE", "deleteResourceProvider")
            .about("resource_providers", "Delete a resource provider", "409 while it has allocations, live claims or children.")
            .errors(&[409])
            .empty(204),
    ]
}

fn inventories() -> Vec<Op> {
    let all = |m, id| op(m, "/resource_providers/{uuid}/inventories", id).errors(&[404]);
    let one = |m, id| {
        op(
            m,
            "/resource_providers/{uuid}/inventories/{resource_class}",
            id,
        )
        .errors(&[404])
    };
    let inventory = json!({"resource_provider_generation": 0, "total": 8});
    vec![
        all("GET", "listInventories")
            .about("inventories", "List a provider's inventories", "")
            .json(200, "InventoryList"),
        all("POST", "createInventory")
            .about(
                "inventories",
                "Add one inventory",
                "201 with `Location` and the inventory; 409 when the class already has one.",
            )
            .body(
                schemas::inventory_post(),
                json!({"resource_class": "VCPU", "total": 8}),
            )
            .errors(&[409])
            .json(201, "Inventory"),
        all("PUT", "replaceInventories")
            .about(
                "inventories",
                "Replace all inventories",
                "A generation that moved, or removing an inventory in use: 409.",
            )
            .body(
                schemas::inventories_put(),
                json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}),
            )
            .errors(&[409])
            .json(200, "InventoryList"),
        all("DELETE", "deleteInventories")
            .about(
                "inventories",
                "Delete all inventories",
                "From 1.5 (405 before). 409 `placement.inventory.inuse` while allocated.",
            )
            .errors(&[405, 409])
            .empty(204),
        one("GET", "showInventory")
            .about("inventories", "Show one inventory", "")
            .json(200, "Inventory"),
        one("PUT", "updateInventory")
            .about(
                "inventories",
                "Set one inventory",
                "Creates or replaces it; a generation that moved: 409.",
            )
            .body(schemas::inventory_put(), inventory)
            .errors(&[409])
            .json(200, "Inventory"),
        one("DELETE", "deleteInventory")
            .about(
                "inventories",
                "Delete one inventory",
                "409 while allocated.",
            )
            .errors(&[409])
            .empty(204),
    ]
}

fn provider_members() -> Vec<Op> {
    let at = |m, path, id| op(m, path, id).errors(&[404]);
    let aggregates = "/resource_providers/{uuid}/aggregates";
    let traits = "/resource_providers/{uuid}/traits";
    vec![
        at("GET", aggregates, "listProviderAggregates")
            .about("resource_providers", "List a provider's aggregates", "From 1.1; `resource_provider_generation` from 1.19.")
            .json(200, "ProviderAggregates"),
        at("PUT", aggregates, "putProviderAggregates")
            .about("resource_providers", "Replace a provider's aggregates", "From 1.19 the body carries the generation (409 when it moved); from 1.1 to 1.18 a bare list of uuids.")
            .body(schemas::provider_aggregates_v1_19(), json!({"aggregates": [PROVIDER], "resource_provider_generation": 0}))
            .errors(&[409])
            .json(200, "ProviderAggregates"),
        at("GET", traits, "listProviderTraits")
            .about("resource_providers", "List a provider's traits", "From 1.6.")
            .json(200, "ProviderTraits"),
        at("PUT", traits, "putProviderTraits")
            .about("resource_providers", "Replace a provider's traits", "From 1.6. An unknown trait: 400; a generation that moved: 409.")
            .body(schemas::provider_traits(), json!({"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": 0}))
            .errors(&[409])
            .json(200, "ProviderTraits"),
        at("DELETE", traits, "deleteProviderTraits")
            .about("resource_providers", "Remove all of a provider's traits", "From 1.6.")
            .errors(&[409])
            .empty(204),
        at("GET", "/resource_providers/{uuid}/usages", "showProviderUsages")
            .about("usages", "A provider's usages", "Summed from its allocations (live claims are in `/pending`).")
            .json(200, "ProviderUsages"),
        at("GET", "/resource_providers/{uuid}/allocations", "listProviderAllocations")
            .about("allocations", "A provider's allocations, by consumer", "`consumer_generation` is not shown here.")
            .json(200, "ProviderAllocations"),
    ]
}

fn allocations() -> Vec<Op> {
    let one = |m, id| op(m, "/allocations/{consumer_uuid}", id);
    let usages = op("GET", "/usages", "showUsages")
        .since(9)
        .about("usages", "Usages of a project (and user)", "From 1.9 (404 before). From 1.38 grouped by consumer type (`consumer_type`: a type, `all` or `unknown`), each with `consumer_count`; before, one map of class to amount.")
        .query_schema(&schemas::usages_query(AT));
    let consumer = json!({
        "allocations": {PROVIDER: {"resources": {"VCPU": 1}}},
        "project_id": "fuzz", "user_id": "fuzz", "consumer_generation": null, "consumer_type": "INSTANCE",
    });
    vec![
        one("GET", "showAllocations")
            .about("allocations", "A consumer's allocations", "An unknown consumer: an empty `allocations`. `project_id` and `user_id` from 1.12, `consumer_generation` from 1.28, `consumer_type` from 1.38.")
            .json(200, "ConsumerAllocations"),
        one("PUT", "putAllocations")
            .about("allocations", "Replace a consumer's allocations", "The dict form from 1.12 (a list of `{resource_provider, resources}` before); `project_id`/`user_id` required from 1.8; `consumer_generation` from 1.28 (409 when it moved; empty allocations delete); `mappings` from 1.34; `consumer_type` required from 1.38. Over capacity: 409.")
            .body(schemas::allocations_put(AT), consumer.clone())
            .errors(&[404, 409])
            .empty(204),
        one("DELETE", "deleteAllocations")
            .about("allocations", "Delete a consumer's allocations", "404 when it has none.")
            .errors(&[404, 409])
            .empty(204),
        op("POST", "/allocations", "postAllocations")
            .since(13)
            .about("allocations", "Replace the allocations of several consumers", "From 1.13, in one step; the per-consumer form follows the microversion as `PUT` does.")
            .body(schemas::allocations_post(AT), json!({CONSUMER: consumer}))
            .errors(&[409])
            .empty(204),
        usages.json(200, "Usages"),
        op("POST", "/reshaper", "reshape")
            .since(30)
            .about("allocations", "Move inventories and allocations in one step", "From 1.30 (404 before); `mappings` from 1.34 and `consumer_type` from 1.38 as for allocations. Needs the `service` role under the `secure` policy.")
            .body(schemas::reshaper(AT), json!({"inventories": {PROVIDER: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}}, "allocations": {}}))
            .errors(&[409])
            .empty(204),
    ]
}

fn candidates() -> Vec<Op> {
    vec![
        candidate_query(op("GET", "/allocation_candidates", "listAllocationCandidates").since(10))
            .about("allocation_candidates", "Allocation candidates", CANDIDATES)
            .query(
                "limit",
                json!({"type": "string", "pattern": "^[1-9][0-9]*$"}),
                "At most this many candidates (1.16).",
            )
            .query(
                "sort",
                json!({"type": "string", "enum": ["pack", "spread", "random"]}),
                "allot: order the candidates by load.",
            )
            .query(
                "prefer",
                json!({"type": "string"}),
                "allot: traits to rank candidates by, comma-separated.",
            )
            .json(200, "AllocationCandidates"),
    ]
}

/// The query of `GET /allocation_candidates` (and of headroom and explain, which read
/// it as at 1.39): the unsuffixed groups' parameters (a suffix `_NAME` or a number
/// makes a granular group of each) and the rules between groups.
pub(crate) fn candidate_query(op: Op) -> Op {
    let string = json!({"type": "string"});
    op.query(
        "resources",
        string.clone(),
        "`CLASS:N,...`; with a suffix (`resources_G`), a granular group.",
    )
    .query(
        "required",
        string.clone(),
        "Traits: `T`, `!T` forbidden, `in:A,B` any of (repeatable).",
    )
    .query(
        "member_of",
        string.clone(),
        "Aggregates: `in:A,B`, `!A` (repeatable).",
    )
    .query(
        "in_tree",
        json!({"type": "string", "format": "uuid"}),
        "Only the tree of this provider.",
    )
    .query(
        "group_policy",
        json!({"type": "string", "enum": ["none", "isolate"]}),
        "How granular groups share providers (required with several).",
    )
    .query(
        "root_required",
        string.clone(),
        "Traits the root must have (or not, with `!`).",
    )
    .query(
        "same_subtree",
        string,
        "Group suffixes that must share a subtree.",
    )
}

const CANDIDATES: &str = "From 1.10 (404 before). At 1.39: `resources` and granular groups \
(`resourcesN`, `requiredN`, `member_ofN`, `in_treeN`: numbered from 1.25, named from 1.33), \
`limit` from 1.16, `required` from 1.17 (`!` from 1.22, `in:` from 1.39), `member_of` from \
1.21, `in_tree` from 1.31, `root_required` from 1.35, `same_subtree` from 1.36. The answer: \
`allocation_requests` as lists before 1.12 and keyed by provider from 1.12, with `mappings` \
from 1.34; provider summaries with `traits` from 1.17, every inventory from 1.27, parent and \
root from 1.29. allot: `sort` and `prefer` weigh the candidates.";
