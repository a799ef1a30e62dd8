//! GitHub forge (being written).
