#!/usr/bin/env python3
"""Where a workload's time goes through FUSE: latency of each request kind,
and the time the application spends between requests.

    bench/fuseops.py [--mount DIR] -- COMMAND [ARG...]

Runs COMMAND while `perf` records the kernel's fuse_request_send and
fuse_request_end tracepoints on every CPU, then prints, per opcode, how
many requests were sent, the median and 90th percentile of the time from
send to end (the file system's answer, wake-ups included), and the median
gap between the end of the previous request and the send of this one (the
application's own time plus its wake-up). With --mount, only requests of
that mount's FUSE connection count.

Needs root, perf, and a kernel with the fuse tracepoints (6.15 or later):

    bench/fuseops.py --mount /mnt/vol -- python3 bench/createstat.py /mnt/vol/d 10000

Recording costs a few microseconds per event, so absolute figures come out
higher than without it; compare opcodes within one run.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

EVENT = re.compile(
    r"(\d+\.\d+):\s+fuse:fuse_request_(send|end): connection (\d+) req (\d+)"
    r"(?: opcode \d+ \((\w+)\))?"
)


def fail(msg):
    sys.exit("fuseops: " + msg)


def connection(mount):
    """The FUSE connection number of a mount: its device's minor number."""
    try:
        return os.minor(os.stat(mount).st_dev)
    except OSError as e:
        fail("cannot stat %s: %s" % (mount, e.strerror))


def record(cmd, out):
    events = "fuse:fuse_request_send,fuse:fuse_request_end"
    probe = subprocess.run(["perf", "list", "fuse:*"], capture_output=True, text=True)
    if "fuse_request_send" not in probe.stdout:
        fail("this kernel has no fuse:fuse_request_send tracepoint (needs Linux 6.15+)")
    rec = subprocess.run(["perf", "record", "-q", "-a", "-e", events, "-o", out, "--"] + cmd)
    if rec.returncode != 0:
        fail("perf record or the command failed (exit %d)" % rec.returncode)
    script = subprocess.run(["perf", "script", "-i", out], capture_output=True, text=True)
    if script.returncode != 0:
        fail("perf script: " + script.stderr.strip())
    return script.stdout.splitlines()


def summarize(lines, conn):
    sent, op = {}, {}
    dur, gap = {}, {}
    last_end = None
    for line in lines:
        m = EVENT.search(line)
        if not m or (conn is not None and int(m.group(3)) != conn):
            continue
        t, kind, req = float(m.group(1)), m.group(2), (m.group(3), m.group(4))
        if kind == "send":
            sent[req], op[req] = t, m.group(5)
            if last_end is not None:
                gap.setdefault(op[req], []).append(t - last_end)
        elif req in sent:
            dur.setdefault(op[req], []).append(t - sent.pop(req))
            last_end = t
    return dur, gap


def quantile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mount", help="count only the requests of this mount")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        p.error("no command given (put it after --)")
    conn = connection(a.mount) if a.mount else None
    with tempfile.TemporaryDirectory() as tmp:
        lines = record(cmd, os.path.join(tmp, "perf.data"))
    dur, gap = summarize(lines, conn)
    if not dur:
        fail("no FUSE request was recorded" + (" on %s" % a.mount if a.mount else ""))
    us = lambda x: "%.1f" % (x * 1e6)
    print("%-22s %9s %11s %11s %15s" % ("opcode", "requests", "median µs", "p90 µs", "gap before µs"))
    for name, v in sorted(dur.items(), key=lambda kv: -len(kv[1])):
        g = gap.get(name)
        print("%-22s %9d %11s %11s %15s" % (
            name, len(v), us(statistics.median(v)), us(quantile(v, 0.9)),
            us(statistics.median(g)) if g else "-"))


if __name__ == "__main__":
    main()
