//! Build script of the `volley` binary: link options only, no generated code.
//!
//! Why: a position-independent executable carries one relocation record per pointer in
//! its read-only data (vtables, string tables: ~65,000 here), and the dynamic loader
//! reads them all at start-up, so 1.5 MB of `.rela.dyn` sat in every run's resident
//! memory. Packed relative relocations (`DT_RELR`, glibc 2.36+, binutils 2.38+) encode
//! the same in a few kilobytes. An older linker ignores the option with a warning; a
//! binary linked with it names the glibc feature it needs, so an older glibc refuses it
//! at start with a clear message rather than misbehaving.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
