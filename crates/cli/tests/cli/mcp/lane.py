"""A lane worker over MCP, with the official MCP Python SDK's streamable HTTP client
against `kanban serve`'s /api/lanes/mcp: claim_next (waiting), read, heartbeat, comment,
complete, until a wait ends with nothing; checks on the way that the lane sees its own
tools only and is refused what it does not hold.

Usage: lane.py URL TOKEN WAIT_SECONDS. Prints one line per task done, then "lane: N done".
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, WAIT = sys.argv[1], sys.argv[2], int(sys.argv[3])
LANE_TOOLS = {"claim_next", "task_context", "heartbeat", "comment", "complete_task", "block_task", "request_review"}


def check(condition, what):
    if not condition:
        raise SystemExit(f"check failed: {what}")


def answer(result, what):
    check(not result.is_error, f"{what}: {result}")
    return json.loads(result.content[0].text)


async def work(session):
    done = 0
    while True:
        claim = answer(await session.call_tool("claim_next", {"wait_seconds": WAIT}), "claim_next")
        if claim is None:
            return done
        task, run = claim["task_id"], claim["run_id"]
        check(claim["context"]["task"]["id"] == task, f"the claim's brief: {claim}")
        if done == 0:
            brief = answer(await session.call_tool("task_context", {"task_id": task}), "task_context")
            check(brief["task"]["id"] == task, f"task_context: {brief}")
            answer(await session.call_tool("heartbeat", {"task_id": task, "run_id": run, "note": "working"}), "heartbeat")
            answer(await session.call_tool("comment", {"task_id": task, "text": "from the mcp lane"}), "comment")
            stale = await session.call_tool("complete_task", {"task_id": task, "run_id": run + 1000})
            check(stale.is_error and "does not hold run" in stale.content[0].text, f"another run: {stale}")
        ended = answer(
            await session.call_tool("complete_task", {"task_id": task, "run_id": run, "result": "by the mcp lane"}),
            "complete_task",
        )
        check(ended["ok"] and ended["status"] == "done", f"complete_task: {ended}")
        print(f"{task}: done", flush=True)
        done += 1


async def main():
    async with httpx2.AsyncClient() as plain:
        r = await plain.post(URL, json={}, headers={"Authorization": "Bearer kl_" + "0" * 64})
        check(r.status_code == 401, f"an unknown token: {r.status_code} {r.text}")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=WAIT + 30) as client:
        async with streamable_http_client(URL, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name for t in (await session.list_tools()).tools}
                check(tools == LANE_TOOLS, f"a lane's tools only: {sorted(tools)}")
                done = await work(session)
    print(f"lane: {done} done")


asyncio.run(main())
