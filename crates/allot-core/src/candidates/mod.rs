//! Allocation candidates (to be written).
