//! Write operations for providers (to be written).

#[allow(unused_imports)]
use crate::state::State;
