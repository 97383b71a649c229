//! Authorization: which callers may do what.
//!
//! Placement 16.0's policy, as a table rather than a policy file. Every rule has a
//! *check* (its current default), optionally a *deprecated* check (the pre-Wallaby
//! default, `role:admin`), and the token scopes it accepts. A check is built from a
//! few pieces: a role, "the caller's project is the target's project", a reference to
//! another rule, and `and`/`or` of those.
//!
//! How a request is judged (oslo.policy's enforcement, as Placement runs it):
//! 1. the action must be a registered rule (else 500, a bug on our side);
//! 2. the token's scope (system or project) must be one the action's rule accepts,
//!    else 403 — in every mode, as oslo.policy enforces scope by default and
//!    Placement's tests never turn it off;
//! 3. the rule's check must pass, where each rule (the action's and every rule it
//!    references) is read according to the [`PolicyMode`].
//!
//! Roles are taken literally: a caller with `admin` does not implicitly have `member`
//! or `reader` (Keystone expands implied roles into the token; with `noauth2` the
//! caller lists them all in `x-roles`).

use axum::http::StatusCode;

use crate::context::{Ctx, Identity};
use crate::error::ApiError;

/// Which rule set applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PolicyMode {
    /// `enforce_new_defaults = False`: a rule passes if its current check or its
    /// deprecated one does. What Placement's own functional tests run under, hence the
    /// `Default` for in-process use; `allot serve` defaults to `Secure`.
    #[default]
    Legacy,
    /// The current checks only (`enforce_new_defaults = True`, oslo.policy's default,
    /// so what Placement 16 enforces as installed).
    Secure,
    /// Every rule but `admin_api` allows anyone (Placement's `OpenPolicyFixture`, for
    /// tests of the API itself). Scope is still enforced.
    Open,
}

impl std::str::FromStr for PolicyMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "legacy" => Ok(PolicyMode::Legacy),
            "secure" => Ok(PolicyMode::Secure),
            "open" => Ok(PolicyMode::Open),
            other => Err(format!(
                "unknown policy mode {other:?}: expected legacy, secure or open"
            )),
        }
    }
}

/// The scope of the caller's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenScope {
    /// `openstack-system-scope` was sent.
    System,
    /// Anything else (`noauth2` has no domain-scoped tokens).
    Project,
}

/// A policy check, the building blocks of check strings.
#[derive(Debug)]
enum Check {
    /// `role:NAME` (case-insensitive).
    Role(&'static str),
    /// `project_id:%(project_id)s`: the caller's project is the target's.
    TargetProject,
    /// `rule:NAME`: another rule passes.
    Rule(&'static str),
    /// `A or B or ...`
    Any(&'static [Check]),
    /// `A and B and ...`
    All(&'static [Check]),
}

/// One registered rule.
#[derive(Debug)]
struct Rule {
    name: &'static str,
    /// The current default.
    check: Check,
    /// OR'd in under [`PolicyMode::Legacy`].
    deprecated: Option<Check>,
    /// The token scopes allowed to use the rule as an action; empty: any.
    scopes: &'static [TokenScope],
}

/// Placement's `DEPRECATED_ADMIN_POLICY`, the one deprecated default.
const DEPRECATED_ADMIN: Option<Check> = Some(Check::Role("admin"));
const PROJECT: &[TokenScope] = &[TokenScope::Project];
const ADMIN_OR_SERVICE: Check = Check::Rule("admin_or_service_api");

/// An API action guarded by `rule:admin_or_service_api`, for projects only.
const fn admin_or_service(name: &'static str) -> Rule {
    Rule {
        name,
        check: ADMIN_OR_SERVICE,
        deprecated: None,
        scopes: PROJECT,
    }
}

/// Every rule Placement 16.0 registers (`placement/policies/*.py`).
const RULES: &[Rule] = &[
    // Base rules, referenced by the API rules.
    Rule {
        name: "admin_api",
        check: Check::Role("admin"),
        deprecated: None,
        scopes: PROJECT,
    },
    Rule {
        name: "service_api",
        check: Check::Role("service"),
        deprecated: DEPRECATED_ADMIN,
        scopes: PROJECT,
    },
    Rule {
        name: "admin_or_service_api",
        check: Check::Any(&[Check::Role("admin"), Check::Role("service")]),
        deprecated: DEPRECATED_ADMIN,
        scopes: PROJECT,
    },
    Rule {
        name: "project_reader_api",
        check: Check::All(&[Check::Role("reader"), Check::TargetProject]),
        deprecated: DEPRECATED_ADMIN,
        scopes: &[],
    },
    Rule {
        name: "admin_or_project_reader_or_service_api",
        check: Check::Any(&[
            Check::Role("admin"),
            Check::Rule("project_reader_api"),
            Check::Role("service"),
        ]),
        deprecated: DEPRECATED_ADMIN,
        scopes: PROJECT,
    },
    // Resource providers.
    admin_or_service("placement:resource_providers:list"),
    admin_or_service("placement:resource_providers:create"),
    admin_or_service("placement:resource_providers:show"),
    admin_or_service("placement:resource_providers:update"),
    admin_or_service("placement:resource_providers:delete"),
    // Resource classes.
    admin_or_service("placement:resource_classes:list"),
    admin_or_service("placement:resource_classes:create"),
    admin_or_service("placement:resource_classes:show"),
    admin_or_service("placement:resource_classes:update"),
    admin_or_service("placement:resource_classes:delete"),
    // Inventories.
    admin_or_service("placement:resource_providers:inventories:list"),
    admin_or_service("placement:resource_providers:inventories:create"),
    admin_or_service("placement:resource_providers:inventories:show"),
    admin_or_service("placement:resource_providers:inventories:update"),
    admin_or_service("placement:resource_providers:inventories:delete"),
    // Aggregates.
    admin_or_service("placement:resource_providers:aggregates:list"),
    admin_or_service("placement:resource_providers:aggregates:update"),
    // Usages.
    admin_or_service("placement:resource_providers:usages"),
    Rule {
        name: "placement:usages",
        check: Check::Rule("admin_or_project_reader_or_service_api"),
        deprecated: None,
        scopes: PROJECT,
    },
    // Traits.
    admin_or_service("placement:traits:list"),
    admin_or_service("placement:traits:show"),
    admin_or_service("placement:traits:update"),
    admin_or_service("placement:traits:delete"),
    admin_or_service("placement:resource_providers:traits:list"),
    admin_or_service("placement:resource_providers:traits:update"),
    admin_or_service("placement:resource_providers:traits:delete"),
    // Allocations.
    admin_or_service("placement:allocations:manage"),
    admin_or_service("placement:allocations:list"),
    admin_or_service("placement:allocations:update"),
    admin_or_service("placement:allocations:delete"),
    admin_or_service("placement:resource_providers:allocations:list"),
    // Allocation candidates.
    admin_or_service("placement:allocation_candidates:list"),
    // Reshaper: services only under the new defaults.
    Rule {
        name: "placement:reshaper:reshape",
        check: Check::Rule("service_api"),
        deprecated: None,
        scopes: PROJECT,
    },
];

fn rule(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.name == name)
}

/// What a rule is checked against: the caller's project, and the project of the
/// thing acted on.
struct Subject<'a> {
    identity: &'a Identity,
    mode: PolicyMode,
    /// The target's `project_id`.
    target_project: Option<&'a str>,
}

impl Subject<'_> {
    fn rule_passes(&self, name: &str) -> bool {
        // An unknown referenced rule fails closed, as oslo.policy's `rule:` check does.
        let Some(rule) = rule(name) else {
            return false;
        };
        match self.mode {
            // Placement's open fixture sets every rule to "@" but `admin_api`.
            PolicyMode::Open => rule.name != "admin_api" || self.passes(&rule.check),
            PolicyMode::Secure => self.passes(&rule.check),
            PolicyMode::Legacy => {
                self.passes(&rule.check) || rule.deprecated.as_ref().is_some_and(|d| self.passes(d))
            }
        }
    }

    fn passes(&self, check: &Check) -> bool {
        match check {
            Check::Role(role) => self.identity.has_role(role),
            // oslo.policy compares the two as strings, so a missing project on both
            // sides matches; Option equality says the same.
            Check::TargetProject => self.identity.project_id.as_deref() == self.target_project,
            Check::Rule(name) => self.rule_passes(name),
            Check::Any(checks) => checks.iter().any(|c| self.passes(c)),
            Check::All(checks) => checks.iter().all(|c| self.passes(c)),
        }
    }
}

/// The outcome of judging an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Allowed,
    /// The check failed.
    Denied,
    /// The token's scope is not one the rule accepts.
    WrongScope,
    /// No such rule: a programming error.
    Unregistered,
}

fn judge(
    identity: &Identity,
    mode: PolicyMode,
    action: &str,
    target_project: Option<&str>,
) -> Verdict {
    let Some(rule) = rule(action) else {
        return Verdict::Unregistered;
    };
    let scope = if identity.system_scope {
        TokenScope::System
    } else {
        TokenScope::Project
    };
    if !rule.scopes.is_empty() && !rule.scopes.contains(&scope) {
        return Verdict::WrongScope;
    }
    let subject = Subject {
        identity,
        mode,
        target_project,
    };
    if subject.rule_passes(action) {
        Verdict::Allowed
    } else {
        Verdict::Denied
    }
}

fn enforce(
    ctx: &Ctx,
    mode: PolicyMode,
    action: &str,
    target_project: Option<Option<&str>>,
) -> Result<(), ApiError> {
    let Some(identity) = &ctx.identity else {
        return Err(ApiError::forbidden(action));
    };
    // Placement's default target is the caller's own project.
    let target_project = target_project.unwrap_or(identity.project_id.as_deref());
    match judge(identity, mode, action, target_project) {
        Verdict::Allowed => Ok(()),
        Verdict::Denied | Verdict::WrongScope => Err(ApiError::forbidden(action)),
        Verdict::Unregistered => {
            tracing::error!(action, "policy check for an unregistered action");
            Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ""))
        }
    }
}

/// Checks that the caller may perform `action` (a Placement policy name such as
/// `placement:resource_classes:list`) on something of its own project: 403 if not.
pub fn authorize(ctx: &Ctx, mode: PolicyMode, action: &str) -> Result<(), ApiError> {
    enforce(ctx, mode, action, None)
}

/// Like [`authorize`], for an action on something that belongs to `target_project`
/// (`GET /usages?project_id=...` passes the queried project, `None` when absent).
pub fn authorize_target(
    ctx: &Ctx,
    mode: PolicyMode,
    action: &str,
    target_project: Option<&str>,
) -> Result<(), ApiError> {
    enforce(ctx, mode, action, Some(target_project))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::microversion;

    const MINE: &str = "c8a8c6d2-project";
    const OTHER: &str = "0a8e2a4b-other";

    fn who(roles: &str, project: Option<&str>, system_scope: bool) -> Identity {
        Identity {
            user_id: "user".into(),
            project_id: project.map(str::to_owned),
            roles: roles
                .split(',')
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect(),
            system_scope,
        }
    }

    /// The callers of Placement's `*-rbac.yaml` files.
    fn callers() -> Vec<(&'static str, Identity)> {
        vec![
            ("admin", who("admin", Some("admin_project_id"), false)),
            ("service", who("service", Some("service_project_id"), false)),
            ("system admin", who("admin,member,reader", None, true)),
            ("system reader", who("reader", None, true)),
            (
                "project admin",
                who("admin,member,reader", Some(MINE), false),
            ),
            ("project member", who("member,reader", Some(MINE), false)),
            ("project reader", who("reader", Some(MINE), false)),
            ("no roles", who("", Some(MINE), false)),
            ("upper-case admin", who("ADMIN", Some(MINE), false)),
        ]
    }

    use PolicyMode::{Legacy, Open, Secure};
    use Verdict::{Allowed as Y, Denied as N, WrongScope as S};

    /// (caller, action, target project, [legacy, secure, open]).
    const TABLE: &[(&str, &str, Option<&str>, [Verdict; 3])] = &[
        // Everything but usages and the reshaper: admin or service, project-scoped.
        (
            "admin",
            "placement:resource_providers:list",
            None,
            [Y, Y, Y],
        ),
        (
            "service",
            "placement:resource_providers:list",
            None,
            [Y, Y, Y],
        ),
        (
            "system admin",
            "placement:resource_providers:list",
            None,
            [S, S, S],
        ),
        ("system reader", "placement:traits:list", None, [S, S, S]),
        (
            "project admin",
            "placement:allocations:manage",
            None,
            [Y, Y, Y],
        ),
        (
            "project member",
            "placement:resource_classes:create",
            None,
            [N, N, Y],
        ),
        (
            "project reader",
            "placement:resource_providers:inventories:list",
            None,
            [N, N, Y],
        ),
        (
            "no roles",
            "placement:allocation_candidates:list",
            None,
            [N, N, Y],
        ),
        (
            "upper-case admin",
            "placement:resource_providers:traits:delete",
            None,
            [Y, Y, Y],
        ),
        // Total usages: admins, services and readers of the queried project.
        ("admin", "placement:usages", Some(OTHER), [Y, Y, Y]),
        ("service", "placement:usages", Some(OTHER), [Y, Y, Y]),
        ("system admin", "placement:usages", Some(MINE), [S, S, S]),
        ("system reader", "placement:usages", None, [S, S, S]),
        ("project reader", "placement:usages", Some(MINE), [Y, Y, Y]),
        ("project member", "placement:usages", Some(MINE), [Y, Y, Y]),
        ("project reader", "placement:usages", Some(OTHER), [N, N, Y]),
        ("project reader", "placement:usages", None, [N, N, Y]),
        ("no roles", "placement:usages", Some(MINE), [N, N, Y]),
        // Provider usages are not project-bound.
        (
            "project reader",
            "placement:resource_providers:usages",
            Some(MINE),
            [N, N, Y],
        ),
        // The reshaper: services only, plus admins under the deprecated default.
        ("service", "placement:reshaper:reshape", None, [Y, Y, Y]),
        ("admin", "placement:reshaper:reshape", None, [Y, N, Y]),
        (
            "project admin",
            "placement:reshaper:reshape",
            None,
            [Y, N, Y],
        ),
        (
            "project member",
            "placement:reshaper:reshape",
            None,
            [N, N, Y],
        ),
        (
            "system admin",
            "placement:reshaper:reshape",
            None,
            [S, S, S],
        ),
        // `admin_api` stays admin-only even when the policy is open.
        ("no roles", "admin_api", None, [N, N, N]),
        ("admin", "admin_api", None, [Y, Y, Y]),
        // Unknown actions are a bug, whoever asks.
        (
            "admin",
            "placement:resource_providers:frobnicate",
            None,
            [
                Verdict::Unregistered,
                Verdict::Unregistered,
                Verdict::Unregistered,
            ],
        ),
    ];

    #[test]
    fn rules_decide_as_placement_does() {
        let callers = callers();
        for (name, action, target, expected) in TABLE {
            let (_, identity) = callers
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("no caller {name}"));
            for (mode, want) in [Legacy, Secure, Open].into_iter().zip(expected) {
                assert_eq!(
                    judge(identity, mode, action, *target),
                    *want,
                    "{name} {action} {target:?} in {mode:?}"
                );
            }
        }
    }

    #[test]
    fn only_the_reshaper_tells_legacy_from_secure() {
        for (name, identity) in callers() {
            for rule in RULES {
                for target in [None, Some(MINE), Some(OTHER)] {
                    let legacy = judge(&identity, Legacy, rule.name, target);
                    let secure = judge(&identity, Secure, rule.name, target);
                    let differs = [
                        "placement:reshaper:reshape",
                        "service_api",
                        "project_reader_api",
                    ]
                    .contains(&rule.name);
                    if !differs {
                        assert_eq!(legacy, secure, "{name} {} {target:?}", rule.name);
                    }
                }
            }
        }
    }

    #[test]
    fn the_table_is_consistent() {
        for (i, rule) in RULES.iter().enumerate() {
            assert!(
                RULES[..i].iter().all(|r| r.name != rule.name),
                "{} registered twice",
                rule.name
            );
            let mut stack: Vec<&Check> = vec![&rule.check];
            stack.extend(rule.deprecated.as_ref());
            while let Some(check) = stack.pop() {
                match check {
                    Check::Rule(name) => {
                        assert!(
                            super::rule(name).is_some(),
                            "{} refers to {name}",
                            rule.name
                        )
                    }
                    Check::Any(cs) | Check::All(cs) => stack.extend(cs.iter()),
                    Check::Role(_) | Check::TargetProject => {}
                }
            }
        }
    }

    /// Every `"placement:..."` action named in a handler is registered, so a typo is
    /// caught here rather than as a 500.
    #[test]
    fn handlers_name_registered_actions() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/handlers");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let source = std::fs::read_to_string(&path).unwrap();
            for piece in source.split("\"placement:").skip(1) {
                let action = format!("placement:{}", piece.split('"').next().unwrap());
                assert!(
                    rule(&action).is_some(),
                    "{} names unregistered action {action}",
                    path.display()
                );
                seen += 1;
            }
        }
        assert!(seen > 0);
    }

    fn ctx(identity: Option<Identity>) -> Ctx {
        Ctx {
            request_id: "req-test".into(),
            version: microversion::MAX,
            identity,
            accept: None,
        }
    }

    #[test]
    fn requests_get_placements_answers() {
        let reader = ctx(Some(who("reader", Some(MINE), false)));
        let denied = authorize(&reader, Legacy, "placement:traits:list").unwrap_err();
        assert_eq!(denied.status, StatusCode::FORBIDDEN);
        assert_eq!(
            denied.message,
            "Policy does not allow placement:traits:list to be performed."
        );
        // The default target is the caller's own project.
        assert!(authorize(&reader, Secure, "placement:usages").is_ok());
        assert!(authorize_target(&reader, Secure, "placement:usages", Some(MINE)).is_ok());
        let other = authorize_target(&reader, Secure, "placement:usages", Some(OTHER));
        assert_eq!(other.unwrap_err().status, StatusCode::FORBIDDEN);

        let anonymous = ctx(None);
        let err = authorize(&anonymous, Open, "placement:traits:list").unwrap_err();
        assert_eq!(err.status, StatusCode::FORBIDDEN);

        let admin = ctx(Some(who("admin", Some(MINE), false)));
        let err = authorize(&admin, Legacy, "placement:nothing").unwrap_err();
        assert_eq!(err.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
