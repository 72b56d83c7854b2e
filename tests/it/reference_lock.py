#!/usr/bin/env python3
"""The Python reference's directory-lock steps, as a test's other writer.

CI has no copy of the reference, so tests/it/namespaces.rs plays it with
this script, written from reading the reference's `state_lock` (its
bluetape_runtime.py): the same files, the same order, the same liveness
test (`kill(pid, 0)` on the record's `pid`, nothing else).

usage: reference_lock.py LOCK_DIR RECEIPT LINE_FILE [--ignore-lock]

Takes the lock as the reference would (a fresh lock, or the reclaim of one
whose holder's pid looks dead), appends LINE_FILE's bytes to RECEIPT,
releases the lock, prints "appended". A lock the reference would not take
prints "busy: <why>" and exits 5, writing nothing. --ignore-lock appends
without the lock (a writer that does not honour it at all).
"""
import errno
import json
import os
import shutil
import sys
import time
import uuid


def probe(pid):
    try:
        os.kill(pid, 0)
        return "alive"
    except OSError as error:
        return "dead" if error.errno == errno.ESRCH else "unknown"


def busy(why):
    print("busy: " + why)
    sys.exit(5)


def write_exclusive(path, value):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (json.dumps(value, sort_keys=True, separators=(",", ":")) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def record(token, key):
    return {"pid": os.getpid(), "session_id": os.getsid(0), key: token,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def take(lock):
    owner_path = os.path.join(lock, "owner.json")
    name = os.path.basename(lock)
    initializer = os.path.join(os.path.dirname(lock), "." + name + ".initializing.json")
    token = uuid.uuid4().hex
    if not os.path.exists(lock):
        write_exclusive(initializer, record(token, "token"))
        os.mkdir(lock, 0o700)
        os.rename(initializer, owner_path)
        return token
    # The reclaim: a holder is dead only when kill(pid, 0) says ESRCH.
    try:
        with open(owner_path, encoding="utf-8") as f:
            existing = json.load(f)
    except (OSError, ValueError):
        busy("state lock owner is not readable yet")
    pid = existing.get("pid") if isinstance(existing, dict) else None
    if not isinstance(pid, int) or isinstance(pid, bool) or probe(pid) != "dead":
        busy("state lock owner is live or unknown")
    claim = os.path.join(lock, ".reclaim.json")
    try:
        write_exclusive(claim, record(token, "nonce"))
    except FileExistsError:
        busy("state lock recovery is already claimed")
    with open(owner_path, encoding="utf-8") as f:
        if json.load(f) != existing:
            os.unlink(claim)
            busy("state lock owner changed during recovery")
    write_exclusive(initializer, record(token, "token"))
    retired = lock + ".retired." + uuid.uuid4().hex
    os.rename(lock, retired)
    os.mkdir(lock, 0o700)
    os.rename(initializer, owner_path)
    shutil.rmtree(retired)
    return token


def main():
    lock, receipt, line_file = sys.argv[1:4]
    ignore = "--ignore-lock" in sys.argv[4:]
    token = None if ignore else take(lock)
    with open(line_file, "rb") as f:
        line = f.read()
    with open(receipt, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
    if token is not None:
        with open(os.path.join(lock, "owner.json"), encoding="utf-8") as f:
            if json.load(f).get("token") == token:
                shutil.rmtree(lock)
    print("appended")


main()
