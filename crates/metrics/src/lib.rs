//! volley-metrics: the recorder: per-second HDR histograms, summaries and their output formats.
#![deny(missing_docs)]
