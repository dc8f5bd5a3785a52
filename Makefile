# Sluice developer entry points. `make run` brings up a demo volume on the
# embedded default (SQLite + a local directory); `make test` runs every test.

GO        ?= go
BIN       := bin/sluice
RUN_DIR   ?= $(HOME)/.sluice/demo
MOUNT     ?= /tmp/sluice-demo
META_URL  := sqlite3://$(RUN_DIR)/meta.db

.PHONY: build run stop test vet fmt clean

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

## test: vet, then run the whole test suite against throwaway Redis, PostgreSQL,
## MariaDB, etcd and S3 servers (scripts/test-servers.sh; FUSE tests need root
## and /dev/fuse; pjdfstest, fsx and stress-ng run on mounts when installed)
test: vet
	scripts/test-servers.sh $(GO) test -count=1 -timeout 40m ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w cmd internal

clean:
	rm -rf bin
