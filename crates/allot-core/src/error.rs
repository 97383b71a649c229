//! Errors of the domain rules.
//!
//! Callers branch on the variant (the HTTP layer maps each one to a status and a stable
//! Placement error code with one exhaustive `match`); the message is for people and is
//! worded like OpenStack Placement's, because clients and its test suite look for
//! those words.

/// A domain result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a request was refused by the domain rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The request is well formed but asks for something the rules forbid
    /// (an invalid inventory, a name of the wrong form, ...).
    #[error("{0}")]
    Invalid(String),
    /// Something the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the current state.
    #[error("{message}")]
    Conflict {
        /// What kind of conflict, so that clients can branch on it.
        code: ConflictCode,
        /// A human-readable explanation.
        message: String,
    },
}

/// The kinds of conflict a client can tell apart (Placement's error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictCode {
    /// A generation did not match: someone else changed the object first.
    ConcurrentUpdate,
    /// A name or uuid is already taken.
    Duplicate,
    /// Inventory cannot change because allocations use it.
    InventoryInUse,
    /// A provider cannot be deleted because allocations use it.
    ProviderInUse,
    /// A provider cannot be deleted because it has children.
    CannotDeleteParent,
    /// A pending claim does not fit: a provider lacks the inventory, the amount
    /// breaks its constraints, or it would exceed the capacity (an allot extension).
    ClaimDoesNotFit,
    /// A claim that is no longer pending (released or expired) cannot be confirmed
    /// (an allot extension).
    ClaimNotPending,
    /// A write would make a hard server group rule more broken (an allot
    /// extension, issue 44).
    ServerGroupViolated,
    /// Any other conflict.
    Other,
}

impl Error {
    /// A conflict of the given kind.
    pub fn conflict(code: ConflictCode, message: impl Into<String>) -> Self {
        Error::Conflict {
            code,
            message: message.into(),
        }
    }

    /// An invalid request.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }

    /// A missing object.
    pub fn not_found(message: impl Into<String>) -> Self {
        Error::NotFound(message.into())
    }
}
