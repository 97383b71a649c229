//! Authorization: which callers may do what.
//!
//! Placement's default rules (legacy mode, `enforce_new_defaults = False`) let admins
//! and services do everything and others nothing, except reading their own project's
//! usages. `open` (for tests of the API itself) lets anyone do anything but the
//! admin-only rules. The full secure-RBAC rule set comes with the auth work.

use crate::context::Ctx;
use crate::error::ApiError;

/// Which rule set applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PolicyMode {
    /// Placement's deprecated defaults OR'd with the new ones (its default).
    #[default]
    Legacy,
    /// The new defaults only.
    Secure,
    /// Everything allowed to anyone with a token.
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

/// Checks that the caller may perform `action` (a Placement policy name such as
/// `placement:resource_classes:list`), which by default needs the admin or service role.
pub fn authorize(ctx: &Ctx, mode: PolicyMode, action: &str) -> Result<(), ApiError> {
    let Some(identity) = &ctx.identity else {
        return Err(ApiError::forbidden(action));
    };
    let allowed = match mode {
        PolicyMode::Open => true,
        PolicyMode::Legacy | PolicyMode::Secure => {
            identity.has_role("admin") || identity.has_role("service")
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(ApiError::forbidden(action))
    }
}
