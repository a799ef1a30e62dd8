//! Local forge (being written).
