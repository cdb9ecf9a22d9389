#!/usr/bin/env bash
# Builds the WebAssembly plugin components and copies them where the repo expects them.
#
# Every workspace crate whose Cargo.toml has
#     [package.metadata.crewbox]
#     wasm = "<path relative to the repo root>"
# is built with `cargo build --profile plugin --target wasm32-wasip2` and its
# component copied to that path.
#
# Usage:
#   scripts/build-wasm.sh           build and update the committed components
#   scripts/build-wasm.sh --check   build into a temp dir and fail if any committed
#                                   component differs byte-for-byte (CI)
#
# Builds are reproducible: the repo, CARGO_HOME and the target dir are remapped out of
# the binaries, so the same toolchain gives the same bytes from any checkout.
# Respects CARGO_TARGET_DIR.
set -euo pipefail

TARGET=wasm32-wasip2
PROFILE=plugin

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

mode=build
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    -h | --help) usage; exit 0 ;;
    *) echo "build-wasm: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null || (cd "$script_dir/.." && pwd))"
cd "$root"

target_dir="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd)"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

# The wasm target: install it if missing. CI without it must not fail a --check.
has_target() {
    [[ -d "$(rustc --print sysroot)/lib/rustlib/$TARGET" ]]
}
if ! has_target; then
    echo "build-wasm: target $TARGET missing, trying 'rustup target add $TARGET'" >&2
    if ! { command -v rustup >/dev/null && rustup target add "$TARGET" >&2 && has_target; }; then
        if [[ $mode == check ]]; then
            echo "build-wasm: skipped: target $TARGET unavailable"
            exit 0
        fi
        echo "build-wasm: error: target $TARGET unavailable; install it with 'rustup target add $TARGET'" >&2
        exit 1
    fi
fi

# Prints "<crate> <wasm path>" for each workspace crate that declares a component.
plugin_crates() {
    cargo metadata --format-version 1 --no-deps --offline 2>/dev/null \
        || cargo metadata --format-version 1 --no-deps
}
manifests="$(plugin_crates | grep -o '"manifest_path":"[^"]*"' | sed 's/^"manifest_path":"//; s/"$//')"

crates=()
outputs=()
while IFS= read -r manifest; do
    [[ -n $manifest ]] || continue
    entry="$(awk '
        /^\[/ { section = $0 }
        section == "[package]" && $1 == "name" && !name { n = $0; sub(/^[^"]*"/, "", n); sub(/".*$/, "", n); name = n }
        section == "[package.metadata.crewbox]" && $1 == "wasm" { w = $0; sub(/^[^"]*"/, "", w); sub(/".*$/, "", w); wasm = w }
        END { if (name && wasm) print name " " wasm }
    ' "$manifest")"
    if [[ -n $entry ]]; then
        crates+=("${entry%% *}")
        outputs+=("${entry#* }")
    fi
done <<<"$manifests"

if [[ ${#crates[@]} -eq 0 ]]; then
    echo "build-wasm: no crate declares [package.metadata.crewbox] wasm" >&2
    exit 1
fi

# Only the wasm build sees these flags (a --target build never applies RUSTFLAGS to
# build scripts or proc-macros); they replace any user RUSTFLAGS so output is stable.
sep=$'\x1f'
flags="--remap-path-prefix=$root=/crewbox${sep}--remap-path-prefix=$cargo_home=/cargo${sep}--remap-path-prefix=$target_dir=/target"
unset RUSTFLAGS
export CARGO_ENCODED_RUSTFLAGS="$flags"
export CARGO_TARGET_DIR="$target_dir"

pkg_args=()
for c in "${crates[@]}"; do
    pkg_args+=(-p "$c")
done
echo "build-wasm: building ${crates[*]}" >&2
cargo build --locked --profile "$PROFILE" --target "$TARGET" "${pkg_args[@]}"

built_dir="$target_dir/$TARGET/$PROFILE"
if [[ $mode == check ]]; then
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
fi

mismatches=()
for i in "${!crates[@]}"; do
    crate="${crates[$i]}"
    out="${outputs[$i]}"
    built="$built_dir/${crate//-/_}.wasm"
    if [[ ! -f $built ]]; then
        echo "build-wasm: error: $crate built no component at $built (is it a cdylib?)" >&2
        exit 1
    fi
    if [[ $mode == check ]]; then
        fresh="$scratch/$i.wasm"
        cp "$built" "$fresh"
        if [[ ! -f $out ]]; then
            mismatches+=("$out (missing; built from $crate)")
        elif ! cmp -s "$fresh" "$out"; then
            mismatches+=("$out (differs from a fresh build of $crate: $(wc -c <"$out") committed vs $(wc -c <"$fresh") built bytes)")
        fi
    else
        mkdir -p "$(dirname "$out")"
        cp "$built" "$out"
        echo "build-wasm: $out ($(wc -c <"$out") bytes)" >&2
    fi
done

if [[ $mode == check ]]; then
    if [[ ${#mismatches[@]} -gt 0 ]]; then
        echo "build-wasm: error: committed components are stale:" >&2
        printf '  %s\n' "${mismatches[@]}" >&2
        echo "build-wasm: run scripts/build-wasm.sh and commit the result" >&2
        exit 1
    fi
    echo "build-wasm: ok: ${#crates[@]} components match a fresh build"
fi
