#!/usr/bin/env python3
"""Per-command cost against receipt length (driven by scripts/bench.sh).

Grows one heartbeat-heavy run per size (fresh evidence on every heartbeat,
like real agents) with the real pipeline, then times, at each size:
heartbeat and check-result (median and p95 of BENCH_SAMPLES calls), verify
(and its peak RSS), resume-check, completion-check and liveness-check, and
the views (status --run-id, log with its peak RSS, report with its size), and
(ours only, issue 19) sign-head and prove-event once the stored tree exists
and sign-head's first use on a run without our derived files. With
BENCH_OTHER naming a second implementation of the same CLI (for example
"python3 .../bluetape-flow.py"), the same calls run on copies of the same
runs, in the same session, and the ratios are printed. Writes a Markdown
report (BENCH_OUT, default docs/performance.md).
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
# BENCH_ONLY=bundles: grow the runs, measure only the bundle group (issue
# 20), print its section and targets, write nothing.
ONLY = os.environ.get("BENCH_ONLY", "")
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
        # The signer key of the transparency figures (issue 19).
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

    def create(self, state, size):
        """A run with one running lane and a registered component, grown to
        `size` events by heartbeats through the real pipeline."""
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
        subprocess.run([GROW, state, run_id, owner, str(size), f"{LANE}:{AGENT}"],
                       check=True, stdout=subprocess.DEVNULL)
        return run_id

    def heartbeat(self, tool, state, run_id, n, timeout=None):
        observed = f"2098-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
        lease = f"2098-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.500000Z"
        hb = self.file("hb.json", {"lane_id": LANE, "agent_id": AGENT, "observed_at": observed,
                                   "silence_lease_deadline": lease, "reason": "still working"})
        return run(tool, state, self.owned(state, run_id, "heartbeat", "--evidence",
                                           self.fresh("heartbeat"), "--input", hb),
                   timeout=timeout)[0]

    def check_result(self, tool, state, run_id, timeout=None):
        check = self.file("check.json", {"component_id": "runtime", "check_id": "unit",
                                         "passed": True})
        return run(tool, state, self.owned(state, run_id, "check-result", "--input", check,
                                           "--evidence", self.fresh("unit tests")),
                   timeout=timeout)[0]


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
    return row


STRACE = shutil.which("strace")
# The system calls that reach a file or directory by name or descriptor:
# what the held descriptors of issue 14 change.
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
    out = [f"### System calls per command: {title} (issue 14: held descriptors)", "",
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
    """Issue 14's held descriptors cost a constant number of opens."""
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
    """The views of issue 18 at one size (ours only): `status --run-id`
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


def views_table(rows, ours):
    lines = ["### Views (issue 18)", "",
             "| events | status --run-id | log (all events, jsonl) | log peak RSS "
             "| report | report size |",
             "|---:|---:|---:|---:|---:|---:|"]
    for size, v in rows.items():
        lines.append(f"| {ours[size]['events']:,} | {ms(v['status'])} | {ms(v['log'])} "
                     f"| {rss_text(v['log_rss'])} | {ms(v['report'])} "
                     f"| {v['report_bytes'] / 1e3:,.0f} kB |")
    return lines


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
    """Issue 19: sign-head and prove-event once the stored hashes exist (a
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
    """Issue 20: bundle-export, bundle-verify (time, MB/s of receipt, peak
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
    lines = ["### Audit bundles and publications (issue 20)", "",
             "| events | bundle-export | bundle-verify | receipt MB/s | bundle-verify peak RSS "
             f"| first publish | publish of one new event (median of {PUBLISH_SAMPLES}, range) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows.values():
        if "bundle-verify" in r:
            lines.append(f"| {r['events']:,} | {ms(r['bundle-export'])} | {ms(r['bundle-verify'])} "
                         f"| {r['bundle-mbps']:.0f} | {rss_text(r['bundle-verify-rss'])} "
                         f"| {ms(r['publish-first'])} | {ms(r['publish'])} "
                         f"({ms(r['publish-range'][0])} to {ms(r['publish-range'][1])}) |")
    return lines


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
    "### Cost of the bundle commands (issue 20)",
    "",
    "n is the number of receipt lines, k the number of stored heads, r the bound reports.",
    "",
    "- `bundle-export`: a full verification and replay (O(n), streaming), a pass over the heads' "
    "sizes when there are heads, one pass to cut and hash the receipt into segments of 256 "
    "events and one to copy them into the tar (each segment's SHA-256 checked again while "
    "copied); memory O(1) in n besides the index (one entry per 256 events).",
    "- `bundle-verify`: one streaming pass over the tar: each byte of the receipt is hashed "
    "twice (segment SHA-256, Merkle leaf, on the thread that reads the tar) and parsed once; "
    "long receipts are parsed and checked on two worker threads and replayed in order on the "
    "main one, each parsed event lent to the replay and freed by the worker that parsed it "
    "(one event freed before each one parsed); a heartbeat's evidence digest is computed once "
    "per event, not three times; memory: the index, "
    "the heads and reports (each at most 64 KiB / 1 MiB) and the replayed state (its liveness "
    "digests moved every 256 events into a set of 16 bytes each), a few batches of 32 KiB of "
    "lines in flight, never the receipt. With `--git`: the newest commit the same way through `git cat-file --batch`, "
    "and for each older commit its index and tree (O(n/256) entries) and at most two "
    "segments compared.",
    "- `publish`: from the proven checkpoint O(log n) to check that the receipt extends the "
    "published one (a binary search for the published last event), O(n/256) to list the "
    "published tree and to write the new one (`git hash-object -t tree`, which checks the tree "
    "but, unlike `git mktree`, opens none of its entries' objects), and only the last "
    "segment(s), the index and new heads hashed and written (`git hash-object -w` writes "
    "nothing that exists); about ten git processes in all. Without a proven checkpoint a full "
    "verification and replay first.",
    "- `attest`: a full verification and replay (O(n), streaming), the tree root (O(log n) "
    "from `tree-hashes`), one SHA-256 pass over the receipt, one Ed25519 signature.",
]


def transparency_table(rows):
    lines = ["### Signed heads and proofs (issue 19)", "",
             "| events | sign-head | prove-event | first sign-head on a run without our files |",
             "|---:|---:|---:|---:|"]
    for r in rows.values():
        if "sign-head" in r:
            lines.append(f"| {r['events']:,} | {ms(r['sign-head'])} | {ms(r['prove-event'])} "
                         f"| {ms(r['first-sign-head'])} |")
    return lines


# What each command of issue 19 costs (contracts/transparency.md), stated
# here so every regenerated report keeps it beside the figures.
COSTS = [
    "### Cost of the transparency commands (issue 19)",
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
    "- `sign-head`: from the proven checkpoint, O(k log n) reads (each stored head's root) plus "
    "O(log n) for the new root, and one small file; without a proven checkpoint (another "
    "writer, an edit) a full `verify` (O(n), streaming) and, when the tree does not match, "
    "its rebuild (the \"first sign-head\" column).",
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


def main():
    work = tempfile.mkdtemp(prefix="bluetape-bench.")
    try:
        state = os.path.join(work, "state")
        load = Workload(work)
        started = time.perf_counter()
        runs = {}
        for size in SIZES:
            print(f"growing a run to {size:,} events...", flush=True)
            runs[size] = load.create(state, size)
        grown = time.perf_counter() - started
        other_state = os.path.join(work, "other")
        if OTHER:
            shutil.copytree(state, other_state, symlinks=True)
        ours = {}
        for size in SIZES:
            print(f"measuring ours at {size:,} events...", flush=True)
            if ONLY == "bundles":
                receipt = os.path.join(state, "runs", runs[size], "receipt.jsonl")
                ours[size] = {"bytes": os.path.getsize(receipt),
                              "events": run(OURS, state, ["verify", "--run-id",
                                                          runs[size]])[1]["sequence"]}
            else:
                ours[size] = measure(load, OURS, state, runs[size], SAMPLES, QUERY_SAMPLES)
        for size in SIZES:
            print(f"measuring bundles at {size:,} events...", flush=True)
            bundles(load, state, runs[size], ours[size], QUERY_SAMPLES, work)
        print(f"measuring publish, {PUBLISH_SAMPLES} rounds...", flush=True)
        publish_rounds(load, state, runs, ours, PUBLISH_SAMPLES)
        if ONLY == "bundles":
            report = [f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
                      f"(BENCH_ONLY=bundles; load average "
                      f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end).", ""]
            report += bundles_table(ours) + [""]
            if len(SIZES) > 1:
                for text, ok in bundles_targets(ours):
                    report.append(f"- {'met' if ok else 'NOT met'}: {text}")
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
            f"{platform.release()}, {os.cpu_count()} CPUs; runs grown in {grown:.0f} s.",
            "- Workload: one run per size, grown by heartbeats with fresh evidence each time "
            "(one lane, one registered component); then at each size "
            f"{SAMPLES} heartbeats and {SAMPLES} check-results "
            f"(other implementation: {OTHER_SAMPLES} each from 10,000 events, one from "
            f"100,000, each command stopped after {OTHER_TIMEOUT:.0f} s), and "
            f"{QUERY_SAMPLES} calls of each query. Times are wall-clock per process, start "
            "included; `> N s` means the command had not finished after N seconds.",
            "",
        ]
        report += table(ours, "bluetape-flow (this project)") + [""]
        report += transparency_table(ours) + [""]
        report += COSTS + [""]
        report += syscalls_table(ours, "bluetape-flow") + [""]
        if OTHER:
            report += syscalls_table(other, f"`{' '.join(OTHER)}`") + [""]
        if len(SIZES) > 1:
            report += ["### Targets (issue 14, held descriptors)", ""]
            for text, ok in syscalls_targets(ours):
                report.append(f"- {'met' if ok else 'NOT met'}: {text}")
            report.append("")
        report += bundles_table(ours) + [""]
        report += BUNDLE_COSTS + [""]
        if len(SIZES) > 1:
            report += ["### Targets (issue 20, bundles)", ""]
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
            report += ["### Targets (issue 18, views)", ""]
            for text, ok in views_targets(views, ours):
                report.append(f"- {'met' if ok else 'NOT met'}: {text}")
            report.append("")
        if len(SIZES) > 1:
            report += ["### Targets (issues 7 and 19)", ""]
            for text, ok in targets(ours):
                report.append(f"- {'met' if ok else 'NOT met'}: {text}")
            report.append("")
        text = "\n".join(report)
        print("\n" + text)
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        # The generated part is everything before the first "## " section;
        # the sections after it (each issue's figures and costs) are kept.
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


if __name__ == "__main__":
    main()
