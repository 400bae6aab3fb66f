//! How the `almanac` executable is linked, for the cost of a short
//! command's start (`bench/startup.sh` measures it):
//!
//! * At a fixed address (not position independent) on Linux with glibc: a
//!   position-independent executable of this size has ~47,000 relocations
//!   that the dynamic loader applies at every start, writing ~220 pages of
//!   read-only data (a private copy of each) before `main` runs. At a fixed
//!   address the linker resolves them once. Libraries, heap, stacks and
//!   mappings stay randomised; `ALMANAC_PIE=1` at build time keeps a
//!   position-independent executable.
//! * The functions the short commands run first, together
//!   (`scripts/startup-symbols.txt`, written by `scripts/startup-symbols`):
//!   the kernel maps code 64 KiB at a time around each page a process
//!   first runs, so start-up code spread over the whole 18 MB of code costs
//!   a page fault per function; gathered, a few dozen. Only with the linker
//!   rustc brings for x86-64 Linux (lld, from Rust 1.90), which reads such
//!   a list; names it does not find are skipped.
use std::env;
use std::process::Command;

const STARTUP_SYMBOLS: &str = "scripts/startup-symbols.txt";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={STARTUP_SYMBOLS}");
    println!("cargo:rerun-if-env-changed=ALMANAC_PIE");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let pie = env::var_os("ALMANAC_PIE").is_some_and(|v| v == "1");
    if os == "linux" && target_env == "gnu" && !pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    let dir = env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let symbols = std::path::Path::new(&dir).join(STARTUP_SYMBOLS);
    if symbols.is_file() && links_with_rusts_lld() {
        let symbols = symbols.display();
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={symbols}");
        // Names from another build (a newer compiler changes their hashes)
        // are expected; the list only orders what it finds.
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the executable is linked by the lld rustc ships: x86-64 Linux
/// with glibc, Rust 1.90 or later, and no linker chosen by the user.
fn links_with_rusts_lld() -> bool {
    if env::var("TARGET").unwrap_or_default() != "x86_64-unknown-linux-gnu"
        || env::var_os("RUSTC_LINKER").is_some()
    {
        return false;
    }
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if ["linker", "link-self-contained", "fuse-ld"]
        .iter()
        .any(|choice| flags.contains(choice))
    {
        return false;
    }
    rustc_minor_version().is_some_and(|minor| minor >= 90)
}

/// The minor version of the rustc building this crate (`1.N.x`).
fn rustc_minor_version() -> Option<u32> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}
