//! Link flags of the optimised `crewbox` binary (release, `release-lines`, bench), on
//! Linux only; debug and test builds are not touched.
//!
//! - An optimised binary that carries debug info (the `release-lines` profile, for
//!   backtraces with files and lines) has its DWARF sections compressed with zlib,
//!   which std's backtrace reads (zstd it does not).
//! - Relative relocations are packed (`-z pack-relative-relocs`, the `DT_RELR` format):
//!   the binary stays position-independent (ASLR), and its ~69,000 relative
//!   relocations take 26 KB instead of 1.6 MB (32.6 -> 31.0 MB stripped). glibc runs such a binary from 2.36 on;
//!   the binary requires the `GLIBC_ABI_DT_RELR` version, so an older glibc refuses to
//!   load it with a message naming that version instead of crashing. Hence the flag is
//!   given only where the build is for the machine it runs on (host = target), that
//!   machine's glibc is 2.36 or newer, and the linker is Rust's default one on x86-64
//!   Linux (LLD, since Rust 1.90): not with a linker set in the Cargo configuration or
//!   the flags, which may predate the option. `CREWBOX_PACK_RELOCS=0` turns it off.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CREWBOX_PACK_RELOCS");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let optimised = var("OPT_LEVEL") != "0";
    let debug_info = var("DEBUG") == "true";
    let linux = var("CARGO_CFG_TARGET_OS") == "linux";
    if !(optimised && linux) {
        return;
    }
    if debug_info {
        println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
    let target = var("TARGET");
    let default_linker =
        var("RUSTC_LINKER").is_empty() && !var("CARGO_ENCODED_RUSTFLAGS").contains("linker");
    let wanted = var("CREWBOX_PACK_RELOCS") != "0";
    if wanted
        && target == "x86_64-unknown-linux-gnu"
        && var("HOST") == target
        && default_linker
        && glibc_at_least(2, 36)
    {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The version of the build machine's glibc (`getconf GNU_LIBC_VERSION` prints
/// `glibc 2.36`) is at least `major.minor`; false when it cannot be told.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}
