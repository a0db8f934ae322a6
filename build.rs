//! Build script of the `volley` binary: link options only, no generated code.
//!
//! Why: a position-independent executable carries one relocation record per pointer in
//! its read-only data (vtables, string tables: ~65,000 here), and the dynamic loader
//! reads them all at start-up, so 1.5 MB of `.rela.dyn` sat in every run's resident
//! memory. Packed relative relocations (`DT_RELR`, glibc 2.36+, binutils 2.38+) encode
//! the same in a few kilobytes. An older linker ignores the option with a warning; a
//! binary linked with it names the glibc feature it needs, so an older glibc refuses it
//! at start with a clear message rather than misbehaving.
//!
//! The records are only half of it: the loader still writes every pointer they name, so
//! the whole of `.data.rel.ro` (1.7 MB here) becomes private memory in every run. Linking
//! a fixed-address executable (`-no-pie`) would avoid that (about 1.5 MB of the
//! 64-connection memory goal), but the executable's own code would then always sit at
//! the same address, and `volley serve` and `volley agent` listen on networks a user
//! shares: address randomisation stays.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
