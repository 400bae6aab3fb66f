//! Links the `almanac` executable at a fixed address (not position
//! independent) on Linux with glibc: a position-independent executable of
//! this size has ~47,000 relocations that the dynamic loader applies at
//! every start, writing ~220 pages of read-only data (a private copy of
//! each) before `main` runs, which doubled the cost of the shortest
//! commands. At a fixed address the linker resolves them once.
//! Libraries, heap, stacks and mappings stay randomised; `ALMANAC_PIE=1`
//! at build time keeps a position-independent executable.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ALMANAC_PIE");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let pie = std::env::var_os("ALMANAC_PIE").is_some_and(|v| v == "1");
    if os == "linux" && env == "gnu" && !pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
