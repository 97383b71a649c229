//! Write operations for inventories (to be written).

#[allow(unused_imports)]
use crate::state::State;
