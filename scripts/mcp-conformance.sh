#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, installed by
# scripts/test-deps.sh) in server mode against `crewbox mcp serve --http`, scenario by
# scenario, and prints a pass/fail table (the README's "Conformance" table comes from it);
# scenarios that do not apply to crewbox are run too and marked `n/a` with the reason.
#
#   scripts/mcp-conformance.sh [CREWBOX_BINARY]     (default: target/debug/crewbox)
#   ONLY_APPLICABLE=1   skip the scenarios that do not apply
#   VERBOSE=1           print each scenario's log
#
# Exit status: the number of applicable scenarios that failed.
#
# The suite cannot send an Authorization header, and `crewbox mcp serve --http` requires
# one; so the suite talks to a tiny loopback proxy that adds the bearer token and passes
# everything else through unchanged (Host and Origin included, so the DNS-rebinding
# scenario still reaches crewbox's own checks). The server runs in a throwaway repository.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/target/debug/crewbox}"
# shellcheck source=scripts/test-deps.sh
source "$root/scripts/test-deps.sh"
conformance="$CREWBOX_TEST_NODE/node_modules/.bin/conformance"
[ -x "$conformance" ] || { echo "conformance suite not installed (scripts/test-deps.sh)" >&2; exit 1; }
[ -x "$bin" ] || { echo "no crewbox binary at $bin (cargo build first)" >&2; exit 1; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"   # the server runs in another directory

work="$(mktemp -d)"
server_pid="" proxy_pid=""
cleanup() {
    [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

git -C "$work" init -q repo
git -C "$work/repo" -c user.name=t -c user.email=t@localhost commit -q --allow-empty -m init
export CREWBOX_STATE_DIR="$work/state" XDG_CONFIG_HOME="$work/config" HOME="$work/home"
CREWBOX_MCP_TOKEN="conformance-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export CREWBOX_MCP_TOKEN

(cd "$work/repo" && exec "$bin" mcp serve --http 127.0.0.1:0 --token-env CREWBOX_MCP_TOKEN) \
    2>"$work/serve.log" &
server_pid=$!
for _ in $(seq 100); do
    grep -q "serving MCP on" "$work/serve.log" 2>/dev/null && break
    sleep 0.1
done
upstream="$(sed -n 's/^crewbox: serving MCP on //p' "$work/serve.log" | head -n 1)"
[ -n "$upstream" ] || { cat "$work/serve.log" >&2; exit 1; }

# The proxy: one thread per request, the body streamed back as it comes (SSE).
cat >"$work/proxy.py" <<'EOF'
import http.client, os, sys, threading, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

up = urllib.parse.urlsplit(sys.argv[1])
token = os.environ["CREWBOX_MCP_TOKEN"]

class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def relay(self):
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else None
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        c.putrequest(self.command, up.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            if k.lower() not in ("authorization", "connection", "content-length"):
                c.putheader(k, v)
        c.putheader("Authorization", f"Bearer {token}")
        if body is not None:
            c.putheader("Content-Length", str(len(body)))
        c.endheaders(body)
        r = c.getresponse()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
    do_GET = do_POST = do_DELETE = relay

s = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
python3 "$work/proxy.py" "$upstream" >"$work/proxy.port" 2>"$work/proxy.log" &
proxy_pid=$!
for _ in $(seq 50); do [ -s "$work/proxy.port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(head -n 1 "$work/proxy.port")/mcp"

# Why a scenario does not apply to crewbox (empty: it applies). Most server scenarios call
# the suite's own reference tools, resources and prompts (`test_simple_text`, ...), or
# capabilities the spec says a server MAY offer and crewbox does not advertise.
not_applicable() {
    case "$1" in
        logging-set-level | tools-call-with-logging) echo "no logging capability (logs go to stderr)" ;;
        completion-complete) echo "no completions capability" ;;
        tools-call-sampling | tools-call-elicitation | elicitation-*) echo "crewbox never asks the client for sampling or elicitation" ;;
        tools-call-* | json-schema-2020-12) echo "calls the suite's reference test tools" ;;
        resources-read-* | resources-templates-read) echo "reads the suite's test:// resources" ;;
        resources-subscribe | resources-unsubscribe) echo "no resource subscriptions" ;;
        prompts-*) echo "no prompts capability" ;;
        *) echo "" ;;
    esac
}

printf '%-32s %-6s %s\n' scenario result note
scenarios="$("$conformance" list 2>/dev/null | sed -n '/^Server scenarios/,/^$/s/^  - //p')"
[ -n "$scenarios" ] || { echo "the suite listed no server scenarios" >&2; exit 1; }
failed=0
for s in $scenarios; do
    why="$(not_applicable "$s")"
    [ -n "$why" ] && [ -n "${ONLY_APPLICABLE:-}" ] && continue
    if timeout 120 "$conformance" server --url "$url" --scenario "$s" >"$work/$s.log" 2>&1; then
        result=pass
    else
        result=FAIL
        [ -z "$why" ] && failed=$((failed + 1))
    fi
    note="${why:+n/a: $why}"
    warnings="$(sed -n 's/.* \([0-9][0-9]*\) warnings$/\1/p' "$work/$s.log" | tail -n 1)"
    [ -n "$warnings" ] && [ "$warnings" != 0 ] && note="${note:+$note; }$warnings warning(s)"
    printf '%-32s %-6s %s\n' "$s" "$result" "$note"
    if [ -n "${VERBOSE:-}" ]; then sed 's/^/    /' "$work/$s.log"; fi
done
# Exit status: the number of applicable scenarios that failed (0: all passed).
exit "$failed"
