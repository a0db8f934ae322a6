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
//!
//! The code: a bench at 64 connections runs about 1 MB of the executable's 17 MB of
//! code, scattered in ThinLTO's order, and the kernel maps 64-128 KB around each code
//! page a process touches, so that 1 MB cost 5-6 MB resident in every run.
//! `link/code-order.txt` (written by `scripts/code_order.py` from profiled runs) names
//! those functions, and lld lays them out together (`--symbol-ordering-file`): 4 MB less
//! at 64 connections. It is a layout hint: a stale name is skipped, an unlisted function
//! placed after the listed ones. Only lld reads it, so it is passed only where rustc
//! links with lld on its own (x86_64 Linux with glibc since Rust 1.90) and no flag
//! chose another linker; an optimised build only (a debug build's names differ).
fn main() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let (os, env) = (var("CARGO_CFG_TARGET_OS"), var("CARGO_CFG_TARGET_ENV"));
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let order = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("link/code-order.txt");
    if links_with_lld(&var) && var("OPT_LEVEL") != "0" && order.is_file() {
        let path = order.to_string_lossy();
        // `-Wl,` splits its argument at commas.
        if !path.contains(',') {
            println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={path}");
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/code-order.txt");
}

/// Whether rustc links this build with its own lld: the default for
/// x86_64-unknown-linux-gnu since Rust 1.90, unless the flags pick a linker flavour,
/// linker features or `-fuse-ld` themselves.
fn links_with_lld(var: &dyn Fn(&str) -> String) -> bool {
    let target = var("TARGET") == "x86_64-unknown-linux-gnu";
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let chosen = ["linker-features", "linker-flavor", "fuse-ld"]
        .iter()
        .any(|k| flags.contains(k));
    let rustc = std::process::Command::new(var("RUSTC"))
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let minor = rustc
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    target && !chosen && minor.is_some_and(|m| m >= 90)
}
