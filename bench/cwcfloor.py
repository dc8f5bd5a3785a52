#!/usr/bin/env python3
"""cwcfloor.py: what a create + write 10 KB + close costs at the least on this
machine, from its parts, beside what the file systems take, in one run.

    bench/cwcfloor.py --null MNT --bucket-dir DIR [--redis HOST:PORT] [NAME=MNT ...] [-n N] [--rounds R]

Each round times, in turn (median µs per file of N):
  null     the loop on MNT, a bench/nullfs mount: the FUSE transport alone
           (LOOKUP, CREATE, GETXATTR, WRITE, FLUSH, RELEASE, GETATTR of the
           directory), with no storage behind it;
  bucket   the same loop in DIR, a fresh directory on the file system that
           holds the bucket: what storing a small file's block there costs;
  rtt      a PING round trip to Redis over loopback (one per request, from
           Python: a lower bound for a commit script's round trip);
  NAME     the loop on each named mount (a Sluice mount, a JuiceFS mount).
Then per round the floor of a file system that makes two engine round trips
per file (the create's and the close's commit) and stores the block before
the close returns: null + bucket + 2 * rtt; and for each named mount its
figure against that floor.

A mount cannot be faster than the floor without dropping one of those steps;
a ratio of X against another system is reachable only if that system's time
is at least X times the floor. Run as root; the machine is noisy, so compare
within one round.
"""
import argparse
import os
import shutil
import socket
import statistics
import sys
import time

DATA = os.urandom(10000)


def loop(d, n, keep=False):
    """Median µs of open(O_CREAT|O_TRUNC), write 10,000 bytes, close, in a fresh directory under d,
    removed afterwards unless keep (removing adds deletions, which slow the next creates on ext4
    without a journal: see bench/smallfiles.sh)."""
    w = os.path.join(d, "cwcfloor.%d.%d" % (os.getpid(), time.monotonic_ns()))
    os.mkdir(w)
    out = []
    try:
        for i in range(n):
            p = os.path.join(w, "f%d" % i)
            t = time.perf_counter_ns()
            fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            os.write(fd, DATA)
            os.close(fd)
            out.append(time.perf_counter_ns() - t)
    finally:
        if not keep:
            shutil.rmtree(w, ignore_errors=True)
    return statistics.median(out) / 1000


def rtt(addr, n):
    """Median µs of a Redis PING round trip."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    try:
        for _ in range(n):
            t = time.perf_counter_ns()
            s.sendall(b"PING\r\n")
            if not s.recv(64).startswith(b"+PONG"):
                sys.exit("cwcfloor: %s did not answer PING" % addr)
            out.append(time.perf_counter_ns() - t)
    finally:
        s.close()
    return statistics.median(out) / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--null", required=True, help="a bench/nullfs mount")
    ap.add_argument("--bucket-dir", required=True, help="a directory on the bucket's file system")
    ap.add_argument("--redis", help="HOST:PORT of the engine's Redis (else no round trips count)")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("mounts", nargs="*", metavar="NAME=MNT")
    a = ap.parse_args()
    mounts = [m.split("=", 1) for m in a.mounts]
    for name, _ in mounts:
        if name in ("null", "bucket", "rtt", "floor"):
            sys.exit("cwcfloor: %s is a name of the parts" % name)
    rows = []
    for r in range(1, a.rounds + 1):
        row = {"null": loop(a.null, a.n), "bucket": loop(a.bucket_dir, a.n)}
        row["rtt"] = rtt(a.redis, a.n) if a.redis else 0.0
        for name, m in mounts:
            row[name] = loop(m, a.n)
        row["floor"] = row["null"] + row["bucket"] + 2 * row["rtt"]
        rows.append(row)
        print("round %d: " % r + " ".join("%s=%.0f" % (k, v) for k, v in row.items()), flush=True)
        for name, _ in mounts:
            print("RESULT round=%d %s us=%.0f floor_us=%.0f vs_floor=%.2f" % (r, name, row[name], row["floor"], row[name] / row["floor"]))
        for x, _ in mounts:
            for y, _ in mounts:
                if x != y:
                    print("RESULT round=%d %s/%s=%.2fx best_possible_for_%s=%.2fx" % (
                        r, y, x, row[y] / row[x], x, row[y] / row["floor"]))


if __name__ == "__main__":
    main()
