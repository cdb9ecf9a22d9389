"""Drives llm-mock-api for crewbox's tests: replies per model name, recorded requests."""
import asyncio, json, sys
from llm_mock_api import MockServer, MockServerOptions, ReplyObject, ToolCall, ErrorReply

script_path, record_path = sys.argv[1], sys.argv[2]
with open(script_path) as f:
    script = json.load(f)
queues = {model: list(replies) for model, replies in script.items()}

def to_reply(r):
    if "error" in r:
        e = r["error"]
        return ReplyObject(error=ErrorReply(status=e["status"], message=e["message"], type=e.get("type")))
    tools = [ToolCall(id=t.get("id"), name=t["name"], args=t.get("args", {})) for t in r.get("tools", [])]
    return ReplyObject(text=r.get("text"), tools=tools or None)

def resolve(req):
    with open(record_path, "a") as out:
        out.write(json.dumps({"format": req.format, "path": req.path, "body": req.raw}) + "\n")
    q = queues.get(req.model)
    if not q:
        return ReplyObject(error=ErrorReply(status=500, message=f"driver: no reply left for model {req.model}"))
    return to_reply(q.pop(0))

async def main():
    server = MockServer(MockServerOptions(port=0, host="127.0.0.1", default_latency=0, default_chunk_size=7))
    server.when(lambda req: True).reply(resolve)
    await server.start()
    print(server.url, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
