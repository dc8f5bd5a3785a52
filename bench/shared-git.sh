#!/usr/bin/env bash
# shared-git.sh: one git repository on a volume mounted twice; N commits
# (40) alternate between the two mounts, one after the other, as a user
# who works on the same checkout from two hosts. Prints how many commits
# the log holds (N+1 when nothing was lost), the lines of the file every
# commit appends to (N+1), and what `git fsck` says. Run
# as root from the project's root. FS, SLUICE, JUICEFS, OPTS and
# FORMAT_OPTS as in shared-volume.sh (SQLite engine unless ENGINE=redis).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-40} MOUNTS=2
D=$(mktemp -d /tmp/shared-git.XXXXXX); chmod 755 "$D"
. "$HERE/shared-volume.sh"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
git init -q "$D/m1/repo"
echo 0 >"$D/m1/repo/f"; git -C "$D/m1/repo" add f; git -C "$D/m1/repo" commit -qm c0
start=$(date +%s.%N); fails=0
for i in $(seq 1 "$N"); do
  r=$D/m$(( i % 2 + 1 ))/repo
  { echo "$i" >>"$r/f" && git -C "$r" commit -qam "c$i"; } >>"$D/git.log" 2>&1 || fails=$((fails + 1))
done
end=$(date +%s.%N)
count=$(git -C "$D/m1/repo" rev-list --count HEAD)
fsck=$(git -C "$D/m1/repo" fsck --no-dangling 2>&1 | head -3 | tr '\n' ' ')
dangling=$(git -C "$D/m1/repo" fsck 2>&1 | grep -c dangling || true)
lines=$(wc -l <"$D/m2/repo/f")
echo "RESULT commits=$count of=$((N + 1)) lines=$lines failed=$fails dangling=$dangling fsck=\"${fsck:-clean}\" s=$(echo "$end - $start" | bc)"
