//! Reading back figures that may be infinite: serde_json writes an infinite `f64` as
//! `null`, so a stored trend with a perfect line (t = inf) must read `null` as infinity,
//! or the whole verdict around it would fail to load.

use serde::{Deserialize, Deserializer};

/// `null` -> +infinity, a number -> itself.
pub(crate) fn null_is_infinite<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}
