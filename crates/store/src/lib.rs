//! volley-store: the SQLite results store: studies, runs, steps, series and histograms.
#![deny(missing_docs)]
