//! Write operations for aggregates (to be written).

#[allow(unused_imports)]
use crate::state::State;
