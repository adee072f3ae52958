//! Composition of providers (being written).
