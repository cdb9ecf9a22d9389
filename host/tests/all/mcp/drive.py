"""A real MCP client (the official Python SDK) driving `crewbox mcp serve`.

    drive.py stdio '{"command": ..., "args": [...], "env": {...}, "cwd": ...}' STEPS
    drive.py http  '{"url": ..., "token": ... or null}' STEPS
    drive.py http-status '{"url": ..., "token": ... or null}' '[]'
        (one plain POST of an initialize request: its HTTP status, no session)

STEPS is a JSON list of steps, run in order over one session; one JSON list with a
result per step is printed on stdout. A string "$RUN" in a step's arguments is the
`run_id` of the last tool result that named one; {"$repeat": [TEXT, N]} is TEXT N
times (a huge argument without a huge command line). A step that raises records the exception's
text instead of stopping the others (a failed `initialize` is the one result).

Steps:
  {"op": "list_tools"}
  {"op": "call", "tool": T, "args": {...}, "progress": bool}
  {"op": "cancel", "tool": T, "args": {...}, "after": SECONDS}
  {"op": "concurrent", "tool": T, "args": {...}, "n": N}
  {"op": "list_resources"} / {"op": "templates"} / {"op": "read", "uri": U}
  {"op": "sleep", "seconds": S}   (the session stays open meanwhile)
"""

import json
import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def step(session, s):
    op = s["op"]
    if op == "sleep":
        await anyio.sleep(s["seconds"])
        return {"slept": s["seconds"]}
    if op == "list_tools":
        tools = (await session.list_tools()).tools
        return {
            "tools": [
                {
                    "name": t.name,
                    "read_only": bool(t.annotations and t.annotations.read_only_hint),
                    "schema": t.input_schema,
                    "description": t.description,
                }
                for t in tools
            ]
        }
    if op == "call":
        seen = []

        async def on_progress(progress, total, message):
            seen.append({"progress": progress, "message": message})

        cb = on_progress if s.get("progress") else None
        r = await session.call_tool(s["tool"], s.get("args", {}), progress_callback=cb)
        return {"is_error": bool(r.is_error), "text": text_of(r), "progress": seen}
    if op == "cancel":
        with anyio.move_on_after(s["after"]) as scope:
            await session.call_tool(s["tool"], s.get("args", {}))
        return {"cancelled": scope.cancelled_caught}
    if op == "concurrent":
        results = []

        async def one():
            try:
                r = await session.call_tool(s["tool"], s.get("args", {}))
                results.append("error" if r.is_error else "ok")
            except Exception as e:  # noqa: BLE001 - every failure is counted
                results.append(f"exception: {e}")

        async with anyio.create_task_group() as tg:
            for _ in range(s["n"]):
                tg.start_soon(one)
        return {
            "ok": results.count("ok"),
            "answered": len(results),
            "other": [r for r in results if r != "ok"][:3],
        }
    if op == "list_resources":
        r = await session.list_resources()
        return {"uris": [str(x.uri) for x in r.resources]}
    if op == "templates":
        r = await session.list_resource_templates()
        return {"templates": [x.uri_template for x in r.resource_templates]}
    if op == "read":
        r = await session.read_resource(s["uri"])
        return {"text": "".join(getattr(c, "text", "") for c in r.contents)}
    raise ValueError(f"unknown step {op}")


def substitute(value, run_id):
    if isinstance(value, str) and "$RUN" in value and run_id:
        return value.replace("$RUN", run_id)
    if isinstance(value, dict) and "$repeat" in value:
        text, times = value["$repeat"]
        return text * times
    if isinstance(value, dict):
        return {k: substitute(v, run_id) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, run_id) for v in value]
    return value


async def run(streams, steps):
    read, write = streams[0], streams[1]
    out = []
    run_id = None
    async with ClientSession(read, write) as session:
        await session.initialize()
        for s in steps:
            s = substitute(s, run_id)
            try:
                result = await step(session, s)
            except Exception as e:  # noqa: BLE001 - recorded for the test
                result = {"exception": f"{type(e).__name__}: {e}"}
            try:
                run_id = json.loads(result.get("text", "")).get("run_id") or run_id
            except (ValueError, AttributeError):
                pass
            out.append(result)
    return out


async def main():
    transport, target, steps = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    try:
        if transport == "stdio":
            params = StdioServerParameters(
                command=target["command"],
                args=target["args"],
                env=target.get("env"),
                cwd=target.get("cwd"),
            )
            with open(target["stderr"], "w") as errlog:
                async with stdio_client(params, errlog=errlog) as streams:
                    out = await run(streams, steps)
        elif transport == "http-status":
            headers = {"Accept": "application/json, text/event-stream"}
            if target.get("token") is not None:
                headers["Authorization"] = f"Bearer {target['token']}"
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "probe", "version": "0"}}}
            async with httpx2.AsyncClient(timeout=30) as client:
                r = await client.post(target["url"], json=body, headers=headers)
            out = [{"status": r.status_code, "www_authenticate": r.headers.get("www-authenticate")}]
        else:
            headers = {}
            if target.get("token") is not None:
                headers["Authorization"] = f"Bearer {target['token']}"
            async with httpx2.AsyncClient(headers=headers, timeout=120) as client:
                async with streamable_http_client(target["url"], http_client=client) as streams:
                    out = await run(streams, steps)
    except BaseException as e:  # noqa: BLE001 - an exception group from the transport
        out = [{"exception": f"{type(e).__name__}: {e!r}"}]
    print(json.dumps(out))


anyio.run(main)
