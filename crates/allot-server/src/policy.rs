//! Authorization: which callers may do what.
//!
//! Placement 16.0's policy, as a table rather than a policy file. Every rule has a
//! *check* (its current default), optionally a *deprecated* check (the pre-Wallaby
//! default, `role:admin`), and the token scopes it accepts. A check is built from a
//! few pieces: a role, "the caller's project is the target's project", a reference to
//! another rule, and `and`/`or` of those.
//!
//! How a request is judged (oslo.policy's enforcement, as Placement runs it):
//! 1. the action is an [`Action`], each with its rule, so every action is registered;
//! 2. the token's scope (system or project) must be one the action's rule accepts,
//!    else 403 — in every mode, as oslo.policy enforces scope by default and
//!    Placement's tests never turn it off;
//! 3. the rule's check must pass, where each rule (the action's and every rule it
//!    references) is read according to the [`PolicyMode`].
//!
//! An operator's policy file (`crate::policy_file`) replaces the rules it names, for
//! every mode: an action's own rule, or a base rule (`admin_api`, ...) that built-in
//! rules refer to. The action's token scopes stay (oslo.policy keeps the registered
//! `scope_types` of an overridden rule too), and an overridden rule's deprecated
//! default no longer applies.
//!
//! Roles are taken literally: a caller with `admin` does not implicitly have `member`
//! or `reader` (Keystone expands implied roles into the token; with `noauth2` the
//! caller lists them all in `x-roles`).

use crate::context::{Ctx, Identity};
use crate::error::ApiError;
use crate::policy_file::{Expr, Rules};

/// Which rule set applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PolicyMode {
    /// `enforce_new_defaults = False`: a rule passes if its current check or its
    /// deprecated one does. What Placement's own functional tests run under.
    Legacy,
    /// The current checks only (`enforce_new_defaults = True`, oslo.policy's default,
    /// so what Placement 16 enforces as installed): the default, here and in
    /// `allot serve`.
    #[default]
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

/// Declares [`Action`] with its Placement rule names, and the list of them all.
macro_rules! actions {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// An API action Placement guards with a policy rule, one variant per rule
        /// (a misspelt action does not compile, where a misspelt rule name was a 500).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Action {
            $($(#[$doc])* #[doc = concat!("`", $name, "`")] $variant,)*
        }

        impl Action {
            /// Every action, in the order Placement registers them.
            pub const ALL: &'static [Action] = &[$(Action::$variant,)*];

            /// The rule's name in Placement (`placement:...`), for logs and the 403's
            /// message.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Action::$variant => $name,)*
                }
            }

            /// The action a rule name guards, if any.
            pub fn by_name(name: &str) -> Option<Action> {
                Action::ALL.iter().copied().find(|a| a.name() == name)
            }
        }
    };
}

actions! {
    ProvidersList => "placement:resource_providers:list",
    ProvidersCreate => "placement:resource_providers:create",
    ProvidersShow => "placement:resource_providers:show",
    ProvidersUpdate => "placement:resource_providers:update",
    ProvidersDelete => "placement:resource_providers:delete",
    ClassesList => "placement:resource_classes:list",
    ClassesCreate => "placement:resource_classes:create",
    ClassesShow => "placement:resource_classes:show",
    ClassesUpdate => "placement:resource_classes:update",
    ClassesDelete => "placement:resource_classes:delete",
    InventoriesList => "placement:resource_providers:inventories:list",
    InventoriesCreate => "placement:resource_providers:inventories:create",
    InventoriesShow => "placement:resource_providers:inventories:show",
    InventoriesUpdate => "placement:resource_providers:inventories:update",
    InventoriesDelete => "placement:resource_providers:inventories:delete",
    AggregatesList => "placement:resource_providers:aggregates:list",
    AggregatesUpdate => "placement:resource_providers:aggregates:update",
    ProviderUsages => "placement:resource_providers:usages",
    /// `GET /usages`, judged against the queried project.
    TotalUsages => "placement:usages",
    TraitsList => "placement:traits:list",
    TraitsShow => "placement:traits:show",
    TraitsUpdate => "placement:traits:update",
    TraitsDelete => "placement:traits:delete",
    ProviderTraitsList => "placement:resource_providers:traits:list",
    ProviderTraitsUpdate => "placement:resource_providers:traits:update",
    ProviderTraitsDelete => "placement:resource_providers:traits:delete",
    AllocationsManage => "placement:allocations:manage",
    AllocationsList => "placement:allocations:list",
    AllocationsUpdate => "placement:allocations:update",
    AllocationsDelete => "placement:allocations:delete",
    ProviderAllocationsList => "placement:resource_providers:allocations:list",
    AllocationCandidatesList => "placement:allocation_candidates:list",
    Reshape => "placement:reshaper:reshape",
    /// `GET /resource_classes/{name}/metadata`, an allot extension (issue 10).
    ClassMetadataShow => "allot:resource_classes:metadata:show",
    /// `PUT /resource_classes/{name}/metadata`, an allot extension (issue 10).
    ClassMetadataUpdate => "allot:resource_classes:metadata:update",
    /// `POST /claims`, an allot extension (issue 10).
    ClaimsCreate => "allot:claims:create",
    /// `GET /claims`, an allot extension (issue 10).
    ClaimsList => "allot:claims:list",
    /// `GET /claims/{uuid}`, an allot extension (issue 10).
    ClaimsShow => "allot:claims:show",
    /// `POST /claims/{uuid}/confirm`, an allot extension (issue 10).
    ClaimsConfirm => "allot:claims:confirm",
    /// `DELETE /claims/{uuid}` and `DELETE /claims?consumer_uuid=`, an allot
    /// extension (issue 10).
    ClaimsRelease => "allot:claims:release",
    /// `GET /resource_providers/{uuid}/pending` and `GET /pending`, an allot
    /// extension (issue 10).
    ClaimsPending => "allot:claims:pending",
    /// `POST /server_groups`, allot's own (issue 44).
    ServerGroupsCreate => "allot:server_groups:create",
    /// `GET /server_groups`, allot's own (issue 44).
    ServerGroupsList => "allot:server_groups:list",
    /// `GET /server_groups/{uuid}`, allot's own (issue 44).
    ServerGroupsShow => "allot:server_groups:show",
    /// `DELETE /server_groups/{uuid}`, allot's own (issue 44).
    ServerGroupsDelete => "allot:server_groups:delete",
    /// `POST /server_groups/{uuid}/members`, allot's own (issue 44).
    ServerGroupsMembers => "allot:server_groups:members",
    /// `POST /drains`, allot's own (issue 44).
    DrainsCreate => "allot:drains:create",
    /// `GET /drains` and `GET /drains/{uuid}`, allot's own (issue 44).
    DrainsShow => "allot:drains:show",
    /// `POST /drains/{uuid}/confirm`, allot's own (issue 44).
    DrainsConfirm => "allot:drains:confirm",
    /// `DELETE /drains/{uuid}`, allot's own (issue 44).
    DrainsDelete => "allot:drains:delete",
    /// `GET /metrics` and `GET /status`, allot's own (issue 23).
    MetricsShow => "allot:metrics",
    /// `GET /headroom`, allot's own (issue 24).
    Headroom => "allot:headroom",
    /// `GET /allocation_candidates/explain`, allot's own (issue 24).
    Explain => "allot:explain",
    /// `GET /consumers`, allot's own (issue 47).
    ConsumersList => "allot:consumers:list",
    /// `POST /audit`, allot's own (issue 47).
    Audit => "allot:audit",
    /// `POST /audit/delete`, allot's own (issue 47).
    AuditDelete => "allot:audit:delete",
    /// `POST /dry_run`, allot's own (issue 47).
    DryRun => "allot:dry_run",
    /// `GET /shapes` and `GET /shapes/{name}`, allot's own (issue 47).
    ShapesShow => "allot:shapes:show",
    /// `PUT /shapes/{name}`, allot's own (issue 47).
    ShapesUpdate => "allot:shapes:update",
    /// `DELETE /shapes/{name}`, allot's own (issue 47).
    ShapesDelete => "allot:shapes:delete",
}

/// The base rules the actions' checks refer to (`rule:NAME`, Placement's `admin_api`,
/// `service_api`, ... without the `_api` every one of them ends in); they are not
/// actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// `admin_api`: the one rule the open policy keeps.
    Admin,
    Service,
    AdminOrService,
    ProjectReader,
    AdminOrProjectReaderOrService,
}

impl Base {
    const ALL: [Base; 5] = [
        Base::Admin,
        Base::Service,
        Base::AdminOrService,
        Base::ProjectReader,
        Base::AdminOrProjectReaderOrService,
    ];

    /// Placement's name for the rule, as `rule:NAME` refers to it.
    const fn name(self) -> &'static str {
        match self {
            Base::Admin => "admin_api",
            Base::Service => "service_api",
            Base::AdminOrService => "admin_or_service_api",
            Base::ProjectReader => "project_reader_api",
            Base::AdminOrProjectReaderOrService => "admin_or_project_reader_or_service_api",
        }
    }

    fn by_name(name: &str) -> Option<Base> {
        Base::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// A policy check, the building blocks of check strings.
#[derive(Debug)]
enum Check {
    /// `role:NAME` (case-insensitive).
    Role(&'static str),
    /// `project_id:%(project_id)s`: the caller's project is the target's.
    TargetProject,
    /// `rule:NAME`: another rule passes.
    Rule(Base),
    /// `A or B or ...`
    Any(&'static [Check]),
    /// `A and B and ...`
    All(&'static [Check]),
}

/// One registered rule.
#[derive(Debug)]
struct Rule {
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

/// An API action guarded by `rule:admin_or_service_api`, for projects only.
const ADMIN_OR_SERVICE: Rule = Rule {
    check: Check::Rule(Base::AdminOrService),
    deprecated: None,
    scopes: PROJECT,
};

impl Base {
    /// Placement 16.0's base rules (`placement/policies/base.py`).
    const fn rule(self) -> Rule {
        match self {
            Base::Admin => Rule {
                check: Check::Role("admin"),
                deprecated: None,
                scopes: PROJECT,
            },
            Base::Service => Rule {
                check: Check::Role("service"),
                deprecated: DEPRECATED_ADMIN,
                scopes: PROJECT,
            },
            Base::AdminOrService => Rule {
                check: Check::Any(&[Check::Role("admin"), Check::Role("service")]),
                deprecated: DEPRECATED_ADMIN,
                scopes: PROJECT,
            },
            Base::ProjectReader => Rule {
                check: Check::All(&[Check::Role("reader"), Check::TargetProject]),
                deprecated: DEPRECATED_ADMIN,
                scopes: &[],
            },
            Base::AdminOrProjectReaderOrService => Rule {
                check: Check::Any(&[
                    Check::Role("admin"),
                    Check::Rule(Base::ProjectReader),
                    Check::Role("service"),
                ]),
                deprecated: DEPRECATED_ADMIN,
                scopes: PROJECT,
            },
        }
    }
}

impl Action {
    // size: flat match (a table in code)
    /// The rule Placement 16.0 registers for the action (`placement/policies/*.py`).
    // size: flat match (a table in code)
    const fn rule(self) -> Rule {
        match self {
            // Total usages: admins, services, and readers of the queried project.
            Action::TotalUsages => Rule {
                check: Check::Rule(Base::AdminOrProjectReaderOrService),
                deprecated: None,
                scopes: PROJECT,
            },
            // Reshaper: services only under the new defaults.
            Action::Reshape => Rule {
                check: Check::Rule(Base::Service),
                deprecated: None,
                scopes: PROJECT,
            },
            // Class metadata (ours): what people read about a class is set by admins
            // only; a service reads it like the class list.
            Action::ClassMetadataUpdate => Rule {
                check: Check::Rule(Base::Admin),
                deprecated: None,
                scopes: PROJECT,
            },
            // Headroom and explain (ours): what fits and why, as readers see usages:
            // admins, services and readers (of their own project; the answers name
            // no project). Named shapes (ours) are read for the same questions.
            Action::Headroom | Action::Explain | Action::ShapesShow => Rule {
                check: Check::Rule(Base::AdminOrProjectReaderOrService),
                deprecated: None,
                scopes: PROJECT,
            },
            // Removing what an audit found (ours): admins only, as Nova's `placement
            // audit --delete` is an operator's act, never a service's; and named
            // shapes (ours) are the deployment's flavours, which admins alone define.
            Action::AuditDelete | Action::ShapesUpdate | Action::ShapesDelete => Rule {
                check: Check::Rule(Base::Admin),
                deprecated: None,
                scopes: PROJECT,
            },
            // Metrics (ours): admins, and a scraper's own user with the `metrics`
            // role, which may read nothing else.
            Action::MetricsShow => Rule {
                check: Check::Any(&[Check::Role("admin"), Check::Role("metrics")]),
                deprecated: None,
                scopes: PROJECT,
            },
            // Everything else: admins and services (listed, so that a new action
            // has to be given its rule). Claims (ours) are written and read like
            // Placement's allocations, which are admins' and services' alike.
            Action::ProvidersList
            | Action::ProvidersCreate
            | Action::ProvidersShow
            | Action::ProvidersUpdate
            | Action::ProvidersDelete
            | Action::ClassesList
            | Action::ClassMetadataShow
            | Action::ClassesCreate
            | Action::ClassesShow
            | Action::ClassesUpdate
            | Action::ClassesDelete
            | Action::InventoriesList
            | Action::InventoriesCreate
            | Action::InventoriesShow
            | Action::InventoriesUpdate
            | Action::InventoriesDelete
            | Action::AggregatesList
            | Action::AggregatesUpdate
            | Action::ProviderUsages
            | Action::TraitsList
            | Action::TraitsShow
            | Action::TraitsUpdate
            | Action::TraitsDelete
            | Action::ProviderTraitsList
            | Action::ProviderTraitsUpdate
            | Action::ProviderTraitsDelete
            | Action::AllocationsManage
            | Action::AllocationsList
            | Action::AllocationsUpdate
            | Action::AllocationsDelete
            | Action::ProviderAllocationsList
            | Action::AllocationCandidatesList
            | Action::ClaimsCreate
            | Action::ClaimsList
            | Action::ClaimsShow
            | Action::ClaimsConfirm
            | Action::ClaimsRelease
            | Action::ClaimsPending
            | Action::ServerGroupsCreate
            | Action::ServerGroupsList
            | Action::ServerGroupsShow
            | Action::ServerGroupsDelete
            | Action::ServerGroupsMembers
            | Action::DrainsCreate
            | Action::DrainsShow
            | Action::DrainsConfirm
            | Action::DrainsDelete
            | Action::ConsumersList
            | Action::Audit
            // A dry run says what an inventory write would do, to those who may
            // write inventories.
            | Action::DryRun => ADMIN_OR_SERVICE,
        }
    }
}

/// What a rule is checked against: the caller's project, and the project of the
/// thing acted on.
struct Subject<'a> {
    identity: &'a Identity,
    mode: PolicyMode,
    /// The target's `project_id`.
    target_project: Option<&'a str>,
    /// The target's `user_id` (the caller's own on Placement's default target).
    target_user: Option<&'a str>,
    /// The operator's overrides, if any.
    file: Option<&'a Rules>,
}

impl Subject<'_> {
    /// Whether an action's own rule passes. Placement's open fixture sets every action
    /// to "@".
    fn action_passes(&self, action: Action) -> bool {
        if let Some(expr) = self.file.and_then(|f| f.get(action.name())) {
            return self.expr_passes(expr);
        }
        self.mode == PolicyMode::Open || self.rule_passes(&action.rule())
    }

    /// Whether a base rule passes; the open fixture leaves only `admin_api` as it is.
    fn base_passes(&self, base: Base) -> bool {
        if let Some(expr) = self.file.and_then(|f| f.get(base.name())) {
            return self.expr_passes(expr);
        }
        (self.mode == PolicyMode::Open && base != Base::Admin) || self.rule_passes(&base.rule())
    }

    fn rule_passes(&self, rule: &Rule) -> bool {
        match self.mode {
            PolicyMode::Open | PolicyMode::Secure => self.passes(&rule.check),
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
            Check::Rule(base) => self.base_passes(*base),
            Check::Any(checks) => checks.iter().any(|c| self.passes(c)),
            Check::All(checks) => checks.iter().all(|c| self.passes(c)),
        }
    }

    /// Whether a check from the policy file passes. The file was checked for cycles
    /// when it was read, so `rule:` references end.
    fn expr_passes(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Always => true,
            Expr::Never => false,
            Expr::Role(role) => self.identity.has_role(role),
            Expr::TargetProject => self.identity.project_id.as_deref() == self.target_project,
            Expr::TargetUser => Some(self.identity.user_id.as_str()) == self.target_user,
            Expr::Not(e) => !self.expr_passes(e),
            Expr::All(es) => es.iter().all(|e| self.expr_passes(e)),
            Expr::Any(es) => es.iter().any(|e| self.expr_passes(e)),
            Expr::Rule(name) => self.named_passes(name),
        }
    }

    /// `rule:NAME`: the file's rule of that name, else the built-in base rule or
    /// action; a name nobody defines fails, as in oslo.policy.
    fn named_passes(&self, name: &str) -> bool {
        if let Some(expr) = self.file.and_then(|f| f.get(name)) {
            self.expr_passes(expr)
        } else if let Some(base) = Base::by_name(name) {
            self.base_passes(base)
        } else if let Some(action) = Action::by_name(name) {
            self.action_passes(action)
        } else {
            false
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
}

fn judge(
    identity: &Identity,
    mode: PolicyMode,
    file: Option<&Rules>,
    action: Action,
    target_project: Option<&str>,
    target_user: Option<&str>,
) -> Verdict {
    let scope = if identity.system_scope {
        TokenScope::System
    } else {
        TokenScope::Project
    };
    let scopes = action.rule().scopes;
    if !scopes.is_empty() && !scopes.contains(&scope) {
        return Verdict::WrongScope;
    }
    let subject = Subject {
        identity,
        mode,
        target_project,
        target_user,
        file,
    };
    if subject.action_passes(action) {
        Verdict::Allowed
    } else {
        Verdict::Denied
    }
}

/// Whose thing an action acts on, for the rules that compare projects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target<'a> {
    /// Nothing in particular: Placement's default target is the caller's own project.
    CallersProject,
    /// Something of the project named, or of no project at all (`None`: a query that
    /// names none, which only a caller without a project matches).
    Project(Option<&'a str>),
}

fn enforce(
    ctx: &Ctx,
    mode: PolicyMode,
    action: Action,
    target: Target<'_>,
) -> Result<(), ApiError> {
    let Some(identity) = &ctx.identity else {
        return Err(ApiError::forbidden(action.name()));
    };
    // Placement's default target is the caller's project and user; `GET /usages`
    // names only a project.
    let (target_project, target_user) = match target {
        Target::CallersProject => (
            identity.project_id.as_deref(),
            Some(identity.user_id.as_str()),
        ),
        Target::Project(project) => (project, None),
    };
    let file = ctx.policy_rules.as_deref();
    match judge(identity, mode, file, action, target_project, target_user) {
        Verdict::Allowed => Ok(()),
        Verdict::Denied | Verdict::WrongScope => Err(ApiError::forbidden(action.name())),
    }
}

/// Checks that the caller may perform `action` on something of its own project: 403
/// if not.
pub fn authorize(ctx: &Ctx, mode: PolicyMode, action: Action) -> Result<(), ApiError> {
    enforce(ctx, mode, action, Target::CallersProject)
}

/// Like [`authorize`], for an action on something that belongs to `target_project`
/// (`GET /usages?project_id=...` passes the queried project, `None` when absent).
pub fn authorize_target(
    ctx: &Ctx,
    mode: PolicyMode,
    action: Action,
    target_project: Option<&str>,
) -> Result<(), ApiError> {
    enforce(ctx, mode, action, Target::Project(target_project))
}

/// Whether a rule name is one the server registers (an action's or a base rule's),
/// for warning of the names a policy file gives that nothing uses.
pub fn is_builtin_rule(name: &str) -> bool {
    Action::by_name(name).is_some() || Base::by_name(name).is_some()
}

/// Every registered rule name: the actions in Placement's order, then the base rules.
pub fn builtin_rule_names() -> impl Iterator<Item = &'static str> {
    Action::ALL
        .iter()
        .map(|a| a.name())
        .chain(Base::ALL.iter().map(|b| b.name()))
}

/// The built-in rule `name` stands for under `mode`, written as a check string
/// (Placement's defaults; `@` where the open policy lets everyone through), and
/// whether it accepts project-scoped tokens only; None for a name that is not built in.
pub fn describe_builtin(mode: PolicyMode, name: &str) -> Option<(String, bool)> {
    let (rule, open) = if let Some(action) = Action::by_name(name) {
        (action.rule(), mode == PolicyMode::Open)
    } else {
        let base = Base::by_name(name)?;
        (base.rule(), mode == PolicyMode::Open && base != Base::Admin)
    };
    let check = if open {
        "@".to_owned()
    } else {
        match (&rule.deprecated, mode) {
            (Some(old), PolicyMode::Legacy) => {
                format!("({}) or ({})", check_text(&rule.check), check_text(old))
            }
            _ => check_text(&rule.check),
        }
    };
    Some((check, rule.scopes == [TokenScope::Project]))
}

fn check_text(check: &Check) -> String {
    let join = |checks: &[Check], op: &str| {
        checks
            .iter()
            .map(|c| match c {
                Check::Any(_) | Check::All(_) => format!("({})", check_text(c)),
                _ => check_text(c),
            })
            .collect::<Vec<_>>()
            .join(op)
    };
    match check {
        Check::Role(role) => format!("role:{role}"),
        Check::TargetProject => "project_id:%(project_id)s".to_owned(),
        Check::Rule(base) => format!("rule:{}", base.name()),
        Check::Any(checks) => join(checks, " or "),
        Check::All(checks) => join(checks, " and "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::microversion;
    use axum::http::StatusCode;
    use Action::*;

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
            ..Identity::default()
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
            ("metrics scraper", who("metrics", Some(MINE), false)),
        ]
    }

    use PolicyMode::{Legacy, Open, Secure};
    use Verdict::{Allowed as Y, Denied as N, WrongScope as S};

    /// (caller, action, target project, [legacy, secure, open]).
    const TABLE: &[(&str, Action, Option<&str>, [Verdict; 3])] = &[
        // Everything but usages and the reshaper: admin or service, project-scoped.
        ("admin", ProvidersList, None, [Y, Y, Y]),
        ("service", ProvidersList, None, [Y, Y, Y]),
        ("system admin", ProvidersList, None, [S, S, S]),
        ("system reader", TraitsList, None, [S, S, S]),
        ("project admin", AllocationsManage, None, [Y, Y, Y]),
        ("project member", ClassesCreate, None, [N, N, Y]),
        ("project reader", InventoriesList, None, [N, N, Y]),
        ("no roles", AllocationCandidatesList, None, [N, N, Y]),
        ("upper-case admin", ProviderTraitsDelete, None, [Y, Y, Y]),
        // Total usages: admins, services and readers of the queried project.
        ("admin", TotalUsages, Some(OTHER), [Y, Y, Y]),
        ("service", TotalUsages, Some(OTHER), [Y, Y, Y]),
        ("system admin", TotalUsages, Some(MINE), [S, S, S]),
        ("system reader", TotalUsages, None, [S, S, S]),
        ("project reader", TotalUsages, Some(MINE), [Y, Y, Y]),
        ("project member", TotalUsages, Some(MINE), [Y, Y, Y]),
        ("project reader", TotalUsages, Some(OTHER), [N, N, Y]),
        ("project reader", TotalUsages, None, [N, N, Y]),
        ("no roles", TotalUsages, Some(MINE), [N, N, Y]),
        // Provider usages are not project-bound.
        ("project reader", ProviderUsages, Some(MINE), [N, N, Y]),
        // The reshaper: services only, plus admins under the deprecated default.
        ("service", Reshape, None, [Y, Y, Y]),
        ("admin", Reshape, None, [Y, N, Y]),
        ("project admin", Reshape, None, [Y, N, Y]),
        ("project member", Reshape, None, [N, N, Y]),
        ("system admin", Reshape, None, [S, S, S]),
        // Class metadata: read as the class list, written by admins only.
        ("service", ClassMetadataShow, None, [Y, Y, Y]),
        ("project reader", ClassMetadataShow, None, [N, N, Y]),
        ("admin", ClassMetadataUpdate, None, [Y, Y, Y]),
        ("project admin", ClassMetadataUpdate, None, [Y, Y, Y]),
        ("service", ClassMetadataUpdate, None, [N, N, Y]),
        ("project member", ClassMetadataUpdate, None, [N, N, Y]),
        ("system admin", ClassMetadataUpdate, None, [S, S, S]),
        // Claims: as allocations, admins and services, project-scoped.
        ("admin", ClaimsCreate, None, [Y, Y, Y]),
        ("service", ClaimsConfirm, None, [Y, Y, Y]),
        ("project admin", ClaimsRelease, None, [Y, Y, Y]),
        ("project member", ClaimsCreate, None, [N, N, Y]),
        ("project reader", ClaimsList, None, [N, N, Y]),
        ("service", ClaimsShow, None, [Y, Y, Y]),
        ("no roles", ClaimsPending, None, [N, N, Y]),
        ("system admin", ClaimsPending, None, [S, S, S]),
        // Metrics: admins and the metrics role, which reads nothing else.
        ("admin", MetricsShow, None, [Y, Y, Y]),
        ("metrics scraper", MetricsShow, None, [Y, Y, Y]),
        ("service", MetricsShow, None, [N, N, Y]),
        ("project reader", MetricsShow, None, [N, N, Y]),
        ("system admin", MetricsShow, None, [S, S, S]),
        ("metrics scraper", ProvidersList, None, [N, N, Y]),
        // Headroom: as usages, readers too.
        ("admin", Headroom, None, [Y, Y, Y]),
        ("service", Headroom, None, [Y, Y, Y]),
        ("project reader", Headroom, Some(MINE), [Y, Y, Y]),
        ("no roles", Headroom, Some(MINE), [N, N, Y]),
        ("system admin", Headroom, None, [S, S, S]),
        ("project reader", Explain, Some(MINE), [Y, Y, Y]),
        ("no roles", Explain, Some(MINE), [N, N, Y]),
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
                    judge(identity, mode, None, *action, *target, None),
                    *want,
                    "{name} {action:?} {target:?} in {mode:?}"
                );
            }
        }
    }

    #[test]
    fn only_the_reshaper_tells_legacy_from_secure() {
        for (name, identity) in callers() {
            for &action in Action::ALL {
                for target in [None, Some(MINE), Some(OTHER)] {
                    let legacy = judge(&identity, Legacy, None, action, target, None);
                    let secure = judge(&identity, Secure, None, action, target, None);
                    if action != Reshape {
                        assert_eq!(legacy, secure, "{name} {action:?} {target:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn admin_api_stays_closed_when_the_policy_is_open() {
        let callers = callers();
        let subject = |caller: &str, mode| {
            let (_, identity) = callers.iter().find(|(n, _)| *n == caller).unwrap();
            Subject {
                identity,
                mode,
                target_project: None,
                target_user: None,
                file: None,
            }
            .base_passes(Base::Admin)
        };
        for mode in [Legacy, Secure, Open] {
            assert!(!subject("no roles", mode), "{mode:?}");
            assert!(subject("admin", mode), "{mode:?}");
        }
        // Every other base rule opens.
        let nobody = &callers.iter().find(|(n, _)| *n == "no roles").unwrap().1;
        let open = Subject {
            identity: nobody,
            mode: Open,
            target_project: None,
            target_user: None,
            file: None,
        };
        assert!(open.base_passes(Base::Service));
        assert!(open.base_passes(Base::ProjectReader));
    }

    #[test]
    fn every_action_has_its_own_placement_name() {
        for (i, action) in Action::ALL.iter().enumerate() {
            // Placement's rules, and our extensions' under a prefix of their own.
            let ours = matches!(
                action,
                ClassMetadataShow
                    | ClassMetadataUpdate
                    | ClaimsCreate
                    | ClaimsList
                    | ClaimsShow
                    | ClaimsConfirm
                    | ClaimsRelease
                    | ClaimsPending
                    | ServerGroupsCreate
                    | ServerGroupsList
                    | ServerGroupsShow
                    | ServerGroupsDelete
                    | ServerGroupsMembers
                    | DrainsCreate
                    | DrainsShow
                    | DrainsConfirm
                    | DrainsDelete
                    | MetricsShow
                    | Headroom
                    | Explain
                    | ConsumersList
                    | Audit
                    | AuditDelete
                    | DryRun
                    | ShapesShow
                    | ShapesUpdate
                    | ShapesDelete
            );
            let prefix = if ours { "allot:" } else { "placement:" };
            assert!(action.name().starts_with(prefix), "{action:?}");
            assert!(
                Action::ALL[..i].iter().all(|a| a.name() != action.name()),
                "{} named twice",
                action.name()
            );
        }
        assert_eq!(Action::ALL.len(), 60);
        assert_eq!(Reshape.name(), "placement:reshaper:reshape");
    }

    fn ctx(identity: Option<Identity>) -> Ctx {
        Ctx {
            request_id: "req-test".into(),
            version: microversion::MAX,
            identity,
            accept: None,
            policy_rules: None,
        }
    }

    #[test]
    fn requests_get_placements_answers() {
        let reader = ctx(Some(who("reader", Some(MINE), false)));
        let denied = authorize(&reader, Legacy, TraitsList).unwrap_err();
        assert_eq!(denied.status, StatusCode::FORBIDDEN);
        assert_eq!(
            denied.message,
            "Policy does not allow placement:traits:list to be performed."
        );
        // The default target is the caller's own project.
        assert!(authorize(&reader, Secure, TotalUsages).is_ok());
        assert!(authorize_target(&reader, Secure, TotalUsages, Some(MINE)).is_ok());
        let other = authorize_target(&reader, Secure, TotalUsages, Some(OTHER));
        assert_eq!(other.unwrap_err().status, StatusCode::FORBIDDEN);
        // A target of no project is not the caller's project.
        let none = authorize_target(&reader, Secure, TotalUsages, None);
        assert_eq!(none.unwrap_err().status, StatusCode::FORBIDDEN);

        let anonymous = ctx(None);
        let err = authorize(&anonymous, Open, TraitsList).unwrap_err();
        assert_eq!(err.status, StatusCode::FORBIDDEN);
    }

    fn with_file(
        text: &str,
        caller: &str,
        mode: PolicyMode,
        action: Action,
        target: Option<&str>,
    ) -> Verdict {
        let rules = crate::policy_file::parse_rules(text).unwrap();
        let callers = callers();
        let (_, identity) = callers.iter().find(|(n, _)| *n == caller).unwrap();
        judge(identity, mode, Some(&rules), action, target, Some("user"))
    }

    #[test]
    fn a_file_replaces_the_rules_it_names() {
        let file = "\"placement:resource_providers:list\": \"role:reader or role:admin\"\n\
                    \"placement:resource_providers:create\": \"!\"\n";
        for mode in [Legacy, Secure, Open] {
            assert_eq!(
                with_file(file, "project reader", mode, ProvidersList, None),
                Y
            );
            assert_eq!(with_file(file, "no roles", mode, ProvidersList, None), N);
            assert_eq!(with_file(file, "admin", mode, ProvidersCreate, None), N);
            // The action's token scopes stay.
            assert_eq!(
                with_file(file, "system reader", mode, ProvidersList, None),
                S
            );
        }
        // Rules the file does not name keep the mode's behaviour.
        assert_eq!(with_file(file, "admin", Secure, ProvidersShow, None), Y);
        assert_eq!(
            with_file(file, "project reader", Secure, ProvidersShow, None),
            N
        );
        assert_eq!(
            with_file(file, "project reader", Open, ProvidersShow, None),
            Y
        );
        // An overridden rule drops its deprecated default in legacy mode.
        let reshape = "\"placement:reshaper:reshape\": \"role:service\"\n";
        assert_eq!(with_file(reshape, "admin", Legacy, Reshape, None), N);
    }

    #[test]
    fn file_checks_evaluate_every_operator() {
        let one = |check: &str, caller: &str, target: Option<&str>| {
            let text = format!("\"placement:usages\": \"{check}\"\n");
            with_file(&text, caller, Secure, TotalUsages, target) == Y
        };
        assert!(one("", "no roles", None));
        assert!(one("@", "no roles", None));
        assert!(!one("!", "admin", None));
        assert!(one("role:READER", "project reader", None));
        assert!(!one("not role:reader", "project reader", None));
        assert!(one(
            "role:reader and project_id:%(project_id)s",
            "project reader",
            Some(MINE)
        ));
        assert!(!one(
            "role:reader and project_id:%(project_id)s",
            "project reader",
            Some(OTHER)
        ));
        assert!(one("user_id:%(user_id)s", "no roles", None));
        assert!(one("role:nope or role:member", "project member", None));
        // and binds tighter than or; parentheses change that.
        assert!(one("role:admin or role:x and !", "admin", None));
        assert!(!one("(role:admin or role:x) and !", "admin", None));
        // rule: reaches built-in base rules, actions, and the file's own aliases.
        assert!(one("rule:admin_or_service_api", "service", None));
        assert!(!one("rule:admin_api", "service", None));
        assert!(one("rule:project_reader_api", "project reader", Some(MINE)));
        assert!(one("rule:placement:traits:list", "admin", None));
        assert!(!one("rule:no_such_rule", "admin", None));
        let alias = "\"readers\": \"role:reader\"\n\"placement:usages\": \"rule:readers\"\n";
        assert_eq!(
            with_file(alias, "project reader", Secure, TotalUsages, None),
            Y
        );
    }

    #[test]
    fn a_file_can_redefine_a_base_rule_the_defaults_use() {
        // Every admin-or-service action follows a new admin_or_service_api.
        let file = "\"admin_or_service_api\": \"role:operator\"\n";
        let rules = crate::policy_file::parse_rules(file).unwrap();
        let operator = who("operator", Some(MINE), false);
        let admin = who("admin", Some(MINE), false);
        for action in [TraitsList, ClaimsCreate, InventoriesUpdate] {
            assert_eq!(
                judge(&operator, Secure, Some(&rules), action, None, None),
                Y
            );
            assert_eq!(judge(&admin, Secure, Some(&rules), action, None, None), N);
        }
        // The open policy sets the actions themselves to "@", so a base rule no
        // longer matters there.
        assert_eq!(judge(&admin, Open, Some(&rules), TraitsList, None, None), Y);
    }

    #[test]
    fn builtin_rules_are_described() {
        let text = |mode, name| describe_builtin(mode, name).unwrap();
        assert_eq!(
            text(Secure, "placement:usages"),
            (
                "rule:admin_or_project_reader_or_service_api".to_owned(),
                true
            )
        );
        assert_eq!(
            text(Legacy, "project_reader_api"),
            (
                "(role:reader and project_id:%(project_id)s) or (role:admin)".to_owned(),
                false
            )
        );
        assert_eq!(text(Open, "placement:traits:list"), ("@".to_owned(), true));
        assert_eq!(text(Open, "admin_api"), ("role:admin".to_owned(), true));
        assert_eq!(
            text(Secure, "admin_or_project_reader_or_service_api"),
            (
                "role:admin or rule:project_reader_api or role:service".to_owned(),
                true
            )
        );
        assert_eq!(describe_builtin(Secure, "nope"), None);
        assert_eq!(builtin_rule_names().count(), Action::ALL.len() + 5);
        assert!(is_builtin_rule("admin_api") && !is_builtin_rule("system_reader_api"));
    }
}
