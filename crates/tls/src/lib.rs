//! volley-tls: TLS for the load generator and the targets, with no I/O of its own.
//!
//! Place in the flow: beside the engine. The CLI resolves `--tls-version`, `--insecure`,
//! `--cacert`, `--cert/--key`, resumption and ALPN flags into a [`ClientTls`]; each
//! engine worker builds one `Arc<rustls::ClientConfig>` from it and drives one
//! [`TlsSession`] per connection from its own non-blocking event loop (this crate does
//! not depend on the engine). A failed session is a [`TlsFailure`]: the engine counts
//! it as one error kind, reports keep its cause. On the target side, [`certs`] makes
//! throw-away CA and server certificates for managed servers and [`ServerTls`] turns
//! them into an `Arc<rustls::ServerConfig>` for the built-in server.
//!
//! - [`client`]: options, version policy, server names, the verifiers;
//! - [`session`]: the sans-IO client session;
//! - [`stream`]: that session over any `Read + Write` stream, blocking or not;
//! - [`server`]: server config from PEM files;
//! - [`certs`]: rcgen certificates (valid, expired, wrong host, self-signed);
//! - [`pem`]: PEM loading and the system CA bundle.
//!
//! Crypto is rustls with the ring provider (aws-lc-rs needs cmake and nasm to build).
#![deny(missing_docs)]

pub mod certs;
pub mod client;
mod der;
mod error;
pub mod pem;
pub mod server;
pub mod session;
pub mod stream;

pub use client::{
    certificates_checked_on_this_thread, server_name, ClientTls, VersionPolicy, ALPN_H2,
    ALPN_HTTP11,
};
pub use error::{TlsConfigError, TlsFailure};
pub use server::ServerTls;
pub use session::{Progress, TlsSession, TlsVersion};
pub use stream::TlsStream;

/// rustls, re-exported so callers name the same version's types.
pub use rustls;
