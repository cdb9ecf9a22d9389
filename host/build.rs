//! One link flag: an optimised binary that carries debug info (the `release-lines`
//! profile, for backtraces with files and lines) has its DWARF sections compressed with
//! zlib, which std's backtrace reads (zstd it does not). The release binary carries no
//! debug info and the tests are not optimised, so neither is touched.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let optimised = var("OPT_LEVEL") != "0";
    let debug_info = var("DEBUG") == "true";
    let linux = var("CARGO_CFG_TARGET_OS") == "linux";
    if optimised && debug_info && linux {
        println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
}
