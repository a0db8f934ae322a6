//! Integration tests: several injectors: `volley agent` over NATS, a bus that goes away,
//! Kubernetes manifests and Jobs, SSH hosts.
//!
//! One binary for the area (Cargo.toml `autotests = false`); each module is one file of
//! `tests/`, and the helpers they share are declared here once.

mod common;
mod sshd;

mod agents_manifest_cli;
mod injectors;
mod injectors_bus;
mod injectors_faults;
mod injectors_k8s;
mod injectors_netns;
mod injectors_ssh;
