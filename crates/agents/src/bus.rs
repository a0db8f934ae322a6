//! bus
