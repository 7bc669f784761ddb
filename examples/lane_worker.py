#!/usr/bin/env python3
"""A lane worker: claims the board's ready tasks for its lane over HTTP, does the work,
and reports it. Standard library only; the board is `kanban serve`, the lane's token
comes from `kanban lane create NAME --profile PROFILE`.

    KANBAN_LANE_TOKEN=kl_... python3 lane_worker.py --url http://127.0.0.1:8420

The work here is a stand-in: it echoes the task's title as the result. Replace `work()`
with the agent. A task it cannot do is blocked with the reason; a lease is extended with
a heartbeat while the work runs longer than a minute.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request


class Lane:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method, path, body=None, timeout=30):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read()
            return response.status, (json.loads(text) if text else None)

    def claim(self, wait):
        """The next ready task of the lane's profiles, or None when the wait ended."""
        status, claim = self.call("POST", f"/api/lanes/claim?wait={wait}", timeout=wait + 30)
        return claim if status == 200 else None

    def report(self, task_id, verb, body):
        return self.call("POST", f"/api/lanes/tasks/{task_id}/{verb}", body)[1]


def work(claim):
    """The stand-in for the agent: the task's title, echoed."""
    return "done: " + claim["task"]["title"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8420")
    parser.add_argument("--wait", type=int, default=60, help="seconds a claim waits")
    parser.add_argument("--max-tasks", type=int, default=0, help="stop after N tasks (0: never)")
    parser.add_argument("--exit-when-idle", action="store_true", help="stop when a wait ends empty")
    args = parser.parse_args()
    token = os.environ.get("KANBAN_LANE_TOKEN")
    if not token:
        sys.exit("lane_worker: set KANBAN_LANE_TOKEN to the lane's token")
    lane = Lane(args.url, token)
    done = 0
    while args.max_tasks == 0 or done < args.max_tasks:
        try:
            claim = lane.claim(args.wait)
        except urllib.error.HTTPError as e:
            sys.exit(f"lane_worker: the board refused the claim: {e.code} {e.read().decode(errors='replace')}")
        if claim is None:
            if args.exit_when_idle:
                break
            continue
        task, run = claim["task_id"], claim["run_id"]
        try:
            result = work(claim)
        except Exception as e:  # the agent failed: say why, and let a person look
            lane.report(task, "block", {"run_id": run, "reason": str(e)})
            continue
        answer = lane.report(task, "complete", {"run_id": run, "result": result, "summary": result})
        print(f"{task} run {run}: {answer['status']}", flush=True)
        done += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
