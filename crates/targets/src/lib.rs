//! volley-targets: managed targets: real servers started with generated configs, capped and stopped.
#![deny(missing_docs)]
