#!/usr/bin/env bash
# Usage: scripts/build-juicefs.sh
#
# Prints the path of a JuiceFS binary (v1.4.1, or $JUICEFS_VERSION), building
# it from the Go module proxy the first time (about 8 minutes on 2 cores) and
# caching it in $PEER_BIN (default ~/.cache/sluice-peer, where the e2e tests
# look for it; they also take its path from $SLUICE_JUICEFS).
#
# JuiceFS is a test peer only: internal/e2e/juicefs_test.go migrates volumes
# between it and Sluice through metadata dumps. It is never a dependency of
# Sluice and none of its code goes into ours.
set -euo pipefail
PEER_BIN=${PEER_BIN:-$HOME/.cache/sluice-peer}
V=${JUICEFS_VERSION:-v1.4.1}
out=$PEER_BIN/juicefs-$V
if [[ ! -x $out ]]; then
  mkdir -p "$PEER_BIN"
  # Outside any module, so that neither our go.mod nor go.sum is touched.
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cd "$work"
  export GOFLAGS=-mod=mod
  src=$(go mod download -json "github.com/juicedata/juicefs@$V" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [[ -z $src || ! -d $src ]]; then
    echo "build-juicefs: go mod download github.com/juicedata/juicefs@$V gave no source directory" >&2
    exit 1
  fi
  echo "build-juicefs: building JuiceFS $V from $src (once; about 8 minutes)..." >&2
  (cd "$src" && go build -o "$out.tmp" .) >&2
  mv "$out.tmp" "$out"
fi
"$out" version >/dev/null
echo "$out"
