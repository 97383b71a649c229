//! The reshaper (to be written).

#[allow(unused_imports)]
use crate::state::State;
