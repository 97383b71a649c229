//! Write operations for provider_traits (to be written).

#[allow(unused_imports)]
use crate::state::State;
