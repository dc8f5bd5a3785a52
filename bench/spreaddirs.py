#!/usr/bin/env python3
"""spreaddirs.py DIR [ROUNDS]: what marking a block tree's directories as tops of
hierarchies (chattr +T, FS_TOPDIR_FL; internal/localdir) does to file creates after
deletions, on the file system that holds DIR.

Each round makes two trees in a fresh directory under DIR, one plain and one whose
directories are marked (the order alternates), and in each, as a volume's bucket does:
fills four directories with 5,000 files of 10,000 bytes and deletes them, then creates
four new directories and times 1,000 creates (open O_CREAT + write 10,000 bytes + close)
in each. Prints the median µs per file for each new directory, and at the end the
median over all of them per kind. Everything it made is removed.

On ext4 without a journal, a new directory of the plain tree often lands among the
inodes just freed, which ext4 will not reuse for a minute or more and walks past on
every create; the marked tree's new directories are spread over the groups with more
free inodes than average. Run as root (chattr); needs e2fsprogs.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DATA = os.urandom(10000)


def fill(d, n, keep):
    os.makedirs(d, exist_ok=True)
    out = []
    for i in range(n):
        t = time.perf_counter_ns()
        fd = os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, DATA)
        os.close(fd)
        out.append(time.perf_counter_ns() - t)
    if not keep:
        for i in range(n):
            os.unlink(os.path.join(d, "f%d" % i))
    return statistics.median(out) / 1000


def tree(root, marked):
    os.makedirs(root)
    if marked:
        subprocess.run(["chattr", "+T", root], check=True)
    for k in range(4):
        fill(os.path.join(root, "old%d" % k), 5000, keep=False)
    return [fill(os.path.join(root, "new%d" % k), 1000, keep=True) for k in range(4)]


def main():
    base, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    res = {"plain": [], "marked": []}
    for r in range(rounds):
        work = tempfile.mkdtemp(dir=base, prefix="spreaddirs.")
        try:
            kinds = ["plain", "marked"] if r % 2 == 0 else ["marked", "plain"]
            for kind in kinds:
                us = tree(os.path.join(work, kind), kind == "marked")
                res[kind] += us
                print("round %d %-6s new directories: %s µs" % (r + 1, kind, " ".join("%.0f" % u for u in us)))
        finally:
            shutil.rmtree(work)
    for kind, us in res.items():
        print("RESULT %s median_us=%.0f worst_us=%.0f" % (kind, statistics.median(us), max(us)))


if __name__ == "__main__":
    main()
