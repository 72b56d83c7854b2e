#!/usr/bin/env python3
"""Per-command cost against receipt length (driven by scripts/bench.sh).

Grows one heartbeat-heavy run per size (fresh evidence on every heartbeat,
like real agents) with the real pipeline, then times, at each size:
heartbeat and check-result (median and p95 of BENCH_SAMPLES calls), verify
(and its peak RSS), resume-check, completion-check and liveness-check, and
the views (status --run-id, log with its peak RSS, report with its size), and
(ours only, contracts/transparency.md) sign-head and prove-event once the stored tree exists
and sign-head's first use on a run without our derived files. With
BENCH_OTHER naming a second implementation of the same CLI (for example
"python3 .../bluetape-flow.py"), the same calls run on copies of the same
runs, in the same session, and the ratios are printed. Writes a Markdown
report (BENCH_OUT, default docs/performance.md).

The series of the performance issue "Mutations at the floor", in the same
run (each alone with BENCH_ONLY=breaches|floor|syscalls|otel, several
comma-separated; such a run prints and writes nothing):

- breach-heavy series: one more run per size (its own state root) whose
  history is what the Python reference writes when every heartbeat repeats
  the previous evidence list with a new reason; our replay records each
  repeat as a `liveness_evidence_reused` breach and our binary refuses to
  write one, so `bench_grow --reuse-evidence` seals those lines through the
  library's event sealing and appends them as another writer would. At each
  size: the breaches `verify --run-id` reports (the run fails unless about
  one per event), the first heartbeat of ours on it (it rebuilds our derived
  files), verify, resume-check, completion-check, liveness-check, then
  heartbeats and check-results with fresh evidence on top, and a heartbeat's
  peak RSS. With BENCH_REFERENCE (or BENCH_OTHER) naming the reference, its
  `verify --run-id` must accept the grown run at the smallest size.
- the floor: the median wall time of `bluetape-flow --version` (the
  binary's own start) plus that of `bench_floor` (one process: open
  O_APPEND, write 1,500 bytes, fsync, exit) on the state roots' filesystem,
  sampled beside every size's heartbeats; each heartbeat median (both
  series) divided by it.
- system calls per command: heartbeat and check-result (both series) and
  verify, status --run-id and completion-check (fresh series), one call each
  under `strace -f -c` at the smallest and largest size: total, opens
  (open/openat/openat2), fsyncs (fsync/fdatasync), renames
  (rename/renameat/renameat2), madvise. Without strace a run that asks for
  them fails, unless BENCH_STRACE=0 (then the report says they were left
  out).
- otel-export --out FILE: median time, MB/s of receipt, size written and
  peak RSS per size.
- "Targets (mutations at the floor)": heartbeat and check-result flat within
  1.5x from the smallest to the largest size in both series; heartbeat
  within 2x of the floor at every size; one heartbeat at most 150 system
  calls, 15 opens, 3 fsyncs, 1 rename; verify at least 500 MB/s and
  bundle-verify at least 250 MB/s at the largest size; every peak RSS under
  32 MiB. A target stated for 100 and 100,000 events but judged at other
  sizes says so.
"""

import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
OURS = [os.path.join(TARGET, "release", "bluetape-flow")]
GROW = os.path.join(TARGET, "release", "examples", "bench_grow")
SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "100 1000 10000 100000").split()]
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "21"))
QUERY_SAMPLES = int(os.environ.get("BENCH_QUERY_SAMPLES", "5"))
OTHER = shlex.split(os.environ.get("BENCH_OTHER", ""))
OTHER_SAMPLES = int(os.environ.get("BENCH_OTHER_SAMPLES", "5"))
# publish of one new event: this many rounds, each one heartbeat and one
# publish at every size in turn (so a busy moment of the machine falls on
# all sizes alike); the median of each size.
PUBLISH_SAMPLES = int(os.environ.get("BENCH_PUBLISH_SAMPLES", "11"))
# BENCH_ONLY=GROUP[,GROUP...]: grow only the runs those groups need,
# measure only them, print their sections and targets, write nothing.
# bundles: contracts/bundle.md (bundle-verify, publish); breaches: the breach-heavy
# series; floor: the floor and the heartbeats of both series beside it;
# syscalls: the system-call counts per command; otel: otel-export --out.
GROUPS = {"bundles", "breaches", "floor", "syscalls", "otel"}
ONLY = set(os.environ.get("BENCH_ONLY", "").replace(",", " ").split())
FULL = not ONLY


def want(group):
    return FULL or group in ONLY


# The other implementation may take minutes per command on large runs: each
# of its commands gets this many seconds, and one sample from 100,000 events.
OTHER_TIMEOUT = float(os.environ.get("BENCH_OTHER_TIMEOUT", "60"))
OUT = os.environ.get("BENCH_OUT", os.path.join(ROOT, "docs", "performance.md"))
LANE, AGENT = "build", "agent-1"


class TimedOut(Exception):
    pass


def run(tool, state, argv, check=True, timeout=None):
    """Run one command; returns (seconds, parsed stdout). Raises TimedOut
    (after killing the command) when it outlives `timeout` seconds."""
    start = time.perf_counter()
    proc = subprocess.Popen(tool + ["--state-root", state] + argv,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise TimedOut()
    elapsed = time.perf_counter() - start
    if check and proc.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:1])} failed ({proc.returncode}): {err.decode()}")
    return elapsed, json.loads(out) if out.strip() else None


GNU_TIME = "/usr/bin/time"


def peak_rss(tool, state, argv, timeout=None):
    """Peak RSS (KiB) of one command. Measured by GNU time, a small C
    program: a child forked from this Python process would carry Python's
    own resident size in its high-water mark."""
    if not os.path.exists(GNU_TIME):
        return None
    try:
        proc = subprocess.run([GNU_TIME, "-f", "%M"] + tool + ["--state-root", state] + argv,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimedOut()
    if proc.returncode != 0:
        sys.exit(f"bench: {argv[0]} failed ({proc.returncode})")
    return int(proc.stderr.strip().splitlines()[-1])


def write(path, value):
    with open(path, "w") as f:
        json.dump(value, f)
        f.write("\n")


class Workload:
    def __init__(self, work):
        self.work = work
        self.inputs = os.path.join(work, "in")
        os.makedirs(self.inputs, exist_ok=True)
        self.counter = 0
        # The signer key of the transparency figures.
        self.key = os.path.join(work, "bench.key")
        run(OURS, os.path.join(work, "state"), ["key-generate", "--name", "bench.example",
                                                "--out", self.key])

    def file(self, name, value):
        path = os.path.join(self.inputs, name)
        write(path, value)
        return path

    def fresh(self, what):
        """A fresh evidence list (never used before in this session)."""
        self.counter += 1
        return self.file(f"ev-{self.counter}.json",
                         [{"kind": "log", "summary": f"{what} {self.counter}"}])

    def owned(self, state, run_id, command, *rest):
        owner = os.path.join(state, "handles", f"{run_id}.owner")
        return [command, "--run-id", run_id, "--owner-file", owner, *rest]

    def create(self, state, size, reuse=False):
        """A run with one running lane and a registered component, grown to
        `size` events by heartbeats through the real pipeline; with `reuse`,
        the breach-heavy run (`bench_grow --reuse-evidence`: every heartbeat
        after the first repeats its evidence, sealed lines appended as the
        reference would write them)."""
        repo = os.path.join(self.work, "repo")
        os.makedirs(repo, exist_ok=True)
        # Each run gets its own owner handle file.
        tmp_owner = os.path.join(state, "handles", f"new-{size}.owner")
        _, out = run(OURS, state, ["init", "--workflow-type", "A", "--repo-root", repo,
                                   "--owner-file", tmp_owner, "--component", "runtime"])
        run_id = out["run_id"]
        os.rename(tmp_owner, os.path.join(state, "handles", f"{run_id}.owner"))
        lane = self.file("lane.json", {
            "lane_id": LANE, "agent_id": AGENT, "assignment": "benchmark lane",
            "write_scope": ["src"], "fallback": "main session",
            "observed_at": "2026-07-14T01:00:00Z",
            "startup_ack_deadline": "2026-07-14T01:05:00Z",
            "command_deadline": "2099-01-01T00:00:00Z"})
        topology = self.file("topology.json", [{
            "id": "runtime", "required": True, "description": "the runtime",
            "owner_lane": LANE, "required_checks": ["unit"], "dependencies": [],
            "evidence_refs": [], "coverage_state": "missing"}])
        at = ["--at", "2026-07-14T01:01:00Z"]
        for argv in (["run-approve", "--evidence", self.fresh("approve")],
                     ["run-start", "--evidence", self.fresh("start")],
                     ["lane-create", "--input", lane, "--evidence", self.fresh("lane")],
                     ["lane-start", "--lane-id", LANE, "--agent-id", AGENT, *at,
                      "--evidence", self.fresh("spawn")],
                     ["startup-ack", "--lane-id", LANE, "--agent-id", AGENT, *at,
                      "--evidence", self.fresh("ack")],
                     ["topology-register", "--input", topology,
                      "--evidence", self.fresh("topology")]):
            run(OURS, state, self.owned(state, run_id, *argv))
        owner = os.path.join(state, "handles", f"{run_id}.owner")
        subprocess.run([GROW, *(["--reuse-evidence"] if reuse else []), state, run_id, owner,
                        str(size), f"{LANE}:{AGENT}"], check=True, stdout=subprocess.DEVNULL)
        return run_id

    def heartbeat_argv(self, state, run_id, n):
        """The argv of one heartbeat with fresh evidence, observed at second
        `n` of 2098-01-01 (observations need not be monotonic)."""
        observed = f"2098-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
        lease = f"2098-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.500000Z"
        hb = self.file("hb.json", {"lane_id": LANE, "agent_id": AGENT, "observed_at": observed,
                                   "silence_lease_deadline": lease, "reason": "still working"})
        return self.owned(state, run_id, "heartbeat", "--evidence", self.fresh("heartbeat"),
                          "--input", hb)

    def heartbeat_inline_argv(self, state, run_id, n):
        """[`heartbeat_argv`] with the JSON given inline, as an agent gives
        it (cli-conventions §5) and the MCP server passes it: no file."""
        self.counter += 1
        observed = f"2098-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
        lease = f"2098-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.500000Z"
        evidence = [{"kind": "log", "summary": f"inline heartbeat {self.counter}"}]
        hb = {"lane_id": LANE, "agent_id": AGENT, "observed_at": observed,
              "silence_lease_deadline": lease, "reason": "still working"}
        return self.owned(state, run_id, "heartbeat", "--evidence", json.dumps(evidence),
                          "--input", json.dumps(hb))

    def heartbeat(self, tool, state, run_id, n, timeout=None):
        return run(tool, state, self.heartbeat_argv(state, run_id, n), timeout=timeout)[0]

    def check_result_argv(self, state, run_id):
        check = self.file("check.json", {"component_id": "runtime", "check_id": "unit",
                                         "passed": True})
        return self.owned(state, run_id, "check-result", "--input", check,
                          "--evidence", self.fresh("unit tests"))

    def check_result(self, tool, state, run_id, timeout=None):
        return run(tool, state, self.check_result_argv(state, run_id), timeout=timeout)[0]


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(samples, call):
    """`samples` timings of `call` (seconds), or None when one timed out."""
    times = []
    for n in range(samples):
        try:
            times.append(call(n))
        except TimedOut:
            return None
    return times


def measure(load, tool, state, run_id, samples, query_samples, timeout=None, scratch=None):
    """Every figure of one size for one tool (times in ms; None: did not
    finish within `timeout`). The read-only queries run first; with
    `scratch`, each kind of mutation runs on a fresh copy of the state
    (a command killed at its timeout may leave a lock or a torn line)."""
    row = {}
    receipt = os.path.join(state, "runs", run_id, "receipt.jsonl")
    row["bytes"] = os.path.getsize(receipt)
    verify = timed(query_samples,
                   lambda _: run(tool, state, ["verify", "--run-id", run_id], timeout=timeout)[0])
    row["verify"] = None if verify is None else statistics.median(verify) * 1e3
    try:
        rss = [peak_rss(tool, state, ["verify", "--run-id", run_id], timeout) for _ in range(3)]
        row["verify_rss"] = None if None in rss else max(rss)
    except TimedOut:
        row["verify_rss"] = None
    at = "2098-01-01T00:00:10Z"
    for name, argv in (("resume-check", ["resume-check", "--run-id", run_id]),
                       ("completion-check", ["completion-check", "--run-id", run_id]),
                       ("liveness-check", ["liveness-check", "--run-id", run_id,
                                           "--lane-id", LANE, "--at", at])):
        times = timed(query_samples, lambda _: run(tool, state, argv, timeout=timeout)[0])
        row[name] = None if times is None else statistics.median(times) * 1e3
    row["events"] = run(OURS, state, ["verify", "--run-id", run_id])[1]["sequence"]
    if tool == OURS and load.key:
        transparency(load, state, run_id, row, query_samples, scratch_of(state))

    for name, call in (("heartbeat", load.heartbeat), ("check-result", load.check_result)):
        target = state
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.copytree(state, scratch, symlinks=True)
            target = scratch
        times = timed(samples, lambda n: call(tool, target, run_id, n, timeout=timeout)
                      if name == "heartbeat" else call(tool, target, run_id, timeout=timeout))
        row[name] = None if times is None else (statistics.median(times) * 1e3,
                                                p95(times) * 1e3)
    # After the timed heartbeats (its observed_at is later than theirs).
    measure_syscalls(load, tool, target, run_id, row)
    if tool == OURS:
        row["heartbeat_rss"] = heartbeat_rss(load, state, run_id)
    return row


STRACE = shutil.which("strace")
# The system calls that reach a file or directory by name or descriptor:
# what the held descriptors change.
OPENS = ("open", "openat", "openat2")
STATS = ("stat", "lstat", "fstat", "newfstatat", "statx", "fstatat64")


def syscalls(tool, state, argv):
    """Counts by name of the system calls one command makes (`strace -f
    -c`), or None without strace. Counts, unlike times, do not depend on
    what else the machine is doing."""
    if not STRACE:
        return None
    with tempfile.NamedTemporaryFile(prefix="bench-strace.", delete=False) as f:
        trace = f.name
    try:
        proc = subprocess.run([STRACE, "-f", "-c", "-o", trace] + tool
                              + ["--state-root", state] + argv,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            sys.exit(f"bench: strace {' '.join(argv[:1])} failed: {proc.stderr.decode()}")
        counts = {}
        with open(trace) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 5 and parts[3].isdigit():
                    counts[parts[-1]] = int(parts[3])
        return counts
    finally:
        os.unlink(trace)


def measure_syscalls(load, tool, state, run_id, row):
    """One heartbeat's and one resume-check's system calls."""
    hb = load.file("hb-strace.json", {"lane_id": LANE, "agent_id": AGENT,
                                      "observed_at": "2098-06-01T00:00:00Z",
                                      "silence_lease_deadline": "2098-06-01T00:00:00.500000Z",
                                      "reason": "still working"})
    for name, argv in (("heartbeat", load.owned(state, run_id, "heartbeat", "--evidence",
                                                load.fresh("heartbeat"), "--input", hb)),
                       ("resume-check", ["resume-check", "--run-id", run_id])):
        counts = syscalls(tool, state, argv)
        row[f"{name}_syscalls"] = None if counts is None else {
            "opens": sum(counts.get(c, 0) for c in OPENS),
            "stats": sum(counts.get(c, 0) for c in STATS),
            "flock": counts.get("flock", 0),
            "total": counts.get("total", 0),
        }


def syscalls_table(rows, title):
    out = [f"### System calls per command: {title} (held descriptors)", "",
           "One call each, counted by `strace -f -c` (counts do not depend on the machine's "
           "load): opens are `open`/`openat`, stats the `stat` family.", ""]
    if not STRACE:
        return out + ["Not measured: strace is not installed.", ""]
    out += ["| events | heartbeat opens | stats | flock | total | resume-check opens "
            "| stats | total |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size in rows:
        h, r = rows[size]["heartbeat_syscalls"], rows[size]["resume-check_syscalls"]
        if h is None or r is None:
            continue
        out.append(f"| {rows[size]['events']:,} | {h['opens']} | {h['stats']} | {h['flock']} "
                   f"| {h['total']} | {r['opens']} | {r['stats']} | {r['total']} |")
    return out


def syscalls_targets(rows):
    """The held descriptors cost a constant number of opens."""
    sizes = list(rows)
    if any(rows[s].get("heartbeat_syscalls") is None for s in sizes):
        return []
    out = []
    for name in ("heartbeat", "resume-check"):
        opens = [rows[s][f"{name}_syscalls"]["opens"] for s in sizes]
        # Bounded, not equal: a heartbeat on a short run also opens a few
        # files a long run's checkpoint path no longer needs.
        out.append((f"{name} opens no more files and directories at any size than at "
                    f"{sizes[0]:,} events ({', '.join(map(str, opens))})",
                    max(opens) <= opens[0]))
    return out


def measure_views(state, run_id, work, samples):
    """The views (views.md) at one size (ours only): `status --run-id`
    (median ms), `log` streaming every event as JSON lines (median ms and
    peak RSS), `report` (median ms and the page's size)."""
    row = {}
    at = "2098-01-01T00:00:10Z"
    status = ["status", "--run-id", run_id, "--at", at, "--format", "json"]
    row["status"] = statistics.median(run(OURS, state, status)[0] for _ in range(samples)) * 1e3
    log = ["log", "--run-id", run_id, "--format", "jsonl"]
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        subprocess.run(OURS + ["--state-root", state] + log, check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    row["log"] = statistics.median(times) * 1e3
    rss = [peak_rss(OURS, state, log) for _ in range(3)]
    row["log_rss"] = None if None in rss else max(rss)
    page = os.path.join(work, f"report-{run_id}.html")
    times = []
    for _ in range(samples):
        elapsed, out = run(OURS, state, ["report", "--run-id", run_id, "--out", page,
                                         "--at", at, "--force"])
        times.append(elapsed)
    row["report"] = statistics.median(times) * 1e3
    row["report_bytes"] = os.path.getsize(page)
    return row


def figures_table(title, columns, lines):
    """A markdown table of figures under `title`: `columns` the headings (all
    right-aligned), `lines` the cell texts of each line."""
    return [f"### {title}", "", "| " + " | ".join(columns) + " |", "|" + "---:|" * len(columns),
            *("| " + " | ".join(cells) + " |" for cells in lines)]


def views_table(rows, ours):
    return figures_table(
        "Views (views.md)",
        ["events", "status --run-id", "log (all events, jsonl)", "log peak RSS", "report",
         "report size"],
        [[f"{ours[size]['events']:,}", ms(v["status"]), ms(v["log"]), rss_text(v["log_rss"]),
          ms(v["report"]), f"{v['report_bytes'] / 1e3:,.0f} kB"] for size, v in rows.items()])


def views_targets(rows, ours):
    small, large = rows[min(rows)], rows[max(rows)]
    n_small, n_large = ours[min(rows)]["events"], ours[max(rows)]["events"]
    checks = [(f"status --run-id at {n_large:,} events within 1.5x of its time at "
               f"{n_small:,} ({large['status'] / small['status']:.2f}x)",
               large["status"] <= 1.5 * small["status"])]
    base = min((s for s in rows if ours[s]["events"] >= 1000), default=min(rows))
    if large["log_rss"] is not None and rows[base]["log_rss"] is not None:
        checks.append((f"log peak RSS at {n_large:,} events within 1.5x of its value at "
                       f"{ours[base]['events']:,} ({large['log_rss'] / rows[base]['log_rss']:.2f}x)",
                       large["log_rss"] <= 1.5 * rows[base]["log_rss"]))
    checks.append((f"report of {n_large:,} events under 2 s ({ms(large['report'])}) and "
                   f"under 10 MB ({large['report_bytes'] / 1e6:.2f} MB)",
                   large["report"] < 2000 and large["report_bytes"] < 10e6))
    return checks
def scratch_of(state):
    return state + "-transparency"


def transparency(load, state, run_id, row, samples, scratch):
    """Signed heads (contracts/transparency.md): sign-head and prove-event once the stored hashes exist (a
    run our tool grew keeps them at every append), and the first use on a
    run without our files (as the reference writes it: no tree-hashes,
    checkpoint or receipt-head.json), where sign-head verifies the whole
    receipt and builds the tree."""
    argv = ["sign-head", "--run-id", run_id, "--key", load.key]
    run(OURS, state, argv)
    times = timed(samples, lambda _: run(OURS, state, argv)[0])
    row["sign-head"] = statistics.median(times) * 1e3
    middle = str(max(1, row["events"] // 2))
    times = timed(samples, lambda _: run(OURS, state, ["prove-event", "--run-id", run_id,
                                                       "--sequence", middle])[0])
    row["prove-event"] = statistics.median(times) * 1e3
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(state, scratch, symlinks=True)
    run_dir = os.path.join(scratch, "runs", run_id)
    shutil.rmtree(os.path.join(run_dir, "heads"), ignore_errors=True)
    for name in ("tree-hashes", "checkpoint.json", "receipt-head.json"):
        try:
            os.remove(os.path.join(run_dir, name))
        except FileNotFoundError:
            pass
    row["first-sign-head"] = run(OURS, scratch, argv)[0] * 1e3
    shutil.rmtree(scratch, ignore_errors=True)


def bundles(load, state, run_id, row, samples, work):
    """Bundles (contracts/bundle.md): bundle-export, bundle-verify (time, MB/s of receipt, peak
    RSS) and publish of one new event onto an existing publication."""
    receipt = os.path.join(state, "runs", run_id, "receipt.jsonl")
    bundle = os.path.join(work, f"bundle-{row['events']}.tar")
    if os.path.exists(bundle):
        os.remove(bundle)
    row["bundle-export"] = run(OURS, state, ["bundle-export", "--run-id", run_id,
                                             "--out", bundle])[0] * 1e3
    verify = ["bundle-verify", bundle, "--at", "2098-01-02T00:00:00Z"]
    times = timed(samples, lambda _: run(OURS, state, verify)[0])
    row["bundle-verify"] = statistics.median(times) * 1e3
    row["bundle-mbps"] = os.path.getsize(receipt) / 1e6 / statistics.median(times)
    rss = [peak_rss(OURS, state, verify) for _ in range(3)]
    row["bundle-verify-rss"] = None if None in rss else max(rss)
    repo = os.path.join(work, f"publish-{row['events']}.git")
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", repo], check=True)
    row["publish-argv"] = ["publish", "--run-id", run_id, "--repo", repo]
    row["publish-first"] = run(OURS, state, row["publish-argv"])[0] * 1e3


def publish_rounds(load, state, runs, rows, samples):
    """publish of one new event onto the publication `bundles` made: each
    round one heartbeat and one publish at every size in turn; the median
    of each size (ms) and its spread."""
    times = {size: [] for size in runs}
    for i in range(samples):
        for size, run_id in runs.items():
            load.heartbeat(OURS, state, run_id, 80000 + i)
            times[size].append(run(OURS, state, rows[size]["publish-argv"])[0] * 1e3)
    for size, values in times.items():
        rows[size]["publish"] = statistics.median(values)
        rows[size]["publish-range"] = (min(values), max(values))


def bundles_table(rows):
    return figures_table(
        "Audit bundles and publications (contracts/bundle.md)",
        ["events", "bundle-export", "bundle-verify", "receipt MB/s", "bundle-verify peak RSS",
         "first publish", f"publish of one new event (median of {PUBLISH_SAMPLES}, range)"],
        [[f"{r['events']:,}", ms(r["bundle-export"]), ms(r["bundle-verify"]),
          f"{r['bundle-mbps']:.0f}", rss_text(r["bundle-verify-rss"]), ms(r["publish-first"]),
          f"{ms(r['publish'])} ({ms(r['publish-range'][0])} to {ms(r['publish-range'][1])})"]
         for r in rows.values() if "bundle-verify" in r])


def bundles_targets(rows):
    sized = sorted(rows.values(), key=lambda r: r["events"])
    small, large = sized[0], sized[-1]
    rss = large["bundle-verify-rss"]
    return [
        (f"bundle-verify of {large['events']:,} events at least 150 MB/s of receipt "
         f"({large['bundle-mbps']:.0f} MB/s)", large["bundle-mbps"] >= 150),
        (f"bundle-verify of {large['events']:,} events under 16 MiB peak RSS ({rss_text(rss)})",
         rss is not None and rss < 16 * 1024),
        (f"publish of one new event at {large['events']:,} events within 1.5x of "
         f"{small['events']:,} ({ms(large['publish'])} vs {ms(small['publish'])})",
         large["publish"] <= 1.5 * small["publish"]),
    ]


BUNDLE_COSTS = [
    "### Cost of the bundle commands (contracts/bundle.md)",
    "",
    "n is the number of receipt lines, k the number of stored heads, r the bound reports.",
    "",
    "- `bundle-export`: a full verification and replay (O(n), streaming), a pass over the heads' "
    "sizes when there are heads, one pass to cut and hash the receipt into segments of 256 "
    "events and one to copy them into the tar (each segment's SHA-256 checked again while "
    "copied); memory O(1) in n besides the index (one entry per 256 events).",
    "- `bundle-verify`: one streaming pass over the tar: each byte of the receipt is hashed "
    "twice (segment SHA-256, Merkle leaf, on the thread that reads the tar) and parsed once "
    "(a line already in canonical form, as every line this tool writes, is read into a view "
    "that borrows the line's bytes (no `serde_json::Value`): 24-byte nodes made in one arena "
    "per batch, proven canonical in the same pass and its checksum hashed over its own bytes; "
    "any other line is parsed by serde_json, written out canonically and compared); "
    "long receipts are read straight into batch buffers of whole lines (no copy through a "
    "`BufReader`) and checked on three worker threads, and "
    "each batch with its events is lent to the main thread, which replays them in order "
    "without an undo journal (a verdict drops the state of a refused event) and hands the "
    "batch back to the worker that read it, which empties its arena for the next batch and "
    "returns its line buffer to the reader (no allocation per line or per batch); a "
    "heartbeat's evidence digest is the "
    "hash of the list's own bytes, computed once per event; memory: the index, "
    "the heads and reports (each at most 64 KiB / 1 MiB) and the replayed state (its liveness "
    "digests moved every 256 events into a set of 16 bytes each), a few batches of 24 KiB of "
    "lines in flight, never the receipt. With `--git`: the newest commit the same way through `git cat-file --batch`, "
    "and for each older commit its index and tree (O(n/256) entries) and at most two "
    "segments compared.",
    "- `publish`: a full verification and replay (O(n), streaming: a publication is a bundle, "
    "never from the checkpoint), O(log n) to check that the receipt extends the "
    "published one (a binary search for the published last event), O(n/256) to list the "
    "published tree and to write the new one (`git hash-object -t tree`, which checks the tree "
    "but, unlike `git mktree`, opens none of its entries' objects), and only the last "
    "segment(s), the index and new heads hashed and written (`git hash-object -w` writes "
    "nothing that exists); about ten git processes in all.",
    "- `attest`: a full verification and replay (O(n), streaming), the tree root from the "
    "receipt's own lines (one more O(n) pass, never `tree-hashes`), one SHA-256 pass over the "
    "receipt, one Ed25519 signature.",
]


def transparency_table(rows):
    return figures_table(
        "Signed heads and proofs (contracts/transparency.md)",
        ["events", "sign-head", "prove-event", "first sign-head on a run without our files"],
        [[f"{r['events']:,}", ms(r["sign-head"]), ms(r["prove-event"]), ms(r["first-sign-head"])]
         for r in rows.values() if "sign-head" in r])


# What each transparency command costs (contracts/transparency.md), stated
# here so every regenerated report keeps it beside the figures.
COSTS = [
    "### Cost of the transparency commands (contracts/transparency.md)",
    "",
    "n is the number of receipt lines, k the number of stored heads.",
    "",
    "- every mutation: + one `pread` of the previous line, up to log2 n `pread`s of stored "
    "hashes and one `pwrite` of at most 1 + log2 n hashes (under two on average) to "
    "`tree-hashes`; flat in n (the heartbeat figures above include it). When the tree does "
    "not match the receipt (first use on a run the reference wrote, another writer's lines), "
    "that mutation rebuilds it: one pass over the receipt, O(n) time, 32 bytes per stored "
    "hash (about 64 bytes per line) in memory.",
    "- `key-generate`: constant (one key, one file).",
    "- `sign-head`: the position from the proven checkpoint (else a full `verify`, O(n), "
    "streaming), then the tree of the receipt's own lines, one O(n) pass hashing each line "
    "(32 bytes per stored hash, about 64 bytes per line, in memory: the signed root never "
    "comes from `tree-hashes`, whose earlier hashes its last leaf does not prove), O(k log n) "
    "for the k stored heads' roots, one small file, and `tree-hashes` rewritten when it does "
    "not end in the receipt's last leaf (the \"first sign-head\" column).",
    "- `prove-event`: from the proven checkpoint, O(log n): a binary search for the line "
    "(O(log n) `pread`s), its leaf, the head's root and the audit path from `tree-hashes`; "
    "without a proven checkpoint a full `verify` first, and without a matching tree one "
    "more O(n) pass in memory (read-only: it never writes the tree).",
    "- `prove-append`: as `prove-event`, for two heads (two roots and one consistency path).",
    "- `check-proof`: O(log n) hashes and one or two signature checks; reads only its files "
    "(at most 64 KiB each).",
    "- `verify`: unchanged when the run has no stored head and no new flag is given; with "
    "heads, one more streaming pass over the first max(N) lines (O(n) time, O(log n) memory) "
    "and one signature check per head.",
]


def rss_text(kib):
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def ms(value, limit=None):
    if value is None:
        return f"> {limit:.0f} s" if limit else "n/a"
    return f"{value:.2f} ms" if value < 100 else f"{value / 1e3:.2f} s"


def pair(value, limit=None):
    if value is None:
        return ms(None, limit)
    return f"{ms(value[0])} / {ms(value[1])}"


def ratio(theirs, ours, limit=None):
    if theirs is None:
        return f"> {limit * 1e3 / ours:,.0f}x" if limit else "n/a"
    return f"{theirs / ours:,.1f}x" if theirs / ours < 10 else f"{theirs / ours:,.0f}x"


def table(rows, title, limit=None):
    lines = [f"### {title}", "",
             "| events | receipt | bytes/event | heartbeat median / p95 | check-result median / p95 "
             "| verify | verify MB/s | verify peak RSS | resume-check | completion-check "
             "| liveness-check |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size, r in rows.items():
        rate = "n/a" if r["verify"] is None else f"{r['bytes'] / 1e6 / (r['verify'] / 1e3):.0f}"
        lines.append(
            f"| {r['events']:,} | {r['bytes'] / 1e6:.1f} MB | {r['bytes'] / r['events']:.0f} "
            f"| {pair(r['heartbeat'], limit)} | {pair(r['check-result'], limit)} "
            f"| {ms(r['verify'], limit)} | {rate} "
            f"| {rss_text(r['verify_rss'])} | {ms(r['resume-check'], limit)} "
            f"| {ms(r['completion-check'], limit)} | {ms(r['liveness-check'], limit)} |")
    return lines


def targets(rows):
    small, large = rows[min(rows)], rows[max(rows)]
    checks = []
    for command in ("heartbeat", "check-result"):
        ratio = large[command][0] / small[command][0]
        checks.append((f"{command}: median at {large['events']:,} events is at most 1.5x "
                       f"its median at {small['events']:,} ({ratio:.2f}x) and at most 5 ms "
                       f"({large[command][0]:.2f} ms)",
                       ratio <= 1.5 and large[command][0] <= 5))
    rate = large["bytes"] / 1e6 / (large["verify"] / 1e3)
    checks.append((f"verify: at least 200 MB/s ({rate:.0f} MB/s at {large['events']:,} events)",
                   rate >= 200))
    if all(r["verify_rss"] is not None for r in rows.values()):
        rss = max(r["verify_rss"] for r in rows.values()) / 1024
        checks.append((f"verify: peak RSS under 16 MiB at every size (at most {rss:.1f} MiB)",
                       rss < 16))
    for command in ("sign-head", "prove-event"):
        if command in large and command in small:
            ratio = large[command] / small[command]
            checks.append((f"{command}: at {large['events']:,} events at most 1.5x its time at "
                           f"{small['events']:,} ({ratio:.2f}x, {large[command]:.2f} ms)",
                           ratio <= 1.5))
    slowest = max(large[q] for q in ("resume-check", "completion-check", "liveness-check"))
    checks.append((f"read-only queries other than verify: at most 10 ms at "
                   f"{large['events']:,} events (slowest {slowest:.2f} ms)", slowest <= 10))
    return checks


# The performance issue "Mutations at the floor" (its Deliver 5): the
# breach-heavy series, system-call counts per command, the floor, the
# otel-export series and the targets, all from one run.

FLOOR_BIN = os.path.join(TARGET, "release", "examples", "bench_floor")
# BENCH_STRACE=0 leaves the system-call counts out on purpose (the report
# says so); otherwise a run that asks for them fails without strace.
STRACE_OFF = os.environ.get("BENCH_STRACE", "1") == "0"
# A second implementation to check the grown breach-heavy run against (its
# `verify --run-id` at the smallest size); BENCH_OTHER when unset.
REFERENCE = shlex.split(os.environ.get("BENCH_REFERENCE", "")) or OTHER
REUSED = "liveness_evidence_reused"
MIB_LIMIT = 32
HEARTBEAT_LIMITS = (("total", 150), ("opens", 15), ("fsyncs", 3), ("renames", 1))


def wall(argv):
    """Wall time (s) of one process, started and reaped as `run` does."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} failed ({proc.returncode}): {err.decode()}")
    return elapsed


def fs_type(path):
    """The filesystem type of `path` (the longest mount point above it)."""
    best, kind = "", "unknown"
    path = os.path.realpath(path)
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    point = parts[1].replace("\\040", " ")
                    if (path == point or path.startswith(point.rstrip("/") + "/")) \
                            and len(point) > len(best):
                        best, kind = point, parts[2]
    except OSError:
        pass
    return kind


class Floor:
    """What no mutation can go below, sampled beside every size's heartbeats
    (so a busy moment of the machine falls on both): the binary's own start
    (`bluetape-flow --version`) and one fsynced 1.5 KB append by a tiny
    compiled program (`bench_floor`), each timed as a whole process."""

    def __init__(self, work):
        self.file = os.path.join(work, "floor.log")  # beside the state roots
        self.version, self.append = [], []

    def sample(self, count):
        for _ in range(count):
            self.version.append(wall(OURS + ["--version"]))
            self.append.append(wall([FLOOR_BIN, self.file]))
        # Keep the file short: the append is the cost measured, not its size.
        os.remove(self.file)

    def figures(self):
        """(version, append, floor) medians in ms."""
        version = statistics.median(self.version) * 1e3
        append = statistics.median(self.append) * 1e3
        return version, append, version + append


def heartbeat_rss(load, state, run_id, base=40000):
    """Peak RSS (KiB) of one heartbeat, the highest of three."""
    rss = [peak_rss(OURS, state, load.heartbeat_argv(state, run_id, base + i))
           for i in range(3)]
    return None if None in rss else max(rss)


def heartbeats_only(load, state, run_id, samples):
    """A fresh-series row with the heartbeat figures only (BENCH_ONLY=floor)."""
    times = timed(samples, lambda n: load.heartbeat(OURS, state, run_id, n))
    return {"heartbeat": (statistics.median(times) * 1e3, p95(times) * 1e3),
            "heartbeat_rss": heartbeat_rss(load, state, run_id)}


def basic_row(state, run_id):
    receipt = os.path.join(state, "runs", run_id, "receipt.jsonl")
    return {"bytes": os.path.getsize(receipt),
            "events": run(OURS, state, ["verify", "--run-id", run_id])[1]["sequence"]}


def check_reference(state, run_id):
    """The other implementation's `verify --run-id` on a grown breach-heavy
    run: the run is one it accepts. None when no reference is named."""
    if not REFERENCE:
        return None
    try:
        _, out = run(REFERENCE, state, ["verify", "--run-id", run_id], timeout=OTHER_TIMEOUT)
    except TimedOut:
        sys.exit(f"bench: {' '.join(REFERENCE)} verify of the breach-heavy run timed out")
    if not out or out.get("ok") is not True:
        sys.exit(f"bench: {' '.join(REFERENCE)} does not verify the breach-heavy run: {out}")
    return out["sequence"]


def warm_breaches(load, state, run_id):
    """The breaches `verify --run-id` reports on a grown breach-heavy run,
    then the first heartbeat of ours on it (the lines were appended as
    another writer's, so it rebuilds our derived files)."""
    receipt = os.path.join(state, "runs", run_id, "receipt.jsonl")
    row = {"bytes": os.path.getsize(receipt)}
    out = run(OURS, state, ["verify", "--run-id", run_id])[1]
    row["first-heartbeat"] = load.heartbeat(OURS, state, run_id, 30000) * 1e3
    row["events"] = out["sequence"]
    breaches = out.get("breaches", [])
    row["breaches"] = sum(1 for b in breaches if b.get("rule") == REUSED)
    row["other-breaches"] = len(breaches) - row["breaches"]
    # Every grown line but the setup's and the first heartbeat is a repeat.
    if row["breaches"] < row["events"] - 20:
        sys.exit(f"bench: the breach-heavy run of {row['events']:,} events reports only "
                 f"{row['breaches']:,} {REUSED} breaches")
    return row


def measure_breaches(load, state, run_id, row, samples, query_samples):
    """The breach-heavy series at one size (ours): verify, the read-only
    queries, then heartbeats and check-results with fresh evidence on top,
    and a heartbeat's peak RSS. Times in ms."""
    times = timed(query_samples, lambda _: run(OURS, state, ["verify", "--run-id", run_id])[0])
    row["verify"] = statistics.median(times) * 1e3
    at = "2098-01-01T00:00:10Z"
    for name, argv in (("resume-check", ["resume-check", "--run-id", run_id]),
                       ("completion-check", ["completion-check", "--run-id", run_id]),
                       ("liveness-check", ["liveness-check", "--run-id", run_id,
                                           "--lane-id", LANE, "--at", at])):
        times = timed(query_samples, lambda _: run(OURS, state, argv)[0])
        row[name] = statistics.median(times) * 1e3
    for name, call in (("heartbeat", lambda n: load.heartbeat(OURS, state, run_id, n)),
                       ("check-result", lambda _: load.check_result(OURS, state, run_id))):
        times = timed(samples, call)
        row[name] = (statistics.median(times) * 1e3, p95(times) * 1e3)
    row["heartbeat_rss"] = heartbeat_rss(load, state, run_id)


def breaches_table(rows, reference):
    lines = ["### Breach-heavy series (mutations at the floor)", "",
             "One run per size whose history is what the Python reference writes when every "
             "heartbeat repeats the previous evidence list with a new reason (the reference "
             "refuses only the same evidence with the same reason; our replay records each "
             f"repeat as a `{REUSED}` breach and our binary refuses to write one). "
             "`bench_grow --reuse-evidence` seals these lines through the library's event "
             "sealing and appends them as another writer would, so the first heartbeat of ours "
             "rebuilds our derived files (its own column); then "
             f"{SAMPLES} heartbeats and {SAMPLES} check-results with fresh evidence on top and "
             f"{QUERY_SAMPLES} calls of each query. Breaches: as `verify --run-id` reports them.",
             ""]
    if reference is None:
        lines += ["Not checked against the reference in this run (BENCH_REFERENCE or "
                  "BENCH_OTHER names it).", ""]
    else:
        size, events = reference
        lines += [f"`{' '.join(REFERENCE)} verify --run-id` accepts the grown run of "
                  f"{size:,} events (sequence {events:,}).", ""]
    lines += ["| events | receipt | breaches | first heartbeat after the grown lines "
              "| heartbeat median / p95 | check-result median / p95 | heartbeat peak RSS "
              "| verify | verify MB/s | resume-check | completion-check | liveness-check |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows.values():
        rate = r["bytes"] / 1e6 / (r["verify"] / 1e3)
        other = f" (+{r['other-breaches']} other)" if r["other-breaches"] else ""
        lines.append(
            f"| {r['events']:,} | {r['bytes'] / 1e6:.1f} MB | {r['breaches']:,}{other} "
            f"| {ms(r['first-heartbeat'])} | {pair(r['heartbeat'])} | {pair(r['check-result'])} "
            f"| {rss_text(r['heartbeat_rss'])} | {ms(r['verify'])} | {rate:.0f} "
            f"| {ms(r['resume-check'])} | {ms(r['completion-check'])} "
            f"| {ms(r['liveness-check'])} |")
    return lines


def floor_table(floor, fresh, breach, fs):
    version, append, total = floor.figures()
    lines = ["### The floor (mutations at the floor)", "",
             f"- `bluetape-flow --version` (the binary's own start): median {ms(version)} "
             f"of {len(floor.version)}",
             f"- one fsynced 1.5 KB append (`bench_floor`: open O_APPEND, write 1,500 bytes, "
             f"fsync, exit; the whole process) on the state roots' filesystem ({fs}): "
             f"median {ms(append)} of {len(floor.append)}",
             f"- the floor, their sum: {ms(total)}",
             "",
             "Sampled beside each size's heartbeats, every process timed the same way (start "
             "to reaped). Target: a heartbeat's median within 2x of the floor.", ""]
    sizes = sorted(set(fresh) | set(breach))
    lines += ["| events | heartbeat median (fresh evidence) | / floor | heartbeat peak RSS "
              "| heartbeat median (breach-heavy) | / floor | heartbeat peak RSS |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for size in sizes:
        cells = []
        for rows in (fresh, breach):
            r = rows.get(size)
            if r is None or r.get("heartbeat") is None:
                cells += ["n/a"] * 3
            else:
                cells += [ms(r["heartbeat"][0]), f"{r['heartbeat'][0] / total:.2f}x",
                          rss_text(r.get("heartbeat_rss"))]
        events = (fresh.get(size) or breach.get(size)).get("events", size)
        lines.append(f"| {events:,} | " + " | ".join(cells) + " |")
    return lines


def syscall_figures(counts):
    return {"total": counts.get("total", 0),
            "opens": sum(counts.get(c, 0) for c in OPENS),
            "fsyncs": counts.get("fsync", 0) + counts.get("fdatasync", 0),
            "renames": sum(counts.get(c, 0) for c in ("rename", "renameat", "renameat2")),
            "madvise": counts.get("madvise", 0)}


def measure_syscall_counts(load, state, run_id, fresh, base):
    """One call of each command under `strace -f -c`: heartbeat and
    check-result, and on the fresh series also verify, status --run-id and
    completion-check."""
    # The steady heartbeat: past the manifest's settle time (a mutation in
    # a run's first 2 s, and the one after, also copy the manifest into the
    # checkpoint, store::run::SETTLED), and of two in a row the one with
    # fewer opens: a refresh of the derived caches (each eighth of growth,
    # never two in a row) falls on one now and then. The other is its own
    # row when it differs.
    time.sleep(2.1)
    beats = sorted((syscall_figures(syscalls(OURS, state, load.heartbeat_argv(state, run_id, n)))
                    for n in (base, base + 2)), key=lambda f: (f["opens"], f["total"]))
    figures = {"heartbeat": beats[0]}
    if beats[1]["opens"] != beats[0]["opens"]:
        figures["heartbeat, the other of two"] = beats[1]
    argvs = [("heartbeat, JSON inline", load.heartbeat_inline_argv(state, run_id, base + 1)),
             ("check-result", load.check_result_argv(state, run_id))]
    if fresh:
        argvs += [("--version", ["--version"]),
                  ("verify", ["verify", "--run-id", run_id]),
                  ("status --run-id", ["status", "--run-id", run_id,
                                       "--at", "2098-01-01T00:00:10Z", "--format", "json"]),
                  ("completion-check", ["completion-check", "--run-id", run_id])]
    return figures | {name: syscall_figures(syscalls(OURS, state, argv)) for name, argv in argvs}


def syscall_counts_table(counts):
    """`counts`: {(series, size): {"events": n, command: figures}}."""
    lines = ["### System calls per command (mutations at the floor)", ""]
    if counts is None:
        reason = "BENCH_STRACE=0" if STRACE_OFF else "strace is not installed"
        return lines + [f"Not measured in this run: {reason}.", ""]
    lines += ["One call each under `strace -f -c` at the smallest and largest size (counts do "
              "not depend on the machine's load): opens are `open`/`openat`/`openat2`, fsyncs "
              "`fsync`/`fdatasync`, renames `rename`/`renameat`/`renameat2`. The heartbeat's "
              "targets are the first row, judged on the steady heartbeat that reads its evidence "
              "and input from files (after the manifest's 2 s settle time; of two in a row, the "
              "one with fewer opens, as a derived-cache refresh falls on one every eighth of "
              "growth; the other is its own row when it differs); "
              "`heartbeat, JSON inline` gives them inline (cli-conventions §5, as the MCP "
              "server does) and opens no input file.", "",
              "| command | series | events | total | opens | fsyncs | renames | madvise |",
              "|---|---|---:|---:|---:|---:|---:|---:|",
              "| heartbeat target | | | <= 150 | <= 15 | <= 3 | <= 1 | |"]
    commands = ("heartbeat", "heartbeat, the other of two", "heartbeat, JSON inline",
                "check-result", "--version", "verify",
                "status --run-id", "completion-check")
    ordered = sorted(counts.items(), key=lambda kv: (kv[0][0] != "fresh evidence", kv[0][1]))
    for command in commands:
        for (series, size), row in ordered:
            f = row.get(command)
            if f is not None:
                lines.append(f"| {command} | {series} | {row['events']:,} | {f['total']} "
                             f"| {f['opens']} | {f['fsyncs']} | {f['renames']} "
                             f"| {f['madvise']} |")
    # Beside the heartbeat, what a bare process start costs (libc and
    # mimalloc's set-up; a one-event mutation skips mimalloc's).
    fresh = [row for (series, _), row in ordered if series == "fresh evidence"
             and row.get("--version") and row.get("heartbeat")]
    if fresh:
        row = fresh[-1]
        start, beat = row["--version"], row["heartbeat"]
        lines += ["", f"One heartbeat makes {beat['total']} calls and {beat['opens']} opens at "
                  f"{row['events']:,} events; a bare process start (`--version`) makes "
                  f"{start['total']} calls and {start['opens']} opens, mimalloc's start among "
                  f"them, which a one-event mutation does not make (it allocates with the C "
                  f"library's allocator, src/main.rs)."]
    return lines


def measure_otel(state, run_id, work, samples):
    """otel-export --out FILE at one size: median time (ms), peak RSS, size
    of the OTLP/JSON written."""
    out = os.path.join(work, "otel-export.jsonl")
    argv = ["otel-export", "--run-id", run_id, "--out", out, "--force"]
    times = [run(OURS, state, argv)[0] for _ in range(samples)]
    row = {"otel": statistics.median(times) * 1e3, "otel_rss": peak_rss(OURS, state, argv),
           "otel_bytes": os.path.getsize(out), "otel_samples": samples}
    os.remove(out)
    return row


def otel_table(rows):
    return figures_table(
        "otel-export --out (contracts/otel.md)",
        ["events", "receipt", "otel-export --out (median of)", "receipt MB/s",
         "OTLP/JSON written", "peak RSS"],
        [[f"{r['events']:,}", f"{r['bytes'] / 1e6:.1f} MB",
          f"{ms(r['otel'])} ({r['otel_samples']})", f"{r['bytes'] / 1e6 / (r['otel'] / 1e3):.0f}",
          f"{r['otel_bytes'] / 1e6:.1f} MB", rss_text(r["otel_rss"])]
         for r in rows.values() if "otel" in r])


def floor_targets(fresh, breach, floor, counts, views):
    """The issue's targets, each met or not from this run's figures; only
    those whose figures this run has."""
    out = []
    sizes = sorted(set(fresh) | set(breach)) or [None]
    small, large = min(sizes), max(sizes)
    named = "" if small is None or (small, large) == (100, 100000) else \
        f" [judged at {small:,} and {large:,} events; the target names 100 and 100,000]"
    at_large = "" if large is None or large == 100000 else \
        f" [judged at {large:,} events; the target names 100,000]"
    series = (("fresh evidence", fresh), ("breach-heavy", breach))
    if small != large:
        for label, rows in series:
            for command in ("heartbeat", "check-result"):
                if rows.get(small, {}).get(command) and rows.get(large, {}).get(command):
                    a, b = rows[small][command][0], rows[large][command][0]
                    out.append((f"{command} ({label}) flat within 1.5x from "
                                f"{rows[small]['events']:,} to {rows[large]['events']:,} events "
                                f"({ms(a)} to {ms(b)}: {b / a:.2f}x){named}", b <= 1.5 * a))
    if floor is not None and floor.version:
        total = floor.figures()[2]
        for label, rows in series:
            medians = [(r["events"], r["heartbeat"][0]) for r in rows.values()
                       if r.get("heartbeat")]
            if medians:
                events, worst = max(medians, key=lambda m: m[1])
                out.append((f"heartbeat ({label}) within 2x of the floor of this run at every "
                            f"size (worst {ms(worst)} at {events:,} events: "
                            f"{worst / total:.2f}x of {ms(total)})", worst <= 2 * total))
    if counts:
        beats = [(series_, row["events"], row["heartbeat"]) for (series_, _), row in
                 counts.items() if "heartbeat" in row]
        for key, limit in HEARTBEAT_LIMITS:
            label, events, worst = max(beats, key=lambda b: b[2][key])
            what = {"total": "system calls", "renames": "rename" if limit == 1
                    else "renames"}.get(key, key)
            out.append((f"one heartbeat at most {limit} {what} (most: {worst[key]} at "
                        f"{events:,} events, {label})", worst[key] <= limit))
    if large in fresh and fresh[large].get("verify") is not None:
        r = fresh[large]
        rate = r["bytes"] / 1e6 / (r["verify"] / 1e3)
        out.append((f"verify at least 500 MB/s at {r['events']:,} events ({rate:.0f} MB/s)"
                    f"{at_large}", rate >= 500))
    if large in fresh and "bundle-mbps" in fresh[large]:
        r = fresh[large]
        out.append((f"bundle-verify at least 250 MB/s at {r['events']:,} events "
                    f"({r['bundle-mbps']:.0f} MB/s){at_large}", r["bundle-mbps"] >= 250))
    peaks = {}
    for label, rows, key in (("heartbeat (fresh evidence)", fresh, "heartbeat_rss"),
                             ("heartbeat (breach-heavy)", breach, "heartbeat_rss"),
                             ("verify", fresh, "verify_rss"),
                             ("bundle-verify", fresh, "bundle-verify-rss"),
                             ("otel-export", fresh, "otel_rss"),
                             ("log", views or {}, "log_rss")):
        values = [r[key] for r in rows.values() if r.get(key) is not None]
        if values:
            peaks[label] = max(values)
    if peaks:
        worst = max(peaks.values())
        listed = ", ".join(f"{k} {rss_text(v)}" for k, v in peaks.items())
        out.append((f"peak RSS under {MIB_LIMIT} MiB at every size ({listed})",
                    worst < MIB_LIMIT * 1024))
    return out


def targets_lines(title, checks):
    lines = [f"### {title}", ""]
    lines += [f"- {'met' if ok else 'NOT met'}: {text}" for text, ok in checks]
    return lines + [""]


def main():
    unknown = ONLY - GROUPS
    if unknown:
        sys.exit(f"bench: BENCH_ONLY={' '.join(sorted(unknown))}: not a group "
                 f"(one or more of {', '.join(sorted(GROUPS))})")
    if want("syscalls") and not STRACE and not STRACE_OFF:
        sys.exit("bench: strace is not installed, and this run asks for the system-call "
                 "counts per command (install strace, or set BENCH_STRACE=0 to leave them "
                 "out of the report on purpose)")
    if want("floor") and not os.path.exists(FLOOR_BIN):
        sys.exit(f"bench: {FLOOR_BIN} is missing (scripts/bench.sh builds it)")
    work = tempfile.mkdtemp(prefix="bluetape-bench.")
    try:
        state = os.path.join(work, "state")
        breach_state = os.path.join(work, "state-breaches")
        load = Workload(work)
        fs = fs_type(work)
        started = time.perf_counter()
        runs, breach_runs = {}, {}
        fresh_wanted = FULL or bool(ONLY & {"bundles", "floor", "syscalls", "otel"})
        breach_wanted = FULL or bool(ONLY & {"breaches", "floor", "syscalls"})
        for size in SIZES if fresh_wanted else []:
            print(f"growing a run to {size:,} events...", flush=True)
            runs[size] = load.create(state, size)
        grown = time.perf_counter() - started
        reference = None
        for size in SIZES if breach_wanted else []:
            print(f"growing a breach-heavy run to {size:,} events...", flush=True)
            breach_runs[size] = load.create(breach_state, size, reuse=True)
            if size == min(SIZES) and REFERENCE:
                print(f"checking it with {' '.join(REFERENCE)}...", flush=True)
                reference = (size, check_reference(breach_state, breach_runs[size]))
        other_state = os.path.join(work, "other")
        if OTHER and FULL:
            shutil.copytree(state, other_state, symlinks=True)
        floor = Floor(work) if want("floor") else None
        ours = {}
        for size in runs:
            print(f"measuring ours at {size:,} events...", flush=True)
            if floor:
                floor.sample(SAMPLES)
            if FULL:
                ours[size] = measure(load, OURS, state, runs[size], SAMPLES, QUERY_SAMPLES)
            else:
                ours[size] = basic_row(state, runs[size])
                if "floor" in ONLY:
                    ours[size].update(heartbeats_only(load, state, runs[size], SAMPLES))
        breach = {}
        for size in breach_runs:
            print(f"measuring the breach-heavy run at {size:,} events...", flush=True)
            breach[size] = warm_breaches(load, breach_state, breach_runs[size])
            if want("breaches") or want("floor"):
                if floor:
                    floor.sample(SAMPLES)
                measure_breaches(load, breach_state, breach_runs[size], breach[size],
                                 SAMPLES, QUERY_SAMPLES)
        counts = None
        if want("syscalls") and not STRACE_OFF:
            counts = {}
            for n, size in enumerate(sorted({min(SIZES), max(SIZES)})):
                print(f"counting system calls at {size:,} events...", flush=True)
                counts[("fresh evidence", size)] = {
                    "events": ours[size]["events"],
                    **measure_syscall_counts(load, state, runs[size], True, 50000 + 10 * n)}
                counts[("breach-heavy", size)] = {
                    "events": breach[size]["events"],
                    **measure_syscall_counts(load, breach_state, breach_runs[size], False,
                                             50000 + 10 * n)}
        if want("bundles"):
            for size in runs:
                print(f"measuring bundles at {size:,} events...", flush=True)
                bundles(load, state, runs[size], ours[size], QUERY_SAMPLES, work)
            print(f"measuring publish, {PUBLISH_SAMPLES} rounds...", flush=True)
            publish_rounds(load, state, runs, ours, PUBLISH_SAMPLES)
        if want("otel"):
            for size in runs:
                print(f"measuring otel-export at {size:,} events...", flush=True)
                ours[size].update(measure_otel(state, runs[size], work,
                                               QUERY_SAMPLES if size < 100000 else 1))
        if not FULL:
            report = [f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
                      f"(BENCH_ONLY={' '.join(sorted(ONLY))}; load average "
                      f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end).", ""]
            if "bundles" in ONLY:
                report += bundles_table(ours) + [""]
                if len(SIZES) > 1:
                    for text, ok in bundles_targets(ours):
                        report.append(f"- {'met' if ok else 'NOT met'}: {text}")
                    report.append("")
            if "breaches" in ONLY:
                report += breaches_table(breach, reference) + [""]
            if "floor" in ONLY:
                report += floor_table(floor, ours, breach, fs) + [""]
            if "syscalls" in ONLY:
                report += syscall_counts_table(counts) + [""]
            if "otel" in ONLY:
                report += otel_table(ours) + [""]
            shown = {k: v for k, v in ours.items()} if ONLY & {"floor", "otel", "bundles"} \
                else {}
            checks = floor_targets(shown, breach if ONLY & {"breaches", "floor"} else {},
                                   floor, counts, None)
            if checks:
                report += targets_lines("Targets (mutations at the floor), from this run",
                                        checks)
            print("\n" + "\n".join(report))
            return
        views = {}
        for size in SIZES:
            print(f"measuring the views at {size:,} events...", flush=True)
            views[size] = measure_views(state, runs[size], work, QUERY_SAMPLES)
        other = {}
        for size in SIZES if OTHER else []:
            print(f"measuring {OTHER[-1]} at {size:,} events...", flush=True)
            samples = (SAMPLES if size < 10000 else
                       min(SAMPLES, OTHER_SAMPLES) if size < 100000 else 1)
            other[size] = measure(load, OTHER, other_state, runs[size], samples,
                                  QUERY_SAMPLES if size < 100000 else 1,
                                  timeout=OTHER_TIMEOUT,
                                  scratch=os.path.join(work, "other-scratch"))
            # We accept what the other implementation extended.
            run(OURS, os.path.join(work, "other-scratch"), ["verify", "--run-id", runs[size]])
        report = [
            "# Performance",
            "",
            "Written by `scripts/bench.sh`; reproduce with `scripts/bench.sh` (ours only) or",
            "`BENCH_OTHER=\"python3 path/to/bluetape-flow.py\" scripts/bench.sh` (both, same run).",
            "",
            f"- Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.system()} "
            f"{platform.release()}, {os.cpu_count()} CPUs, state roots on {fs}; runs grown in "
            f"{grown:.0f} s; load average "
            f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end.",
            "- Workload: one run per size, grown by heartbeats with fresh evidence each time "
            "(one lane, one registered component); then at each size "
            f"{SAMPLES} heartbeats and {SAMPLES} check-results "
            f"(other implementation: {OTHER_SAMPLES} each from 10,000 events, one from "
            f"100,000, each command stopped after {OTHER_TIMEOUT:.0f} s), and "
            f"{QUERY_SAMPLES} calls of each query. Times are wall-clock per process, start "
            "included; `> N s` means the command had not finished after N seconds.",
            "- Breach-heavy series: one more run per size whose every heartbeat after the "
            f"first repeats its evidence (a `{REUSED}` breach each), measured the same way; "
            "the floor (`bluetape-flow --version` plus one fsynced 1.5 KB append) sampled "
            "beside every size's heartbeats; see the sections \"mutations at the floor\".",
            "",
        ]
        report += table(ours, "bluetape-flow (this project)") + [""]
        report += transparency_table(ours) + [""]
        report += COSTS + [""]
        report += syscalls_table(ours, "bluetape-flow") + [""]
        if OTHER:
            report += syscalls_table(other, f"`{' '.join(OTHER)}`") + [""]
        if len(SIZES) > 1:
            report += ["### Targets (held descriptors)", ""]
            for text, ok in syscalls_targets(ours):
                report.append(f"- {'met' if ok else 'NOT met'}: {text}")
            report.append("")
        report += bundles_table(ours) + [""]
        report += BUNDLE_COSTS + [""]
        if len(SIZES) > 1:
            report += ["### Targets (bundles, contracts/bundle.md)", ""]
            for text, ok in bundles_targets(ours):
                report.append(f"- {'met' if ok else 'NOT met'}: {text}")
            report.append("")
        if OTHER:
            report += table(other, f"`{' '.join(OTHER)}`", OTHER_TIMEOUT) + [""]
            report += ["### Ratios (other / ours, same session)", "",
                       "| events | heartbeat | check-result | verify | resume-check "
                       "| completion-check | liveness-check |",
                       "|---:|---:|---:|---:|---:|---:|---:|"]
            for size in SIZES:
                o, t = ours[size], other[size]
                first = lambda v: None if v is None else v[0]
                cells = [ratio(first(t["heartbeat"]), o["heartbeat"][0], OTHER_TIMEOUT),
                         ratio(first(t["check-result"]), o["check-result"][0], OTHER_TIMEOUT)]
                cells += [ratio(t[q], o[q], OTHER_TIMEOUT)
                          for q in ("verify", "resume-check", "completion-check",
                                    "liveness-check")]
                report.append(f"| {o['events']:,} | " + " | ".join(cells) + " |")
            report.append("")
        report += views_table(views, ours) + [""]
        if len(SIZES) > 1:
            report += ["### Targets (views, views.md)", ""]
            for text, ok in views_targets(views, ours):
                report.append(f"- {'met' if ok else 'NOT met'}: {text}")
            report.append("")
        if len(SIZES) > 1:
            report += ["### Targets (mutations, verify and signed heads)", ""]
            for text, ok in targets(ours):
                report.append(f"- {'met' if ok else 'NOT met'}: {text}")
            report.append("")
        report += breaches_table(breach, reference) + [""]
        report += floor_table(floor, ours, breach, fs) + [""]
        report += syscall_counts_table(counts) + [""]
        report += otel_table(ours) + [""]
        report += targets_lines("Targets (mutations at the floor), from this run",
                                floor_targets(ours, breach, floor, counts, views))
        text = "\n".join(report)
        print("\n" + text)
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        # The generated part is everything before the first "## " section;
        # the sections after it (each feature's figures and costs) are kept.
        kept = ""
        if os.path.exists(OUT):
            with open(OUT) as f:
                old = f.read()
            at = old.find("\n## ")
            if at >= 0:
                kept = old[at:]
        with open(OUT, "w") as f:
            f.write(text.rstrip("\n") + "\n" + kept)
        print(f"\nwritten to {os.path.relpath(OUT, ROOT)}")
    finally:
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
