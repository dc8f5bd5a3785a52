#!/usr/bin/env bash
# ctree.sh DIR: assemble a C source tree with a Makefile and a git history
# in DIR, for the developer workloads (git status, make -j2) of
# docs/observability.md and issue-style git/make measurements. The sources
# come from crates.io (Lua 5.1-5.5 from lua-src, zstd's lib from zstd-sys),
# fetched with cargo into its registry cache; nothing else is downloaded.
# Prints the number of files.
set -euo pipefail
DIR=${1:?usage: ctree.sh DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cat >"$work/Cargo.toml" <<'TOML'
[package]
name = "ctree-fetch"
version = "0.1.0"
edition = "2021"
[dependencies]
zstd-sys = "=2.0.13"
lua-src = "=551.1.0"
TOML
echo 'fn main() {}' >"$work/src/main.rs"
(cd "$work" && cargo fetch -q)
reg=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ | head -1)
mkdir -p "$DIR"
for v in 5.1.5 5.2.4 5.3.6 5.4.9 5.5.1; do
  mkdir -p "$DIR/lua-$v"
  cp -a "$reg/lua-src-551.1.0/lua-$v/." "$DIR/lua-$v/"
done
cp -a "$reg/zstd-sys-2.0.13+zstd.1.5.6/zstd/lib" "$DIR/zstd"
cat >"$DIR/Makefile" <<'MAKE'
# Compiles every C file of the tree into an object beside it (no link):
# the shape of a build's work on a file system, many small reads and
# writes, stat calls on headers, and a few thousand short processes.
CC ?= cc
CFLAGS ?= -O1 -w
SRCS := $(shell find . -name '*.c' -not -path './.git/*' -not -name 'lua.c' -not -name 'luac.c' -not -name 'onelua.c')
OBJS := $(SRCS:.c=.o)
all: $(OBJS)
%.o: %.c
	$(CC) $(CFLAGS) -I$(dir $<) -c $< -o $@
clean:
	rm -f $(OBJS)
.PHONY: all clean
MAKE
printf '*.o\n' >"$DIR/.gitignore"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
git -C "$DIR" init -q
git -C "$DIR" add -A
git -C "$DIR" commit -qm "C sources: Lua 5.1-5.5 and zstd's lib"
find "$DIR" -type f | wc -l
