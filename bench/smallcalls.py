#!/usr/bin/env python3
"""smallcalls.py DIR [N]: per-call cost of the calls tar makes, in µs (median of N), on DIR.

Prints RESULT lines: create_write10k_close (open O_CREAT, write 10,000 bytes, close), pwrite4k (a buffered
4 KiB pwrite into an open file), fchown, fchmod, utime.
"""
import os, statistics, sys, time

def timed(n, fn):
    out = []
    for i in range(n):
        t = time.perf_counter_ns(); fn(i); out.append(time.perf_counter_ns() - t)
    return statistics.median(out) / 1000

def main():
    d, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    w = os.path.join(d, "smallcalls.%d" % os.getpid())
    os.mkdir(w)
    data = os.urandom(10000)
    def create(i):
        fd = os.open(os.path.join(w, "f%d" % i), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, data); os.close(fd)
    res = {"create_write10k_close": timed(n, create)}
    fd = os.open(os.path.join(w, "big"), os.O_CREAT | os.O_RDWR, 0o644)
    block = os.urandom(4096)
    res["pwrite4k"] = timed(n, lambda i: os.pwrite(fd, block, (i * 4096) % (64 << 20)))
    res["fchown"] = timed(n, lambda i: os.fchown(fd, i % 2, i % 2))
    res["fchmod"] = timed(n, lambda i: os.fchmod(fd, 0o600 | (i % 2) * 0o44))
    os.close(fd)
    p = os.path.join(w, "f0")
    res["utime"] = timed(n, lambda i: os.utime(p, (i, i)))
    for k, v in res.items():
        print("RESULT %s us=%.1f" % (k, v))
    for i in range(n):
        os.unlink(os.path.join(w, "f%d" % i))
    os.unlink(os.path.join(w, "big")); os.rmdir(w)

if __name__ == "__main__":
    main()
