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
//!
//! It also packs the built-in plugins (`plugins/dist/*.wasm`, for every profile) into
//! `OUT_DIR`, where `plugin/builtin.rs` embeds them: each is its length (4 bytes,
//! little-endian) and its raw DEFLATE stream. The seven components take 0.3 instead of
//! 0.8 MB of the binary; the crewbox that runs one unpacks it once. The packed bytes are
//! unpacked here again and compared, so a binary never carries a plugin it cannot unpack.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    pack_builtins();
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

/// Packs every `plugins/dist/*.wasm` into `OUT_DIR` (the format is in the module doc).
/// A build script reports a failure by panicking: the build stops with its message.
#[allow(clippy::expect_used, clippy::unwrap_used)]
fn pack_builtins() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let dist = Path::new(&manifest).join("../plugins/dist");
    // A directory: cargo reruns this when any file in it changes.
    println!("cargo:rerun-if-changed={}", dist.display());
    let entries = std::fs::read_dir(&dist).unwrap_or_else(|e| {
        panic!(
            "cannot list the built-in plugins in {}: {e}",
            dist.display()
        )
    });
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "wasm") {
            continue;
        }
        let wasm =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let len = u32::try_from(wasm.len()).expect("a built-in plugin is under 4 GiB");
        let deflated = miniz_oxide::deflate::compress_to_vec(&wasm, 10);
        let back = miniz_oxide::inflate::decompress_to_vec_with_limit(&deflated, wasm.len());
        assert!(
            back.ok().as_deref() == Some(&wasm[..]),
            "{} does not unpack to itself",
            path.display()
        );
        let mut packed = len.to_le_bytes().to_vec();
        packed.extend_from_slice(&deflated);
        let name = path.file_name().unwrap();
        let target = Path::new(&out).join(name);
        std::fs::write(&target, packed)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", target.display()));
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
