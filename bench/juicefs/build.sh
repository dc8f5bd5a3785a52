#!/usr/bin/env bash
# bench/juicefs/build.sh: print the path of the reference JuiceFS binary the
# side-by-side benchmarks (vs.sh) measure Sluice against, building it once.
#
#   JUICEFS=PATH       use this binary as it is (nothing is built)
#   JUICEFS_VERSION    the version to build (default v1.4.1)
#
# The build is scripts/build-juicefs.sh's, which the end-to-end tests use
# too, with its cache (~/.cache/sluice-peer): the source comes from the Go
# module proxy and is built outside this repository, so our go.mod and
# go.sum never change; JuiceFS is a measuring peer, never linked into
# Sluice. (`go install github.com/juicedata/juicefs@V` does not work for it:
# its go.mod has replace directives, which go install refuses for a module
# named with @version.) The first build takes about 8 minutes on 2 cores.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0; fi

if [[ -n ${JUICEFS:-} ]]; then
  [[ -x $JUICEFS ]] || { echo "build.sh: JUICEFS=$JUICEFS is not an executable" >&2; exit 1; }
  echo "$JUICEFS"
  exit 0
fi
exec "$(dirname "$0")/../../scripts/build-juicefs.sh"
