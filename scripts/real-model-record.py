"""Sends requests to a running llama-server and writes each request/response pair."""
import json, sys, urllib.request, urllib.error
base, out = sys.argv[1], sys.argv[2]
TOOLS = [{"type": "function", "function": {"name": n, "description": d, "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "A path relative to the workspace."}}, "required": ["path"]}}} for n, d in [("read_file", "Reads a file of the workspace and returns its text."), ("list_dir", "Lists a directory of the workspace."), ("write_file", "Writes a file of the workspace, replacing its text.")]]
def call(name, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text, ctype = r.status, r.read().decode(), r.headers.get("content-type")
    except urllib.error.HTTPError as e:
        status, text, ctype = e.code, e.read().decode(), e.headers.get("content-type")
    rec = {"request": {"method": method, "path": path, "body": body}, "response": {"status": status, "content_type": ctype, "body": text}}
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(rec, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(name, status, text[:300].replace("\n", " | "))
call("props", "GET", "/props")
msgs = [{"role": "system", "content": "You are a coding agent. Use the tools to act."}, {"role": "user", "content": "Read README.md and say what it is about."}]
call("tools-dropped", "POST", "/v1/chat/completions", {"model": "m", "messages": msgs, "tools": TOOLS, "max_tokens": 32, "temperature": 0, "stream": False})
call("cut-at-limit-stream", "POST", "/v1/chat/completions", {"model": "m", "messages": msgs, "max_tokens": 8, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
bad = msgs + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"READ"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "not run: cut off"}]
call("invalid-arguments-rejected", "POST", "/v1/chat/completions", {"model": "m", "messages": bad, "tools": TOOLS, "max_tokens": 16, "temperature": 0})
good = msgs + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "not run: the call was cut off at the output token limit"}]
call("empty-arguments-accepted", "POST", "/v1/chat/completions", {"model": "m", "messages": good, "tools": TOOLS, "max_tokens": 16, "temperature": 0})
