//! volley-faultserver: a deliberately misbehaving HTTP/1.1 server for the integration tests.
#![deny(missing_docs)]
