#!/usr/bin/env python3
"""The cost of `bluetape-flow mcp` (agent-tools.md), driven by
`scripts/bench.sh mcp`.

Grows runs as scripts/bench.py does (its workload), then in one session
times, per size: the server's start (spawn to the `initialize` answer), and
heartbeat, verify, completion-check and `status --run-id` called as tools of
one long-lived owner-mode server against the same commands as one CLI
process each (medians of BENCH_SAMPLES calls; tool calls timed from the
request line written to the answer line read), and the server's peak RSS
after all of them. Prints a Markdown section for docs/performance.md.
"""

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench", os.path.join(HERE, "bench.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "100 10000").split()]
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "21"))
FLOW = bench.OURS[0]


class Server:
    """A raw JSON-RPC 2.0 client of one `bluetape-flow mcp` process."""

    def __init__(self, state, owner):
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [FLOW, "mcp", "--mode", "owner", "--state-root", state, "--owner-file", owner],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.next_id = 0
        self.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}})
        self.start_s = time.perf_counter() - started
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0",
                                          "method": "notifications/initialized"}) + "\n")

    def ask(self, method, params):
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id,
                                          "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.next_id:
                return answer

    def call(self, name, arguments, meta=None):
        started = time.perf_counter()
        params = {"name": name, "arguments": arguments}
        if meta:
            # The host's values (the clock), never the model's arguments.
            params["_meta"] = meta
        answer = self.ask("tools/call", params)
        elapsed = time.perf_counter() - started
        result = answer["result"]
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result}")
        return elapsed

    def peak_rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def cli(state, argv):
    return bench.run(bench.OURS, state, argv)[0]


def main():
    work = tempfile.mkdtemp(prefix="bluetape-bench-mcp.")
    try:
        state = os.path.join(work, "state")
        load = bench.Workload(work)
        rows = []
        for size in SIZES:
            print(f"growing a run to {size:,} events...", flush=True)
            run_id = load.create(state, size)
            owner = os.path.join(state, "handles", f"{run_id}.owner")
            starts = []
            for _ in range(5):
                s = Server(state, owner)
                starts.append(s.start_s)
                s.close()
            server = Server(state, owner)
            n = [0]

            def hb_args():
                n[0] += 1
                k = 50000 + n[0]
                at = f"2098-02-01T{k // 3600 % 24:02d}:{k // 60 % 60:02d}:{k % 60:02d}"
                # No run_id: an owner tool acts on its handle's run.
                return {"evidence": [{"kind": "log", "summary": f"mcp heartbeat {n[0]}"}],
                        "input": {"lane_id": bench.LANE, "agent_id": bench.AGENT,
                                  "observed_at": at + "Z",
                                  "silence_lease_deadline": at + ".500000Z",
                                  "reason": "still working"}}

            row = {"events": size}
            # The CLI's heartbeats first: their observed_at is the earlier.
            row["cli heartbeat"] = statistics.median(
                load.heartbeat(bench.OURS, state, run_id, 60000 + i) for i in range(SAMPLES))
            row["mcp heartbeat"] = statistics.median(
                server.call("heartbeat", hb_args()) for _ in range(SAMPLES))
            # An owner server reads its handle's run; status, whose run is
            # optional, names it, at the host's clock.
            for name, args, meta in (
                    ("verify", {}, None), ("completion-check", {}, None),
                    ("status", {"run_id": run_id},
                     {"bluetape-flow/at": "2099-01-01T00:00:00Z"})):
                row[f"mcp {name}"] = statistics.median(
                    server.call(name, args, meta) for _ in range(SAMPLES))
                argv = [name, "--run-id", run_id]
                if name == "status":
                    argv += ["--at", "2099-01-01T00:00:00Z", "--format", "json"]
                row[f"cli {name}"] = statistics.median(
                    cli(state, argv) for _ in range(SAMPLES))
            row["start"] = statistics.median(starts)
            row["rss"] = server.peak_rss_kib()
            server.close()
            rows.append(row)
        ms = lambda v: f"{v * 1000:.2f} ms" if v < 1 else f"{v:.2f} s"
        out = ["| events | server start | heartbeat tool / CLI | verify tool / CLI "
               "| completion-check tool / CLI | status tool / CLI | server peak RSS |",
               "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            cells = [ms(r["start"])]
            for name in ("heartbeat", "verify", "completion-check", "status"):
                cells.append(f"{ms(r['mcp ' + name])} / {ms(r['cli ' + name])}")
            cells.append(f"{r['rss'] / 1024:.1f} MiB")
            out.append(f"| {r['events']:,} | " + " | ".join(cells) + " |")
        print("\n".join(out))
    finally:
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
