"""Drives the tools `kanban serve` offers at /mcp with the official MCP Python SDK's
streamable HTTP client, and checks that /mcp keeps the server's token and origin rules.

Usage: serve_http.py URL TOKEN
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN = sys.argv[1], sys.argv[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def check(condition, what):
    if not condition:
        raise SystemExit(f"check failed: {what}")


async def main():
    async with httpx2.AsyncClient() as plain:
        r = await plain.post(URL, json=INIT, headers=ACCEPT)
        check(r.status_code == 401, f"no token: {r.status_code} {r.text}")
        check("token" in r.json()["error"], f"says why: {r.text}")
        r = await plain.post(URL, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"})
        check(r.status_code == 403, f"another origin: {r.status_code} {r.text}")

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers) as client:
        async with streamable_http_client(URL, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                check(len(tools) == 13, f"thirteen tools: {[t.name for t in tools]}")
                made = await session.call_tool("create_task", {"title": "over http"})
                check(not made.is_error, f"create_task: {made}")
                task = json.loads(made.content[0].text)
                shown = await session.call_tool("show_task", {"task_id": task["id"]})
                check(json.loads(shown.content[0].text)["task"]["title"] == "over http", f"show_task: {shown}")
                # A shared server is nobody's worker: no task id, no target.
                bare = await session.call_tool("complete_task", {})
                check(bare.is_error and "complete needs a task id" in bare.content[0].text, f"no worker: {bare}")
                model = await session.call_tool("decompose_task", {"task_id": task["id"]})
                check(model.is_error and "kanban serve makes no model calls" in model.content[0].text, f"no model calls: {model}")
                done = await session.call_tool("complete_task", {"task_id": task["id"], "result": "served"})
                check(json.loads(done.content[0].text) == {"task_id": task["id"], "ok": True}, f"complete_task: {done}")
    print("http: the tools answer at /mcp")


asyncio.run(main())
