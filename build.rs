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
//! The records were only half of it: the loader still writes every pointer they name,
//! so the whole of `.data.rel.ro` (1.7 MB here, vtables and tables of `&str`) became
//! private dirty memory in every run, read or not. Linked as a fixed-address executable
//! (`-no-pie`), those pointers are final in the file: no relocation at start, and only
//! the pages a run reads are resident, shared with every other volley process. The
//! cost is that the executable's own code and data are not placed at a random address
//! (ASLR still places the libraries, heap and stacks); volley is a lab tool whose own
//! memory at 64 connections is a measured goal (`bench/engine.py`, the memory case).
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        // After rustc's own `-pie`: the later of the two wins.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
