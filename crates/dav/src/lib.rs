//! volley-dav: the WebDAV/CalDAV subset the built-in server speaks, as a pure request -> response handler.
#![deny(missing_docs)]
