#!/usr/bin/env python3
"""meta.py DIR [--files N] [--dirs D] [--threads T] [--keep-caches]

Metadata through any mounted file system, with the Python standard library
only. In a fresh DIR/meta.PID it makes D directories (default 100) and
spreads N empty files (default 10000) over them, then times four phases:

  create   mkdir of each directory, open(O_CREAT|O_EXCL) + close of each file
  stat     os.stat of each file by its path
  readdir  os.scandir of each directory (names only)
  delete   unlink of each file, rmdir of each directory

Before each phase the kernel's dentry, inode and page caches are dropped
(as root; --keep-caches leaves them), so each phase reaches the file system.
With --threads T the directories are shared out among T threads.

Prints one line per phase for vs.sh:
  FIGURE <phase> <files per second> files/s higher
"""
import argparse
import os
import sys
import threading
import time


def drop_caches(enabled):
    if not enabled:
        return
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def in_threads(work, dirs, threads):
    """Run work(d) for every directory index, spread over threads."""
    if threads <= 1:
        for d in dirs:
            work(d)
        return
    failures = []

    def loop(share):
        try:
            for d in share:
                work(d)
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    ts = [threading.Thread(target=loop, args=(dirs[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if failures:
        raise failures[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--dirs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--keep-caches", action="store_true")
    a = ap.parse_args()

    top = os.path.join(a.dir, "meta.%d" % os.getpid())
    os.mkdir(top)
    dirs = [os.path.join(top, "d%03d" % i) for i in range(a.dirs)]
    names = [[] for _ in dirs]
    for i in range(a.files):
        names[i % a.dirs].append("f%07d" % i)
    listed = [0] * a.dirs

    def create(d):
        os.mkdir(dirs[d])
        for n in names[d]:
            os.close(os.open(os.path.join(dirs[d], n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def stat(d):
        for n in names[d]:
            os.stat(os.path.join(dirs[d], n))

    def readdir(d):
        with os.scandir(dirs[d]) as it:
            listed[d] = sum(1 for _ in it)

    def delete(d):
        for n in names[d]:
            os.unlink(os.path.join(dirs[d], n))
        os.rmdir(dirs[d])

    for phase, work in (("create", create), ("stat", stat), ("readdir", readdir), ("delete", delete)):
        drop_caches(not a.keep_caches)
        start = time.perf_counter()
        in_threads(work, list(range(a.dirs)), a.threads)
        took = time.perf_counter() - start
        if phase == "readdir" and sum(listed) != a.files:
            print("meta.py: the listings held %d names, not %d" % (sum(listed), a.files), file=sys.stderr)
            sys.exit(1)
        unit = "entries/s" if phase == "readdir" else "files/s"
        print("FIGURE %s %.0f %s higher" % (phase, a.files / took, unit), flush=True)
    os.rmdir(top)


if __name__ == "__main__":
    main()
