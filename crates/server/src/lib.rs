//! volley-server: the built-in event-driven HTTP/1.1 server behind `volley serve`.
#![deny(missing_docs)]
