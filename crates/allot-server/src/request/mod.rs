//! The request side of the wire contract, the mirror of [`crate::wire`]: each query
//! string and body a handler reads, parsed and checked once at the edge into a typed
//! value, with Placement's refusals and wording. Handlers take these values and pass
//! them inward; nothing past this layer looks at request text again.

pub mod candidates;
