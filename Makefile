# fairq — build, test and benchmark.
#
#   make test      install what the tests need if missing, then run every test with -race
#   make bench     run the Go benchmarks
#   make lint      gofmt, go vet and golangci-lint (when installed)
#   make loadtest  the k6 load tests against a local system (installs k6 when missing)

GO       ?= go
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS     ?= ./...
FUZZTIME ?= 10s

.PHONY: all build test deps deps-redis deps-fauxqs deps-oapi-codegen deps-promtool fuzz-smoke bench lint loadtest clean

all: build

build:
	$(GO) build -o fairq ./cmd/fairq

## test: what CI runs. Installs redis-server (Debian), fauxqs (npm, from
## the committed lockfile), promtool (from Debian's prometheus package)
## and oapi-codegen (go install) when they are missing.
test: deps
	$(GO) test -race -timeout 12m $(PKGS)
	$(MAKE) --no-print-directory fuzz-smoke

deps: deps-redis deps-fauxqs deps-oapi-codegen deps-promtool

deps-redis:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "redis-server missing: installing Debian's redis-server"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

deps-fauxqs: node_modules/.fauxqs-installed

node_modules/.fauxqs-installed: package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm (Node.js >= 20) is needed for the SQS emulator fauxqs"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## deps-promtool: promtool checks and unit-tests deploy/prometheus/alerts.yaml.
## Debian ships it in its prometheus package; only the promtool binary is
## taken from it (into GOBIN_DIR), so that no Prometheus server is
## installed or started.
deps-promtool:
	@command -v promtool >/dev/null 2>&1 || test -x "$(GOBIN_DIR)/promtool" || { \
	  echo "promtool missing: taking it from Debian's prometheus package into $(GOBIN_DIR)"; \
	  tmp=$$(mktemp -d) && cd "$$tmp" && \
	  { apt-get download prometheus >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; } && \
	  dpkg-deb -x prometheus_*.deb root && mkdir -p "$(GOBIN_DIR)" && \
	  install -m 755 root/usr/bin/promtool "$(GOBIN_DIR)/promtool"; \
	  rc=$$?; rm -rf "$$tmp"; exit $$rc; }

# Where `go install` puts commands; the tests look there as well as on PATH.
GOBIN_DIR := $(shell d="$$($(GO) env GOBIN)"; [ -n "$$d" ] || d="$$($(GO) env GOPATH | cut -d: -f1)/bin"; echo "$$d")

## deps-oapi-codegen: the code generator gateway/openapi.json is held to
## (TestOpenAPIGenerates), at its pinned version, and the runtime module
## its client code imports.
OAPI_CODEGEN_VERSION ?= v2.8.2
OAPI_RUNTIME_VERSION ?= v1.8.0
deps-oapi-codegen:
	@case "$$("$(GOBIN_DIR)/oapi-codegen" -version 2>/dev/null)" in \
	  *$(OAPI_CODEGEN_VERSION)*) ;; \
	  *) echo "oapi-codegen $(OAPI_CODEGEN_VERSION) missing: installing it with go install"; \
	     GOFLAGS= $(GO) install github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$(OAPI_CODEGEN_VERSION);; \
	esac
	@$(GO) mod download github.com/oapi-codegen/runtime@$(OAPI_RUNTIME_VERSION)

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
