//! allot's own operations (docs/api.md, "Extensions"), at every microversion, and
//! the service endpoints served on the API's listener (health check, metrics, status,
//! this document).

use serde_json::json;

use super::components::{CONSUMER, PROVIDER};
use super::op::{op, Op};
use super::placement::candidate_query;
use crate::schemas;

/// Every extension operation.
pub(crate) fn operations() -> Vec<Op> {
    let mut ops = claims();
    ops.extend(pending());
    ops.extend(choosing());
    ops.extend(server_groups());
    ops.extend(drains());
    ops.extend(operators());
    ops.extend(dry_run());
    ops.extend(shapes());
    ops.extend(service());
    ops
}

fn claims() -> Vec<Op> {
    let one = |m, path, id| op(m, path, id).errors(&[404]);
    let claim = json!({
        "consumer_uuid": CONSUMER, "project_id": "fuzz", "user_id": "fuzz",
        "allocations": {PROVIDER: {"resources": {"VCPU": 1}}}, "expires_in": 60, "tag": "fuzz",
    });
    vec![
        op("POST", "/claims", "createClaim")
            .about("claims", "Make a pending claim, or pick and claim", CREATE)
            .body(schemas::claim_create(), claim)
            .errors(&[409])
            .json_schema(201, json!({"anyOf": [
                {"$ref": "#/components/schemas/Claim"},
                {"$ref": "#/components/schemas/Placed"},
            ]})),
        op("GET", "/claims", "listClaims")
            .about("claims", "List claims", "Oldest first, filtered by any parameter, paged with `limit` and `marker` (an unknown marker: 400).")
            .query_schema(&schemas::claims_query())
            .json(200, "ClaimList"),
        op("DELETE", "/claims", "releaseConsumerClaims")
            .about("claims", "Release a consumer's live claims", "204, also when it has none.")
            .query_schema(&schemas::claims_release_query())
            .errors(&[409])
            .empty(204),
        one("GET", "/claims/{uuid}", "showClaim")
            .about("claims", "Show a claim", "Its state as of the moment asked.")
            .json(200, "Claim"),
        one("DELETE", "/claims/{uuid}", "releaseClaim")
            .about("claims", "Release a claim", "204, also for a claim that already ended.")
            .errors(&[409])
            .empty(204),
        one("POST", "/claims/{uuid}/confirm", "confirmClaim")
            .about("claims", "Confirm a claim", "Its amounts become allocations of its consumer, added or (`replace`) replacing; 409 `allot.claim.not_pending` for a released or expired claim.")
            .body(schemas::claim_confirm(), json!({"replace": false}))
            .optional_body()
            .errors(&[409])
            .json(200, "Claim"),
    ]
}

const CREATE: &str = "With `allocations`, a claim of those amounts (409 \
`allot.claim.does_not_fit` when they do not fit beside allocations and live claims); with \
`request` (a query string of `GET /allocation_candidates`), the server picks the first \
candidate of its order and claims it, for `consumer_uuid` (201 with the claim) or for each of \
`consumers` (201 with `claims` and `unplaced`). A server group named joins the consumer; a \
hard rule it would break: 409 `allot.server_group.violated`.";

fn pending() -> Vec<Op> {
    vec![
        op("GET", "/resource_providers/{uuid}/pending", "showProviderPending")
            .about("claims", "A provider's pending totals", "Summed from its live claims; `detail=consumers` adds them by consumer, `tree=true` sums the provider's whole subtree.")
            .query_schema(&schemas::provider_pending_query())
            .errors(&[404])
            .json(200, "Pending"),
        op("GET", "/pending", "showPending")
            .about("claims", "Pending totals of a consumer or a project", "At least one of `consumer_uuid` and `project_id` (400 otherwise); with `group_by=root`, every root's totals (`roots`), of a consumer or project when given.")
            .query_schema(&schemas::pending_query())
            .json_schema(200, json!({"anyOf": [
                {"$ref": "#/components/schemas/Pending"},
                {"$ref": "#/components/schemas/PendingByRoot"},
            ]})),
    ]
}

fn choosing() -> Vec<Op> {
    vec![
        candidate_query(op("GET", "/headroom", "showHeadroom"))
            .about("extensions", "How many more instances of a shape fit", "The query of `GET /allocation_candidates`, read as at 1.39 (required: `resources`, or `shape`); `group_by` counts per root, aggregate or `trait:PREFIX`.")
            .query("group_by", json!({"type": "string", "pattern": "^(root|aggregate|trait:[A-Z0-9_]{1,255})$"}), "How to group the count.")
            .query("shape", json!({"type": "string", "minLength": 1, "maxLength": 255}), "A named shape (`/shapes`), whose request the other parameters are added to; 404 when there is none.")
            .errors(&[404])
            .json(200, "Headroom"),
        candidate_query(op("GET", "/allocation_candidates/explain", "explainCandidates"))
            .about("extensions", "Why a candidate query finds what it finds", "The query of `GET /allocation_candidates`, read as at 1.39; each group's providers stage by stage.")
            .json(200, "Explanation"),
    ]
}

fn server_groups() -> Vec<Op> {
    let one = |m, path, id| op(m, path, id).errors(&[404]);
    let group = json!({"name": "fuzz", "project_id": "fuzz", "policy": "anti-affinity"});
    vec![
        op("POST", "/server_groups", "createServerGroup")
            .about(
                "server_groups",
                "Make a server group",
                "201 with `Location`; 409 when the uuid is taken.",
            )
            .body(schemas::server_group_create(), group.clone())
            .errors(&[409])
            .json(201, "ServerGroup"),
        op("GET", "/server_groups", "listServerGroups")
            .about(
                "server_groups",
                "List server groups",
                "By uuid, paged with `limit` and `marker`.",
            )
            .query_schema(&schemas::server_groups_query())
            .json(200, "ServerGroupList"),
        one("GET", "/server_groups/{uuid}", "showServerGroup")
            .about(
                "server_groups",
                "Show a server group",
                "With `placement` (where each member is) and `violations`.",
            )
            .json(200, "ServerGroup"),
        one("PUT", "/server_groups/{uuid}", "putServerGroup")
            .about(
                "server_groups",
                "Make or replace a server group whole",
                "Members included; where they are is not checked.",
            )
            .body(schemas::server_group_put(), group)
            .errors(&[409])
            .json(200, "ServerGroup"),
        one("DELETE", "/server_groups/{uuid}", "deleteServerGroup")
            .about(
                "server_groups",
                "Delete a server group",
                "409 while it has members, unless `force=true`.",
            )
            .query_schema(&schemas::server_group_delete_query())
            .errors(&[409])
            .empty(204),
        one(
            "POST",
            "/server_groups/{uuid}/members",
            "serverGroupMembers",
        )
        .about(
            "server_groups",
            "Add and remove members",
            "A member placed against a hard rule: 409 `allot.server_group.violated`.",
        )
        .body(schemas::server_group_members(), json!({"add": [CONSUMER]}))
        .errors(&[409])
        .json(200, "ServerGroup"),
    ]
}

fn drains() -> Vec<Op> {
    let one = |m, path, id| op(m, path, id).errors(&[404]);
    vec![
        op("POST", "/drains", "createDrain")
            .about("drains", "Drain roots", "Every consumer of the roots gets a new home held by a pending claim; 409 when they do not all fit (without `partial`) or a root is drained already.")
            .body(schemas::drain_create(), json!({"roots": [PROVIDER], "partial": true}))
            .errors(&[404, 409])
            .json(201, "Drain"),
        op("GET", "/drains", "listDrains")
            .about("drains", "List drains", "Oldest first.")
            .json(200, "DrainList"),
        one("GET", "/drains/{uuid}", "showDrain")
            .about("drains", "Show a drain", "")
            .json(200, "Drain"),
        one("DELETE", "/drains/{uuid}", "deleteDrain")
            .about("drains", "End a drain", "Its pending claims released, its roots open again.")
            .errors(&[409])
            .empty(204),
        one("POST", "/drains/{uuid}/confirm", "confirmDrain")
            .about("drains", "Confirm a drain", "Every pending claim of it confirmed in one write.")
            .errors(&[409])
            .json(200, "Drain"),
    ]
}

/// The questions operators ask (issue 47): who holds what, the audit, the query
/// forms.
fn operators() -> Vec<Op> {
    let removal = json!({
        "consumers": [{"consumer_uuid": CONSUMER, "consumer_generation": 1}],
        "listed_at": "2026-01-01T00:00:00Z",
    });
    vec![
        op("GET", "/consumers", "listConsumers")
            .about("extensions", "Consumers that hold resources", "Allocations, live pending claims or both (`holding`), with their totals and providers, in uuid order, paged with `limit` and `marker`; filtered by project, user, type, provider, tree and server group (one that does not exist: 400).")
            .query_schema(&crate::request::consumers::consumers_query())
            .json(200, "ConsumerList"),
        op("POST", "/audit", "audit")
            .about("extensions", "Consumers no live workload accounts for", "The body lists the live workloads of a range of uuids; the answer, the consumers of that range that hold resources and are not among them. Changes nothing.")
            .body(crate::request::consumers::audit_schema(), json!({"consumers": [CONSUMER]}))
            .json(200, "AuditReport"),
        op("POST", "/audit/delete", "auditDelete")
            .about("extensions", "Remove what an audit found", "One write; a consumer changed since the report, newer than the list, with live claims or of a type not named is left and named. More than `max_share` of all holders: 409, unless `force`.")
            .body(crate::request::consumers::removal_schema(), removal)
            .errors(&[409])
            .json(200, "Removed"),
        op("POST", "/allocation_candidates/query", "queryAllocationCandidates")
            .since(10)
            .about("allocation_candidates", "Allocation candidates, the query in the body", "The parameters of `GET /allocation_candidates` as a JSON object (a list for a repeated parameter); the same answer, byte for byte.")
            .body(crate::request::query_form::schema(), json!({"resources": "VCPU:1", "limit": 1}))
            .json(200, "AllocationCandidates"),
        op("POST", "/resource_providers/query", "queryResourceProviders")
            .about("resource_providers", "List resource providers, the query in the body", "The parameters of `GET /resource_providers` as a JSON object (a list for a repeated parameter); the same answer, byte for byte.")
            .body(crate::request::query_form::schema(), json!({"name": "fuzz", "with_usages": "true"}))
            .json(200, "ProviderList"),
    ]
}

fn dry_run() -> Vec<Op> {
    let write = json!({
        "method": "PUT",
        "path": format!("/resource_providers/{PROVIDER}/inventories/VCPU"),
        "body": {"resource_provider_generation": 1, "total": 8, "allocation_ratio": 1.0},
    });
    vec![op("POST", allot_client::dry_run::PATH, "dryRun")
        .about("extensions", "Dry run of an inventory or provider write", "What the write (`PUT`, `POST` or `DELETE` of a provider's inventories, `POST /reshaper`, `DELETE` of a provider) would answer at this request's microversion, and each class on the providers it touches that it would leave over capacity, with the consumers there; nothing changes. A body that names no such write: 400.")
        .body(schemas::dry_run(), write)
        .json(200, "DryRun")]
}

/// Named shapes (issue 47).
fn shapes() -> Vec<Op> {
    let one = |m, path, id| op(m, path, id).errors(&[404]);
    vec![
        op("GET", "/shapes", "listShapes")
            .about("shapes", "List named shapes", "By name.")
            .json(200, "ShapeList"),
        one("GET", "/shapes/{shape}", "showShape")
            .about("shapes", "Show a named shape", "")
            .json(200, "Shape"),
        op("PUT", "/shapes/{shape}", "putShape")
            .about("shapes", "Write a named shape", "`request` is the query string of `GET /allocation_candidates` for one instance, checked as at 1.39 (400 otherwise). 201 when new, 200 when replaced; 409 past 1000 shapes.")
            .body(schemas::shape_put(), json!({"request": "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40"}))
            .errors(&[409])
            .json(200, "Shape")
            .json(201, "Shape"),
        one("DELETE", "/shapes/{shape}", "deleteShape")
            .about("shapes", "Delete a named shape", "")
            .empty(204),
    ]
}

fn service() -> Vec<Op> {
    let health = |method| {
        op(method, crate::health::PATH, if method == "GET" { "healthcheck" } else { "healthcheckHead" })
            .about("service", "Health check", "oslo.middleware's contract, any method, no token: 200 `OK` (`HEAD`: 204) or 503 with the reasons (docs/operations.md). The body is text, HTML or JSON as `Accept` prefers.")
            .open()
            .unversioned()
    };
    let reasons = json!({
        "text/plain": {"schema": {"type": "string", "minLength": 1}},
        "text/html": {"schema": {"type": "string", "minLength": 1}},
        "application/json": {"schema": {"$ref": "#/components/schemas/HealthReasons"}},
    });
    vec![
        health("GET")
            .raw(200, json!({"content": reasons.clone()}))
            .raw(503, json!({"content": reasons})),
        health("HEAD").empty(204).empty(503),
        op("GET", crate::metrics::PATH, "metrics")
            .about("service", "Prometheus metrics", "The text exposition (docs/operations.md lists the series). Needs a token the `allot:metrics` rule allows; also served without one on `--metrics-bind`'s listener.")
            .text(200, "text/plain"),
        op("GET", allot_client::status::PATH, "status")
            .about("service", "This node at a glance", "What `allot status` prints; the policy of `/metrics`.")
            .json(200, "Status"),
        op("GET", super::PATH, "openapi")
            .about("service", "This document", "OpenAPI 3.1, no token needed.")
            .open()
            .json(200, "OpenApiDocument"),
    ]
}
