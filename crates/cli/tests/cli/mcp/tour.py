"""Drives `kanban mcp` with the official MCP Python SDK: initialize, list the tools and
check their schemas, then call every tool with good input, an unknown id and bad
arguments. A refusal must be a tool error carrying the CLI's own one-line message.

Usage: tour.py KANBAN HOME
Exits non-zero, saying which check failed, on the first failure.
"""

import asyncio
import json
import os
import subprocess
import sys

from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

KANBAN, HOME = sys.argv[1], sys.argv[2]
UNKNOWN = "t_00000000"

TOOLS = {
    "list_tasks": set(),
    "show_task": {"task_id"},
    "task_context": set(),
    "create_task": {"title"},
    "comment": {"text"},
    "heartbeat": set(),
    "complete_task": set(),
    "block_task": set(),
    "request_review": set(),
    "approve": set(),
    "request_changes": {"reason"},
    "decompose_task": {"task_id"},
    "link_tasks": {"parent_id", "child_id"},
}


def check(condition, what):
    if not condition:
        raise SystemExit(f"check failed: {what}")


def cli(*args):
    """The CLI on the same home: (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KANBAN_")}
    done = subprocess.run([KANBAN, "--home", HOME, *args], capture_output=True, text=True, env=env)
    return done.returncode, done.stdout, done.stderr


def cli_refusal(*args):
    """The one-line message the CLI refuses ARGS with."""
    code, _, stderr = cli(*args)
    check(code != 0, f"kanban {args} was refused")
    line = stderr.strip()
    check(line.startswith("kanban: ") and "\n" not in line, f"one line: {stderr!r}")
    return line.removeprefix("kanban: ")


class Tour:
    def __init__(self, session):
        self.session = session

    async def ok(self, tool, args):
        result = await self.session.call_tool(tool, args)
        text = result.content[0].text if result.content else ""
        check(not result.is_error, f"{tool} {args} succeeds: {text}")
        return json.loads(text)

    async def refused(self, tool, args):
        result = await self.session.call_tool(tool, args)
        check(result.is_error, f"{tool} {args} is a tool error, got {result}")
        check(len(result.content) == 1, f"{tool}: one content block")
        text = result.content[0].text
        check(text and "\n" not in text, f"{tool}: a one-line message, got {text!r}")
        return text


async def tour(session):
    init = await session.initialize()
    check(init.server_info.name == "kanban", f"server name: {init.server_info}")
    check(init.capabilities.tools is not None, "the server offers tools")

    listed = (await session.list_tools()).tools
    check({t.name for t in listed} == set(TOOLS), f"tool names: {[t.name for t in listed]}")
    for tool in listed:
        schema = tool.input_schema
        check(schema.get("type") == "object", f"{tool.name}: an object schema")
        check(len(tool.description or "") > 40, f"{tool.name}: a description an agent can act on")
        check(set(schema.get("required", [])) == TOOLS[tool.name], f"{tool.name}: required {schema.get('required')}")
        for name, prop in schema.get("properties", {}).items():
            check(prop.get("description"), f"{tool.name}.{name} is described")
    create = next(t for t in listed if t.name == "create_task").input_schema["properties"]
    check({"title", "body", "assignee", "priority", "triage", "parents", "idempotency_key", "max_runtime"} <= set(create), f"create_task properties: {set(create)}")
    block = next(t for t in listed if t.name == "block_task").input_schema["properties"]
    check({"task_id", "reason", "kind", "run_id"} == set(block), f"block_task properties: {set(block)}")

    t = Tour(session)

    # Good input: every tool once, each answering with its verb's --json shape.
    parent = await t.ok("create_task", {"title": "write the parser", "priority": 5, "body": "in Rust"})
    check(parent["status"] == "ready" and parent["priority"] == 5 and parent["body"] == "in Rust", f"parent: {parent}")
    check(parent["outcome"] == "created", f"create_task says created: {parent}")
    check(set(parent) - {"outcome"} == set(json.loads(cli("show", parent["id"], "--json")[1])["task"]), "create_task answers the task shape")
    child = await t.ok("create_task", {"title": "test the parser", "parents": [parent["id"]], "max_runtime": "15m"})
    check(child["status"] == "todo" and child["max_runtime_seconds"] == 900, f"child: {child}")
    card = await t.ok("create_task", {"title": "rough idea", "triage": True})
    check(card["status"] == "triage", f"triage card: {card}")
    other = await t.ok("create_task", {"title": "deploy", "idempotency_key": "deploy-1"})
    again = await t.ok("create_task", {"title": "deploy", "idempotency_key": "deploy-1"})
    check(again["id"] == other["id"], "an idempotency key returns the first task")

    everything = await t.ok("list_tasks", {})
    check(everything == json.loads(cli("list", "--json")[1]), "list_tasks is `kanban list --json`")
    check(len(everything) == 4, f"four tasks: {everything}")
    triage = await t.ok("list_tasks", {"status": "triage"})
    check([x["id"] for x in triage] == [card["id"]], f"list_tasks by status: {triage}")

    linked = await t.ok("link_tasks", {"parent_id": parent["id"], "child_id": other["id"]})
    check(linked == {"parent_id": parent["id"], "child_id": other["id"]}, f"link_tasks: {linked}")

    comment = await t.ok("comment", {"task_id": parent["id"], "text": "started", "author": "py"})
    check(comment["body"] == "started" and comment["author"] == "py" and comment["task_id"] == parent["id"], f"comment: {comment}")

    shown = await t.ok("show_task", {"task_id": parent["id"]})
    check(shown == json.loads(cli("show", parent["id"], "--json")[1]), "show_task is `kanban show --json`")
    check({c["id"] for c in shown["children"]} == {child["id"], other["id"]}, f"children: {shown['children']}")

    code, run, _ = cli("claim", parent["id"])
    check(code == 0, "claim by hand")
    run = int(run)
    beat = await t.ok("heartbeat", {"task_id": parent["id"], "run_id": run, "note": "halfway"})
    check(beat == {"task_id": parent["id"], "ok": True}, f"heartbeat: {beat}")
    beat = await t.ok("heartbeat", {"task_id": parent["id"]})
    check(beat == {"task_id": parent["id"], "ok": True}, f"heartbeat on the current run: {beat}")

    # Nobody's worker may finish a run it does not name; with the run it may.
    text = await t.refused("complete_task", {"task_id": parent["id"], "result": "mine"})
    check(text == f"task {parent['id']} is running; complete is refused while a worker holds it (reclaim it first)", f"someone else's run: {text}")
    stale = await t.refused("complete_task", {"task_id": parent["id"], "run_id": run + 100})
    check(stale == cli_refusal("complete", parent["id"], "--run", str(run + 100)), f"a lost race is the CLI's message: {stale}")
    done = await t.ok("complete_task", {"task_id": parent["id"], "run_id": run, "result": "parser.rs", "summary": "wrote it", "metadata": {"tests": 42}})
    check(done == {"task_id": parent["id"], "ok": True}, f"complete_task: {done}")
    runs = json.loads(cli("runs", parent["id"], "--json")[1])
    check(runs[-1]["outcome"] == "completed" and runs[-1]["metadata"] == {"tests": 42}, f"the run: {runs}")

    brief = await t.ok("task_context", {"task_id": child["id"]})
    check(brief == json.loads(cli("context", child["id"], "--json")[1]), "task_context is `kanban context --json`")
    check(brief["parents"][0]["result"] == "parser.rs", f"the brief carries the parent's result: {brief}")

    blocked = await t.ok("block_task", {"task_id": other["id"], "reason": "needs the key", "kind": "needs_input"})
    check(blocked == {"task_id": other["id"], "ok": True}, f"block_task: {blocked}")
    check(json.loads(cli("show", other["id"], "--json")[1])["task"]["status"] == "blocked", "blocked on the board")

    outcome = await t.ok("decompose_task", {"task_id": card["id"]})
    check(outcome["ok"] is True and outcome["task_id"] == card["id"] and outcome["new_title"] == "a sharper idea", f"decompose_task: {outcome}")

    # Refusals: the CLI's one-line messages, as tool errors.
    wrong = await t.refused("block_task", {"task_id": parent["id"], "reason": "late"})
    check(wrong == cli_refusal("block", parent["id"], "late"), f"a wrong status is the CLI's message: {wrong}")
    for tool, args in [
        ("show_task", {"task_id": UNKNOWN}),
        ("task_context", {"task_id": UNKNOWN}),
        ("comment", {"task_id": UNKNOWN, "text": "hello"}),
        ("heartbeat", {"task_id": UNKNOWN}),
        ("complete_task", {"task_id": UNKNOWN}),
        ("block_task", {"task_id": UNKNOWN}),
        ("link_tasks", {"parent_id": UNKNOWN, "child_id": child["id"]}),
        ("create_task", {"title": "orphan", "parents": [UNKNOWN]}),
    ]:
        text = await t.refused(tool, args)
        check(text == f"no such task: {UNKNOWN}", f"{tool}: unknown id, got {text!r}")
    check(cli_refusal("show", UNKNOWN) == f"no such task: {UNKNOWN}", "the CLI's message for an unknown id")
    text = await t.refused("decompose_task", {"task_id": UNKNOWN})
    check(text == cli_refusal("decompose", UNKNOWN), f"decompose_task: unknown id, got {text!r}")

    cycle = await t.refused("link_tasks", {"parent_id": child["id"], "child_id": parent["id"]})
    check(cycle == cli_refusal("link", child["id"], parent["id"]), f"a cycle is the CLI's message: {cycle}")

    for tool, args, says in [
        ("show_task", {}, "bad arguments for show_task: missing field `task_id`"),
        ("show_task", {"task_id": parent["id"], "id": 1}, "bad arguments for show_task: unknown field `id`"),
        ("create_task", {"title": "x", "priority": "high"}, "bad arguments for create_task: invalid type"),
        ("link_tasks", {"parent_id": parent["id"]}, "bad arguments for link_tasks: missing field `child_id`"),
        ("show_task", {"task_id": "fix the bug"}, "not a task id"),
        ("list_tasks", {"status": "finished"}, "finished"),
        ("block_task", {"task_id": other["id"], "kind": "bored"}, "bored"),
        ("create_task", {"title": "x", "max_runtime": "soon"}, 'not a duration: "soon"'),
        ("create_task", {"title": "   "}, "a task title cannot be blank"),
        ("complete_task", {}, "complete needs a task id"),
        ("heartbeat", {}, "heartbeat needs a task id"),
        ("task_context", {}, "context needs a task id"),
        ("comment", {"text": "orphan"}, "comment needs a task id"),
        ("complete_task", {"task_id": other["id"], "metadata": "x" * 10, "result": "r" * 70000}, "the result is over the"),
    ]:
        text = await t.refused(tool, args)
        check(says in text, f"{tool} {args}: {says!r} in {text!r}")

    # Naming a tool that does not exist is a protocol error; the session goes on.
    try:
        await session.call_tool("drop_table", {})
        check(False, "an unknown tool is a protocol error")
    except MCPError as e:
        check("drop_table" in e.error.message, f"unknown tool: {e.error}")
    check(len((await session.list_tools()).tools) == len(TOOLS), "the server goes on")
    print("tour: every tool answered")


async def main():
    env = {"KANBAN_HOME": HOME}
    for name in ("KANBAN_TASK", "KANBAN_RUN_ID"):
        os.environ.pop(name, None)
    params = StdioServerParameters(command=KANBAN, args=["mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await tour(session)


asyncio.run(main())
