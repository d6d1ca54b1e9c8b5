"""Client of `fcp serve`: plan batch k+1 in the background while batch k trains.

    with PlannerClient() as planner:
        fut = planner.submit(batch=lengths_k1, world=8, strategy="fcp")    # returns at once
        ... train batch k ...
        plan = fut.result()                                                # fcp_torch.plan.Plan

The planner is the TypeScript library behind one long-lived `fcp serve` process (JSON lines on its
stdin/stdout); requests are answered in order. `command` defaults to `fcp serve` when an `fcp`
binary is on PATH, else this repository's `node_modules/.bin/tsx src/cli.ts serve`.
"""
from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import subprocess
import threading
from concurrent.futures import Future
from typing import Dict, List, Optional

from .plan import Plan, PlanError, plan_from_json, read_plan


INSTALL_HINT = "install the planner (npm install -g fcp, or npm ci in a checkout) or set FCP_CLI to the fcp command"


def default_command() -> List[str]:
    """The planner's command: $FCP_CLI (a command line, e.g. `npx fcp`), `fcp` on PATH, or the
    source checkout this package sits in (node_modules/.bin/tsx src/cli.ts)."""
    env = os.environ.get("FCP_CLI")
    if env:
        return [*shlex.split(env), "serve"]
    if shutil.which("fcp"):
        return ["fcp", "serve"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tsx = os.path.join(root, "node_modules", ".bin", "tsx")
    if os.path.exists(os.path.join(root, "src", "cli.ts")) and os.path.exists(tsx):
        return [tsx, os.path.join(root, "src", "cli.ts"), "serve"]
    raise PlanError("serve.command", f"no `fcp` planner found (no FCP_CLI, no fcp on PATH, no source checkout); {INSTALL_HINT}")


class PlannerClient:
    """One `fcp serve` process; thread-safe `submit`, in-order answers matched by id."""

    def __init__(self, command: Optional[List[str]] = None, cwd: Optional[str] = None):
        cmd = command or default_command()
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
                cwd=cwd,
            )
        except OSError as e:
            raise PlanError("serve.command", f"cannot start the planner {' '.join(cmd)}: {e.strerror}; {INSTALL_HINT}") from e
        self._ids = itertools.count(1)
        self._pending: Dict[int, Future] = {}
        self._cache: Dict[str, Future] = {}  # plans by request signature (see submit)
        self.cache_hits = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                fut = self._pending.pop(msg.get("id"), None)
            if fut is not None:
                fut.set_result(msg)
        with self._lock:
            for fut in self._pending.values():
                fut.set_exception(PlanError("serve.closed", "fcp serve exited before answering"))
            self._pending.clear()

    def request(self, **req) -> Future:
        """Sends one raw request; the future resolves to the answer dict."""
        rid = next(self._ids)
        fut: Future = Future()
        with self._lock:
            self._pending[rid] = fut
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({**req, "id": rid}) + "\n")
        self.proc.stdin.flush()
        return fut

    def submit(self, cache: bool = True, **req) -> Future:
        """Plans in the background; the future resolves to a :class:`Plan` (PlanError on failure).

        A request equal to an earlier one (same batch, world, strategy, model, options, seed...) gets
        the earlier plan (`cache=False` asks again): training loops meet the same batch signature
        again and again. Requests with an `output` file are not cached (the file is the point).
        """
        key = json.dumps(req, sort_keys=True) if cache and "output" not in req else None
        if key is not None:
            with self._lock:
                hit = self._cache.get(key)
            if hit is not None and not (hit.done() and hit.exception() is not None):
                self.cache_hits += 1
                return hit
        raw = self.request(**req)
        out: Future = Future()
        if key is not None:
            with self._lock:
                self._cache[key] = out

        def done(f: Future) -> None:
            try:
                msg = f.result()
                if not msg.get("ok"):
                    err = msg.get("error") or {}
                    raise PlanError(err.get("code", "serve.error"), err.get("message", "planning failed"))
                out.set_result(read_plan(msg["path"]) if "path" in msg else plan_from_json(msg["plan"]))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                out.set_exception(e)

        raw.add_done_callback(done)
        return out

    def plan(self, **req) -> Plan:
        """Plans and waits."""
        return self.submit(**req).result()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "PlannerClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
