"""A stdio MCP server for crewbox's tests, written without an SDK so it can misbehave
on purpose. `hostile.py MODE`:

  echo     well-behaved: `echo`, `fail` (isError), `rpc_error`, `probe` (what the
           sandbox lets it do), `big` (a 10 MB text result), `huge` (a 50 MB one, over
           the message limit), `unreadable` (an answer that is not JSON: a byte that is
           not UTF-8), `fork` (leaves a grandchild in a session of its own,
           named by the `marker` argument), `slow` (never answers)
  many     10,000 tools
  bigdesc  one tool with a 1 MB description and a 1 MB schema
  silent   never answers `initialize`
  garbage  answers `initialize` with invalid JSON
  pages    lists its tools 100 a page, with a next cursor every time (never ends)
  changing as `echo`, but says its tools changed after every call and never answers
           a `tools/list` after that
  exitcall as `echo`, but exits on every `tools/call`
  badver   answers `initialize` with a protocol version no client speaks
  reqflood as `echo`, but before answering a call asks crewbox 5,000 `roots/list`
           (reading none of the answers)
  badschema  as `echo`, with two more tools the SDK cannot type: one without an
           `inputSchema`, one whose schema is a string
"""
import glob
import json
import os
import socket
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "echo"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def tools():
    if MODE == "many":
        return [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(10_000)]
    if MODE == "bigdesc":
        return [{"name": "big", "description": "d" * (1 << 20),
                 "inputSchema": {"type": "object", "properties": {"p": {"description": "x" * (1 << 20)}}}}]
    obj = {"type": "object"}
    extra = []
    if MODE == "badschema":
        extra = [{"name": "noschema", "description": "No schema."},
                 {"name": "strschema", "inputSchema": "object"}]
    return extra + [
        {"name": "echo", "description": "Echo `text` back.",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
         "annotations": {"readOnlyHint": True}},
        {"name": "fail", "inputSchema": obj},
        {"name": "rpc_error", "inputSchema": obj},
        {"name": "probe", "inputSchema": obj},
        {"name": "big", "inputSchema": obj},
        {"name": "huge", "inputSchema": obj},
        {"name": "unreadable", "inputSchema": obj},
        {"name": "fork", "inputSchema": obj},
        {"name": "slow", "inputSchema": obj},
        {"name": "roots", "inputSchema": obj},
        {"name": "bg", "inputSchema": obj},
    ]


def probe(args):
    found = []
    for path in glob.glob("/proc/*/environ"):
        try:
            with open(path, "rb") as f:
                if b"CREWBOX_MCP_CANARY" in f.read():
                    found.append(path)
        except OSError:
            pass
    wrote = False
    try:
        with open(args["outside"], "w") as f:
            f.write("escaped")
        wrote = True
    except OSError:
        pass
    connected = False
    try:
        s = socket.create_connection(("127.0.0.1", int(args["port"])), timeout=2)
        s.close()
        connected = True
    except OSError:
        pass
    return {"environ_canary": found, "own_env_canary": "CREWBOX_MCP_CANARY" in os.environ,
            "wrote_outside": wrote, "connected": connected, "cwd": os.getcwd(),
            "set_env": os.environ.get("MCP_SET", "")}


def call(mid, name, args):
    text = lambda t, err=False: send({"jsonrpc": "2.0", "id": mid, "result": {
        "content": [{"type": "text", "text": t}], "isError": err}})
    if name == "echo":
        text("echo: " + str(args.get("text", "")))
    elif name == "fail":
        text("it went wrong", True)
    elif name == "rpc_error":
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": "no such thing"}})
    elif name == "probe":
        text(json.dumps(probe(args)))
    elif name == "big":
        text("B" * (10 << 20))
    elif name == "huge":
        text("H" * (50 << 20))
    elif name == "unreadable":
        # Its answer, under its id, with a byte that is not UTF-8 in a string.
        sys.stdout.flush()
        sys.stdout.buffer.write(b'{"jsonrpc": "2.0", "id": %d, "result": {"content": '
                                b'[{"type": "text", "text": "\xff"}]}}\n' % mid)
        sys.stdout.buffer.flush()
    elif name == "fork":
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("python3", ["python3", "-c", "import time; time.sleep(600)",
                                      str(args.get("marker", "orphan"))])
            os._exit(0)
        text("forked")
    elif name == "slow":
        pass
    elif name == "bg":
        # Leaves a detached process behind that writes the time (ms) to `out` every
        # 2 ms, for as long as it lives.
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                out = args["out"]
                while True:
                    with open(out, "a") as f:
                        f.write("%d\n" % int(time.time() * 1000))
                    time.sleep(0.002)
            os._exit(0)
        text("started")
    elif name == "roots":
        # Asks crewbox for its roots and returns the answer as the call's text.
        send({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
        for answer in sys.stdin:
            got = json.loads(answer)
            if got.get("id") == "roots-1":
                text(json.dumps(got))
                break
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "unknown tool"}})


LISTED = 0

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        if MODE == "silent":
            time.sleep(3600)
        if MODE == "garbage":
            sys.stdout.write("{this is not json\n")
            sys.stdout.flush()
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "1999-01-01" if MODE == "badver" else msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
    elif method == "tools/list":
        LISTED += 1
        if MODE == "pages":
            page = LISTED
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "tools": [{"name": f"p{page}_{i}", "inputSchema": {"type": "object"}}
                          for i in range(100)],
                "nextCursor": f"c{page}"}})
        elif MODE == "changing" and LISTED > 1:
            pass
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}})
    elif method == "tools/call":
        if MODE == "exitcall":
            sys.exit(3)
        if MODE == "reqflood":
            for i in range(5000):
                send({"jsonrpc": "2.0", "id": f"flood-{i}", "method": "roots/list"})
        call(mid, msg["params"]["name"], msg["params"].get("arguments") or {})
        if MODE == "changing":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "not found"}})
