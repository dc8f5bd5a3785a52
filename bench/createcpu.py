#!/usr/bin/env python3
"""Create N empty files with open().close() and print the rate and the CPU
time the whole machine spent per create (all processes, user and kernel,
from /proc/stat), then unlink them. On a machine doing nothing else, the
CPU per create is the cost of the application, the kernel's FUSE
transport, the mount and the metadata engine together, and it is less
noisy than the rate.

    bench/createcpu.py DIR [N]
"""
import os
import sys
import time


def busy_ticks():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f) - f[3] - f[4]  # all but idle and iowait


def main():
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    os.makedirs(d, exist_ok=True)
    c0, t0 = busy_ticks(), time.monotonic()
    for i in range(n):
        open(os.path.join(d, "c%d" % i), "w").close()
    elapsed, c1 = time.monotonic() - t0, busy_ticks()
    cpu = (c1 - c0) / os.sysconf("SC_CLK_TCK")
    print("create %.0f/s cpu %.0f us/create" % (n / elapsed, cpu / n * 1e6))
    for i in range(n):
        os.unlink(os.path.join(d, "c%d" % i))


if __name__ == "__main__":
    main()
