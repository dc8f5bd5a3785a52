#!/usr/bin/env python3
"""The reference's create/stat/delete loop: create N empty files with
open().close(), stat each, unlink each, and print the rate of each phase.

    bench/createstat.py DIR [N] [PAUSE]

PAUSE (seconds, default 0) waits between the create and stat phases; 1.5
lets the kernel's 1 s entry and attribute caches expire, so that every
stat reaches the file system.
"""
import os
import sys
import time


def main():
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0
    os.makedirs(d, exist_ok=True)
    names = [os.path.join(d, "f%d" % i) for i in range(n)]
    t = time.perf_counter()
    for p in names:
        open(p, "w").close()
    create = n / (time.perf_counter() - t)
    time.sleep(pause)
    t = time.perf_counter()
    for p in names:
        os.stat(p)
    stat = n / (time.perf_counter() - t)
    t = time.perf_counter()
    for p in names:
        os.unlink(p)
    unlink = n / (time.perf_counter() - t)
    print("create %.0f/s stat %.0f/s unlink %.0f/s" % (create, stat, unlink))


if __name__ == "__main__":
    main()
