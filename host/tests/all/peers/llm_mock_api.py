"""Drives llm-mock-api (a third-party mock of the OpenAI and Anthropic APIs) for
crewbox's provider peer test.

    python llm_mock_api.py SCRIPT.json RECORD.jsonl

SCRIPT maps a model name to the replies its requests get, in order: {"text": ...,
"tools": [{"name", "args", "id"?}]} or {"error": {"status", "message", "type"?}}. Every
request is appended to RECORD as {"format", "path", "body"}. The server binds a free
port on 127.0.0.1 and prints its URL as the first line of stdout; it runs until killed.
The mock itself serialises the replies in each wire format (streamed or not), so what
crewbox parses is the third party's idea of the protocol, not ours.
"""

import asyncio
import json
import sys

from llm_mock_api import ErrorReply, MockServer, MockServerOptions, ReplyObject, ToolCall

script_path, record_path = sys.argv[1], sys.argv[2]
with open(script_path, encoding="utf-8") as f:
    queues = {model: list(replies) for model, replies in json.load(f).items()}


def to_reply(r):
    if "error" in r:
        e = r["error"]
        return ReplyObject(
            error=ErrorReply(status=e["status"], message=e["message"], type=e.get("type"))
        )
    tools = [
        ToolCall(id=t.get("id"), name=t["name"], args=t.get("args", {}))
        for t in r.get("tools", [])
    ]
    return ReplyObject(text=r.get("text"), tools=tools or None)


def resolve(req):
    with open(record_path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"format": req.format, "path": req.path, "body": req.raw}) + "\n")
    queue = queues.get(req.model)
    if not queue:
        return ReplyObject(
            error=ErrorReply(status=500, message=f"driver: no reply left for model {req.model}")
        )
    return to_reply(queue.pop(0))


async def main():
    # Small chunks: text arrives split across many SSE events, as from a real server.
    options = MockServerOptions(port=0, host="127.0.0.1", default_latency=0, default_chunk_size=7)
    server = MockServer(options)
    server.when(lambda req: True).reply(resolve)
    await server.start()
    print(server.url, flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
