//! Vetting (being written).
