#!/usr/bin/env bash
# Installs what the test suite needs besides Rust, into the target directory, and
# exports where it is. Sourced by scripts/test; safe to run again (it only installs
# what is missing).
#
# Every peer is optional for a plain `cargo test`: a test whose peer is missing says so
# on stderr and skips. scripts/test sets CREWBOX_REQUIRE_PEERS=1, under which a missing
# peer fails its test instead — so a step that cannot install is never a silent pass.
#
# Exports:
#   CREWBOX_TEST_VENV      a Python venv with the pinned PyPI peers (bin/ inside)
#   CREWBOX_TEST_NODE      a directory with the pinned npm peers (node_modules/.bin inside)
#   CREWBOX_TEST_PEERS     space-separated names of the peers that installed

_td_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_td_target="${CARGO_TARGET_DIR:-$_td_root/target}"
mkdir -p "$_td_target"
_td_target="$(cd "$_td_target" && pwd)"
export CREWBOX_TEST_VENV="$_td_target/test-venv"
export CREWBOX_TEST_NODE="$_td_target/test-node"
CREWBOX_TEST_PEERS="${CREWBOX_TEST_PEERS:-}"

_td_loud() {
    echo "" >&2
    echo "!!! test-deps: $*" >&2
    echo "!!! the tests that need it will FAIL under scripts/test (CREWBOX_REQUIRE_PEERS=1)" >&2
    echo "" >&2
}

# PyPI packages, pinned: name==version -> peer name.
_td_pip() {
    local spec="$1" peer="$2"
    # A venv has its own path baked into its scripts: one copied or moved with the
    # target directory is broken, so it is made again.
    if [ -e "$CREWBOX_TEST_VENV/bin/pip" ] &&
        [ "$(head -n 1 "$CREWBOX_TEST_VENV/bin/pip")" != "#!$CREWBOX_TEST_VENV/bin/python" ] &&
        [ "$(head -n 1 "$CREWBOX_TEST_VENV/bin/pip")" != "#!$CREWBOX_TEST_VENV/bin/python3" ]; then
        echo "test-deps: $CREWBOX_TEST_VENV was made at another path; making it again" >&2
        rm -rf "$CREWBOX_TEST_VENV"
    fi
    if [ ! -x "$CREWBOX_TEST_VENV/bin/python" ]; then
        python3 -m venv "$CREWBOX_TEST_VENV" || { _td_loud "cannot create a venv with python3"; return 1; }
    fi
    local stamp="$CREWBOX_TEST_VENV/.installed-$spec"
    if [ ! -e "$stamp" ]; then
        if "$CREWBOX_TEST_VENV/bin/pip" install -q --disable-pip-version-check "$spec"; then
            touch "$stamp"
        else
            _td_loud "pip could not install $spec from PyPI"
            return 1
        fi
    fi
    CREWBOX_TEST_PEERS="$CREWBOX_TEST_PEERS $peer"
}

_td_pip componentize-py==0.25.1 componentize-py || true
# A third-party mock of the OpenAI and Anthropic APIs (streaming, tool calls, usage,
# errors): the provider peer test runs multi-turn agents against it.
_td_pip llm-mock-api==0.1.2 llm-mock-api || true
# The official OTLP protobuf messages (protobuf pinned first, so the pair is fixed):
# the telemetry test decodes crewbox's trace exports with them.
{ _td_pip protobuf==7.36.2 protobuf && _td_pip opentelemetry-proto==1.45.2 opentelemetry-proto; } || true

# MCP: a reference stdio server from PyPI for the MCP client tests, and the official
# Python SDK (whose client drives `crewbox mcp serve`, and in which the tests' hostile
# servers are written).
_td_pip mcp-server-time==2026.10.19 mcp-server-time || true
_td_pip mcp==2.3.0 mcp || true

# npm packages, pinned, in ONE `npm install`: a second `npm install --no-save` into the
# same directory prunes what the first one put there. Each peer counts as installed
# only when its executable is really there.
#   jco + componentize-qjs: the JavaScript plugin template builds with them (the
#     versions the template's package.json pins);
#   the MCP reference servers the MCP client tests run inside the sandbox;
#   the official MCP conformance suite (scripts/mcp-conformance.sh runs its server
#   scenarios against `crewbox mcp serve --http`; 0.1.13 is the newest that runs on
#   Debian's Node 20: 0.1.14 and later need Node 22's fs.globSync).
_td_npm_pins="@bytecodealliance/jco@1.35.0 componentize-qjs@0.4.5 \
@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31 \
@modelcontextprotocol/conformance@0.1.13"
_td_npm() {
    command -v npm >/dev/null || { _td_loud "npm is not installed: cannot install $_td_npm_pins"; return 1; }
    mkdir -p "$CREWBOX_TEST_NODE"
    local stamp
    stamp="$CREWBOX_TEST_NODE/.installed-$(echo "$_td_npm_pins" | tr ' /' '_-')"
    if [ ! -e "$stamp" ]; then
        # shellcheck disable=SC2086 # the pins are words
        if (cd "$CREWBOX_TEST_NODE" && npm install --no-audit --no-fund --no-save --silent $_td_npm_pins); then
            touch "$stamp"
        else
            _td_loud "npm could not install $_td_npm_pins"
            return 1
        fi
    fi
    local peer bin
    for pair in jco:jco mcp-servers:mcp-server-everything mcp-servers:mcp-server-filesystem; do
        peer="${pair%%:*}" bin="${pair#*:}"
        if [ -x "$CREWBOX_TEST_NODE/node_modules/.bin/$bin" ]; then
            case " $CREWBOX_TEST_PEERS " in *" $peer "*) ;; *) CREWBOX_TEST_PEERS="$CREWBOX_TEST_PEERS $peer" ;; esac
        else
            _td_loud "npm peer $peer: $bin is missing from $CREWBOX_TEST_NODE/node_modules/.bin"
        fi
    done
}
_td_npm || true

# Debian packages: installed with apt when missing and this shell may (root).
_td_apt() {
    local cmd="$1" pkg="$2"
    if ! command -v "$cmd" >/dev/null && [ ! -x "/usr/sbin/$cmd" ]; then
        if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg"; } >/dev/null 2>&1 \
                || { _td_loud "apt-get could not install $pkg"; return 1; }
        else
            _td_loud "$cmd is not installed and cannot be (needs root and apt-get): install the $pkg package"
            return 1
        fi
    fi
    CREWBOX_TEST_PEERS="$CREWBOX_TEST_PEERS $cmd"
}
# tmux: the `crewbox top` test runs the dashboard in a real terminal.
_td_apt tmux tmux || true
# nats-server (2.9 in Debian): the scale-out tests start their own JetStream servers on
# loopback.
_td_apt nats-server nats-server || true

export CREWBOX_TEST_PEERS
