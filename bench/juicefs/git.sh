#!/usr/bin/env bash
# bench/juicefs/git.sh DIR SRC: a developer's day on any mounted file system.
#
# SRC is a C source tree with its .git and a top-level Makefile (vs.sh makes
# one with bench/ctree.sh when none is given). In DIR/git.PID:
#   cp -a       cp -a SRC into the mount
#   git status  a warm `git status --porcelain` (after one that refreshes the
#               index), median of STATUS_RUNS runs (default 5)
#   make        make -j$MAKE_JOBS (default 2) $MAKE_ARGS (skipped with NO_MAKE=1)
#   rm -rf      rm -rf of the tree
# One line per step for vs.sh (times: lower is better; _ stands for a space):
#   FIGURE <step> <time> s|ms lower
set -euo pipefail
dir=${1:?usage: git.sh DIR SRC}
src=${2:?usage: git.sh DIR SRC}
[[ -d $src/.git && -f $src/Makefile ]] || { echo "git.sh: $src needs a .git and a Makefile" >&2; exit 2; }
work=$dir/git.$$
tree=$work/src
mkdir -p "$work"
trap 'cd /; rm -rf "$work"' EXIT

# since T0: seconds elapsed since the EPOCHREALTIME T0.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.6f", b - a }'; }

t=$EPOCHREALTIME; cp -a "$src" "$tree"
echo "FIGURE cp_-a $(since "$t") s lower"

cd "$tree"
# The copy may belong to another user: trust it without touching ~/.gitconfig.
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0="$tree"
git status >/dev/null
runs=()
for _ in $(seq "${STATUS_RUNS:-5}"); do
  t=$EPOCHREALTIME; git status --porcelain >/dev/null
  runs+=("$(since "$t")")
done
printf '%s\n' "${runs[@]}" | sort -n |
  awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "FIGURE git_status %.1f ms lower\n", m * 1000 }'

if [[ ${NO_MAKE:-0} != 1 ]]; then
  t=$EPOCHREALTIME
  # shellcheck disable=SC2086 # MAKE_ARGS is a list of words
  if ! make -j"${MAKE_JOBS:-2}" ${MAKE_ARGS:-} >"$work/make.log" 2>&1; then
    tail -20 "$work/make.log" >&2
    echo "git.sh: make failed" >&2
    exit 1
  fi
  echo "FIGURE make $(since "$t") s lower"
fi

cd /
t=$EPOCHREALTIME; rm -rf "$tree"
echo "FIGURE rm_-rf $(since "$t") s lower"
