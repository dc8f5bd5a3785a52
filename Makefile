# Sluice developer entry points. `make run` brings up a demo volume on the
# embedded default (SQLite + a local directory); `make test` runs every test.

GO        ?= go
BIN       := bin/sluice
RUN_DIR   ?= $(HOME)/.sluice/demo
MOUNT     ?= /tmp/sluice-demo
META_URL  := sqlite3://$(RUN_DIR)/meta.db

# Packages whose tests run with the race detector in `make test` and
# `make check`: everything but the end-to-end mounts, whose FUSE servers run
# in the test binary and would take several times longer under -race.
RACE_PKGS = $(shell $(GO) list ./... | grep -v /internal/e2e)
E2E_PKGS  = ./internal/e2e/...
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build run stop test check lint vet fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/sluice

## run: build, format the demo volume once, and mount it at $(MOUNT) in the background
run: build
	@mkdir -p $(RUN_DIR) $(MOUNT)
	@$(BIN) status $(META_URL) >/dev/null 2>&1 || $(BIN) format $(META_URL) demo --bucket $(RUN_DIR)/data
	@if grep -qs " $(MOUNT) " /proc/self/mounts; then echo "Already mounted at $(MOUNT)."; \
	else $(BIN) mount -d $(META_URL) $(MOUNT) --log $(RUN_DIR)/mount.log --cache-dir $(RUN_DIR)/cache; fi
	@echo "The demo volume is at $(MOUNT) (cd $(MOUNT)); stop it with: make stop"

## stop: unmount the demo volume
stop:
	$(BIN) umount $(MOUNT)

## test: vet and lint, then the whole test suite (unit tests under the race
## detector, then the end-to-end mounts) against throwaway Redis, PostgreSQL,
## MariaDB, etcd and S3 servers (scripts/test-servers.sh; FUSE tests need root
## and /dev/fuse; pjdfstest, fsx and stress-ng run on mounts when installed)
test: vet lint
	scripts/test-servers.sh sh -c 'GO=$(GO); export GO; scripts/gotest.sh -race -count=1 -timeout 30m $(RACE_PKGS) && scripts/gotest.sh -count=1 -timeout 40m $(E2E_PKGS)'

## check: the fast edit loop: vet, staticcheck, and the unit tests under the
## race detector, with no servers (tests that need one skip) and no mounts
check: vet lint
	CI= $(GO) test -race -short -count=1 $(RACE_PKGS)

## lint: staticcheck, fetched from the Go module proxy and built on first use
lint:
	$(STATICCHECK) ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w cmd internal

clean:
	rm -rf bin
