"""What the shared repair flow is tested with: a "register" on loopback (a real HTTP server holding one value per
name, recording every call) repaired by the test system "demo" (tests/demo_system.py) through `repair_actions`
whose steps move a register from one value to another, and a published run holding the plans."""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from audit.contracts import Precheck, Repair, RepairAction
from audit.repair.common import RepairInputError, plan_id
from audit.store import open_store
from audit.store.run import RunWriter
from tests.demo_system import SYSTEM, registered


class Register:
    """GET /<name> -> {"value": v}; POST /<name> {"value": v} sets it. `calls`: every request, in order."""

    def __init__(self, **values: int):
        self.values, self.calls = dict(values), []
        reg = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                reg.calls.append(("GET", self.path, None))
                self._answer({"value": reg.values.get(self.path.strip("/"))})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reg.calls.append(("POST", self.path, body))
                reg.values[self.path.strip("/")] = body["value"]
                self._answer({"value": body["value"]})

            def _answer(self, doc):
                data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def posts(self) -> list:
        return [(path, body) for method, path, body in self.calls if method == "POST"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def actions(plan, cluster, secrets) -> list[RepairAction]:
    """One action per step {"name", "from", "to"}: check the register holds `from`, set `to`, verify."""
    if not plan.get("steps"):
        raise RepairInputError(f"plan {plan.get('plan_id')}", "steps", "at least one step")
    token = secrets.resolve({"env": "DEMO_REPAIR_TOKEN"}) if plan.get("with_token") else None
    out = []
    for i, step in enumerate(plan["steps"]):
        url = f"{plan['url']}/{step['name']}"

        def read(url=url) -> int | None:
            return requests.get(url, timeout=5).json()["value"]

        def run(url=url, to=step["to"]) -> dict:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            answer = requests.post(url, json={"value": to}, headers=headers, timeout=5)
            answer.raise_for_status()
            return {"status": answer.status_code, "answer": answer.json(), "token_was": token}

        out.append(RepairAction(
            name="set_register", target=step["name"],
            request={"method": "POST", "url": url, "body": {"value": step["to"]}},
            check=lambda read=read, want=step["from"]: Precheck(read() == want, read(), want),
            run=run,
            verify=lambda read=read, want=step["to"]: Precheck(read() == want, read(), want),
            after_previous=i > 0))
    return out


@contextmanager
def repairable_demo():
    with registered(replace(SYSTEM, repair=Repair(lambda outputs: ([], []), actions))):
        yield


def make_plan(url: str, steps: list[tuple[str, int, int]], **extra) -> dict:
    plan = {"system": "demo", "cluster": "demo-1", "status": "planned", "dry_run": True, "url": url,
            "steps": [{"name": n, "from": a, "to": b} for n, a, b in steps], **extra}
    plan["plan_id"] = plan_id(plan)
    return plan


def write_estate(tmp_path: Path, max_age: str = "1d") -> Path:
    path = tmp_path / "estate.yaml"
    path.write_text(f"""
estate: repairs
store: {{uri: "file://{tmp_path / 'store'}"}}
repairs: {{max_plan_age: {max_age}}}
systems:
  demo:
    - {{name: demo-1, source: lab}}
""")
    return path


def publish_plans(tmp_path: Path, plans: list[dict], run_id: str = "run-1") -> str:
    """A published run whose reports/repair_plan.json holds `plans`; returns the file's store key."""
    writer = RunWriter(open_store(f"file://{tmp_path / 'store'}"), "repairs", run_id)
    key = writer.put("reports", "repair_plan.json",
                     json.dumps({"dry_run": True, "systems": {"demo": {"plans": plans, "errors": []}}}).encode())
    writer.publish({"status": "violations"})
    return key
