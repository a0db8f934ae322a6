//! volley-docroot: a docroot on disk as both built-in servers see it: [`path::resolve`],
//! the one gate from a request target to a file under the root (traversal, NUL bytes,
//! escaping symlinks and volley's own `.volley-*` files refused), and [`mime`], the one
//! Content-Type table.
//!
//! Place in the flow: a target's lowest layer. `volley-server` (static GET/HEAD) and
//! `volley-dav` (every DAV method) both look files up here, so a file is reachable, and
//! has the same type, over GET and PROPFIND alike; `volley-targets` takes its managed
//! servers' Content-Types from the same table.
#![deny(missing_docs)]

pub mod mime;
pub mod path;
