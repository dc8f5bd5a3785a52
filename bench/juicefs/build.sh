#!/usr/bin/env bash
# bench/juicefs/build.sh: print the path of the reference JuiceFS binary the
# side-by-side benchmarks (vs.sh) measure Sluice against, building it once.
#
#   JUICEFS=PATH       use this binary as it is (nothing is built)
#   JUICEFS_VERSION    the version to build (default v1.4.1)
#   cache              ${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench/juicefs-VERSION;
#                      a binary there is reused, and so is one left by
#                      scripts/build-juicefs.sh in ~/.cache/sluice-peer
#
# The source comes from the Go module proxy and is built outside this
# repository, so our go.mod and go.sum never change: JuiceFS is a measuring
# peer, never linked into Sluice. `go install github.com/juicedata/juicefs@V`
# does not work for it: its go.mod has replace directives, which go install
# refuses for a module named with @version. So the module is downloaded with
# `go mod download` and built in place with `go build` (about 8 minutes on
# 2 cores the first time).
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0; fi
version=${JUICEFS_VERSION:-v1.4.1}

if [[ -n ${JUICEFS:-} ]]; then
  [[ -x $JUICEFS ]] || { echo "build.sh: JUICEFS=$JUICEFS is not an executable" >&2; exit 1; }
  echo "$JUICEFS"
  exit 0
fi

cache=${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench
bin=$cache/juicefs-$version
legacy=${PEER_BIN:-$HOME/.cache/sluice-peer}/juicefs-$version
if [[ ! -x $bin && -x $legacy ]]; then
  bin=$legacy
fi
if [[ ! -x $bin ]]; then
  mkdir -p "$cache"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # Run from an empty directory: no go.mod around, none touched.
  cd "$scratch"
  export GOFLAGS=-mod=mod
  dir=$(go mod download -json "github.com/juicedata/juicefs@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [[ -z $dir || ! -d $dir ]]; then
    echo "build.sh: go mod download github.com/juicedata/juicefs@$version gave no source directory" >&2
    exit 1
  fi
  echo "build.sh: building JuiceFS $version from the module cache (once)..." >&2
  (cd "$dir" && go build -o "$scratch/juicefs" .) >&2
  mv "$scratch/juicefs" "$bin"
fi
"$bin" version >/dev/null
echo "$bin"
