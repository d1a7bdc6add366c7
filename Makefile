# fairq — build, test and benchmark.
#
#   make build         a static binary ./fairq, version stamped from git
#   make test          install what the tests need if missing, then run every test with -race
#   make image         the container image (docker when a daemon answers, else buildah)
#   make release       static linux/amd64 and linux/arm64 binaries and SHA256SUMS in dist/
#   make deploy-check  the deployment checks: Helm, kube-score, Terraform, systemd, the image
#   make bench         run the Go benchmarks
#   make lint          gofmt, go vet and golangci-lint (when installed)
#   make loadtest      the k6 load tests against a local system (installs k6 when missing)

GO       ?= go
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS     ?= ./...
FUZZTIME ?= 10s

# What `fairq version` prints and the worker's User-Agent names. The go
# command stamps the revision itself in a clone (-buildvcs=auto, whatever
# GOFLAGS says); the link-time flags also cover worktrees and tarballs.
VERSION    ?= $(shell git describe --tags --always --dirty --match 'v*' 2>/dev/null || echo dev)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED   ?= $(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),true,false)
BUILD_TIME ?= $(shell date -u $${SOURCE_DATE_EPOCH:+-d @$$SOURCE_DATE_EPOCH} +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION) \
              -X main.modified=$(MODIFIED) -X main.buildTime=$(BUILD_TIME)
GOBUILD     = CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags "$(LDFLAGS)"

.PHONY: all build test deps deps-redis deps-fauxqs fuzz-smoke bench lint loadtest clean

all: build

build:
	$(GOBUILD) -o fairq ./cmd/fairq

## test: what CI runs. Installs redis-server (Debian) and fauxqs (npm, from
## the committed lockfile) when they are missing.
test: deps
	$(GO) test -race -timeout 12m $(PKGS)
	$(MAKE) --no-print-directory fuzz-smoke

deps: deps-redis deps-fauxqs

deps-redis:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "redis-server missing: installing Debian's redis-server"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

deps-fauxqs: node_modules/.fauxqs-installed

node_modules/.fauxqs-installed: package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm (Node.js >= 20) is needed for the SQS emulator fauxqs"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## fuzz-smoke: every fuzz target for a short while; no input may panic.
fuzz-smoke:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    out=$$($(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg 2>&1) || { echo "$$out"; exit 1; }; \
	  done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@if command -v golangci-lint >/dev/null 2>&1; then golangci-lint run; else echo "golangci-lint not installed: skipped"; fi

clean:
	rm -rf fairq dist

## loadtest: the k6 scripts (loadtest/k6: steady, noisy, burst, bad-traffic)
## against a fresh `fairq dev`, then the fairness experiment: every scenario
## (noisy, outage, slow, poison) in each mode (one shared queue, shuffle
## sharding only, full fairq), report and charts in loadtest/out/fairness.
## About 40 minutes on 2 cores. FAIRNESS_FLAGS passes flags to the
## experiment, e.g. FAIRNESS_FLAGS="-scenario noisy -modes single,full".
K6             ?= $(shell command -v k6 2>/dev/null || echo "$$($(GO) env GOPATH)/bin/k6")
K6_VERSION     ?= v1.8.1
FAIRNESS_FLAGS ?=

.PHONY: loadtest loadtest-deps loadtest-smoke
loadtest: loadtest-deps
	$(GO) run ./loadtest/k6run -k6 "$(K6)"
	$(GO) run ./loadtest/fairness $(FAIRNESS_FLAGS)

## loadtest-deps: k6 (installed with go install when missing), redis-server
## and fauxqs.
loadtest-deps: deps
	@test -x "$(K6)" || { echo "k6 missing: installing go.k6.io/k6@$(K6_VERSION)"; GOFLAGS= $(GO) install go.k6.io/k6@$(K6_VERSION); }

## loadtest-smoke: each k6 script for a few seconds, and the short version
## of each scenario with its accounting checked (as `make test` runs it).
loadtest-smoke: loadtest-deps
	$(GO) run ./loadtest/k6run -short -k6 "$(K6)"
	FAIRQ_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -run TestSmoke ./loadtest/harness
