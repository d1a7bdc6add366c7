# fairq — build, test and benchmark.
#
#   make test      install what the tests need if missing, then run every test with -race
#   make bench     run the Go benchmarks
#   make lint      gofmt, go vet and golangci-lint (when installed)
#   make loadtest  the k6 load tests against a local system (installs k6 when missing)
#   make chaos     the chaos suite: every fault against the real processes (about 16 minutes)

GO       ?= go
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS     ?= ./...
FUZZTIME ?= 10s

.PHONY: all build test deps deps-redis deps-fauxqs fuzz-smoke bench lint loadtest clean

all: build

build:
	$(GO) build -o fairq ./cmd/fairq

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
	rm -f fairq

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

## chaos: the chaos suite, long form: each fault (workers and the gateway
## killed, Redis and SQS taken away, the application failing and hanging,
## the slow-body attack, a message sent just after a worker restart) in a
## run of its own against the real gateway, workers, redis-server and
## fauxqs; report and records in loadtest/out/chaos. About 16 minutes.
## CHAOS_FLAGS passes flags, e.g. CHAOS_FLAGS="-faults sqs-stall,slow-body".
## The short form runs in `make test` (TestChaosShort in loadtest/harness).
CHAOS_FLAGS ?=

.PHONY: chaos
chaos: deps
	$(GO) run ./loadtest/chaos $(CHAOS_FLAGS)
