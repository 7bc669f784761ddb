"""A worker the gateway spawns: an agent whose only way to the board is `kanban mcp`.
It reads its brief, reports progress and completes its own task through the tools,
naming no task and no run: the server takes both from KANBAN_TASK and KANBAN_RUN_ID.

Usage: worker.py KANBAN
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    env = {k: v for k, v in os.environ.items() if k.startswith("KANBAN_")}
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            brief = await session.call_tool("task_context", {})
            task = json.loads(brief.content[0].text)["task"]
            for tool, args in [
                ("heartbeat", {"note": "read the brief"}),
                ("comment", {"text": f"working on {task['title']}", "author": "mcp-worker"}),
                ("complete_task", {"result": f"done: {task['title']}", "summary": "through MCP"}),
            ]:
                result = await session.call_tool(tool, args)
                if result.is_error:
                    raise SystemExit(f"{tool}: {result.content[0].text}")


asyncio.run(main())
