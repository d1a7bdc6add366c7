# fairq — build, test and benchmark.
#
#   make build         a static binary ./fairq, version stamped from git
#   make test          install what the tests need if missing, then run every test with -race
#   make image         the container image (docker when a daemon answers, else buildah)
#   make release       static linux/amd64 and linux/arm64 binaries and SHA256SUMS in dist/
#   make deploy-check  the deployment checks: Helm, kube-score, Terraform, systemd, the image
#   make bench         run the Go benchmarks
#   make lint          gofmt, go vet and golangci-lint (.golangci.yml; installed when missing)
#   make loadtest      the k6 load tests against a local system (installs k6 when missing)
#   make chaos         the chaos suite: every fault against the real processes (about 16 minutes)
#   make loadtest-compare A=<commit> [B=<commit>]  the gateway's throughput at two commits (wrk)

GO       ?= go
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS     ?= ./...
# The fuzz smoke's budget is a number of executions, not a duration: with a
# duration, Go's fuzz coordinator can report its own deadline as a failure
# ("context deadline exceeded", no failing input) on a busy machine
# (go.dev/issue/75804, fixed in Go 1.27). A count has no deadline to race.
FUZZTIME ?= 20000x
# Minimising each new input the fuzzer finds is bounded too, so that a
# target cannot stall in minimisation.
FUZZMINIMIZETIME ?= 200x

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

.PHONY: all build test deps deps-lint deps-redis deps-chromium deps-fauxqs deps-deploy deps-oapi-codegen deps-promtool fuzz-smoke bench lint loadtest clean \
        image release manifests deploy-check

all: build

build:
	$(GOBUILD) -o fairq ./cmd/fairq

## test: what CI runs. Installs redis-server and chromium (Debian), fauxqs
## (npm, from the committed lockfile), promtool (from Debian's prometheus
## package) and oapi-codegen (go install) when they are missing.
test: deps
	$(GO) test -race -timeout 12m $(PKGS)
	$(MAKE) --no-print-directory fuzz-smoke

deps: deps-redis deps-chromium deps-fauxqs deps-oapi-codegen deps-promtool deps-deploy

# redis-cli (redis-tools) joins the nodes of the tests' Redis Cluster;
# redis-server runs their Sentinels too (--sentinel), so Debian's
# redis-sentinel package, a service around the same binary, is not needed.
deps-redis:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || { \
	  echo "redis-server or redis-cli missing: installing Debian's redis-server and redis-tools"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null; }

## deps-chromium: the headless browser the console's test drives (chromedp).
deps-chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "chromium missing: installing Debian's chromium"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

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
## The targets are found in the sources (not by building every package's
## tests again), and built with the tag fuzzsmoke, which leaves the
## gateway's OpenAPI contract checker out: its validator takes minutes to
## compile with the fuzzer's instrumentation, and no fuzz target uses it.
fuzz-smoke:
	@set -e; for file in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz'); do \
	  for target in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$file | cut -d' ' -f2); do \
	    pkg=./$$(dirname $$file); \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    out=$$($(GO) test -tags fuzzsmoke -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg 2>&1) || { echo "$$out"; exit 1; }; \
	  done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## lint: what CI runs before the tests: gofmt, go vet, and golangci-lint
## with the committed .golangci.yml, at the version pinned here.
GOLANGCI_LINT_VERSION ?= v2.15.0
lint: deps-lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	"$(GOBIN_DIR)/golangci-lint" run ./...

deps-lint:
	@case "$$("$(GOBIN_DIR)/golangci-lint" version --short 2>/dev/null)" in \
	  $(patsubst v%,%,$(GOLANGCI_LINT_VERSION))*) ;; \
	  *) echo "golangci-lint $(GOLANGCI_LINT_VERSION) missing: installing it with go install (a few minutes)"; \
	     GOFLAGS= $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION);; \
	esac

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

## loadtest-compare: the gateway's throughput at two commits side by side,
## each against the bare-handler baseline, under the same wrk load
## (loadtest/compare.sh): make loadtest-compare A=<commit> [B=<commit>, HEAD
## by default]. ROUNDS, DURATION and CONNS pass to the script (3, 10s, 64).
## Installs Debian's wrk when missing.
.PHONY: loadtest-compare deps-wrk
loadtest-compare: deps-wrk
	@test -n "$(A)" || { echo "usage: make loadtest-compare A=<commit> [B=<commit>]"; exit 2; }
	loadtest/compare.sh $(A) $(or $(B),HEAD)

deps-wrk:
	@command -v wrk >/dev/null 2>&1 || { \
	  echo "wrk missing: installing Debian's wrk"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

## image: the container image $(IMAGE):$(IMAGE_TAG) from the Dockerfile, with
## no base image: a static binary built here, the host's CA bundle and the
## user files, staged in $(IMAGE_CONTEXT). docker builds it when a daemon
## answers, Debian's buildah (rootless-friendly vfs storage, chroot
## isolation) otherwise; IMAGE_BUILDER=docker|buildah chooses.
IMAGE         ?= ghcr.io/fairq/fairq
IMAGE_TAG     ?= $(patsubst v%,%,$(VERSION))
IMAGE_ARCH    ?= $(shell $(GO) env GOARCH)
IMAGE_CONTEXT ?= dist/image
IMAGE_BUILDER ?= $(shell docker info >/dev/null 2>&1 && echo docker || echo buildah)
BUILDAH       ?= buildah
CA_BUNDLE     ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_ARGS     = --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg CREATED=$(BUILD_TIME)

image:
	@test -r $(CA_BUNDLE) || { echo "no CA bundle at $(CA_BUNDLE): install Debian's ca-certificates or set CA_BUNDLE"; exit 1; }
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)
	GOOS=linux GOARCH=$(IMAGE_ARCH) $(GOBUILD) -o $(IMAGE_CONTEXT)/fairq ./cmd/fairq
	cp $(CA_BUNDLE) $(IMAGE_CONTEXT)/ca-certificates.crt
	cp deploy/image/passwd deploy/image/group $(IMAGE_CONTEXT)/
ifeq ($(IMAGE_BUILDER),docker)
	docker build --platform linux/$(IMAGE_ARCH) $(IMAGE_ARGS) -f Dockerfile -t $(IMAGE):$(IMAGE_TAG) $(IMAGE_CONTEXT)
else
	@command -v $(firstword $(BUILDAH)) >/dev/null 2>&1 || { echo "neither a docker daemon nor buildah: make deps installs buildah"; exit 1; }
	$(BUILDAH) --storage-driver vfs bud --isolation chroot --arch $(IMAGE_ARCH) $(IMAGE_ARGS) \
	  -f Dockerfile -t $(IMAGE):$(IMAGE_TAG) $(IMAGE_CONTEXT)
endif

## release: static binaries for linux/amd64 and linux/arm64 and their
## SHA256SUMS in $(DIST), named fairq_<version>_linux_<arch>.
RELEASE_ARCHES ?= amd64 arm64
DIST           ?= dist

release:
	rm -f $(DIST)/fairq_* $(DIST)/SHA256SUMS && mkdir -p $(DIST)
	@set -e; for arch in $(RELEASE_ARCHES); do \
	  echo "build $(DIST)/fairq_$(VERSION)_linux_$$arch"; \
	  GOOS=linux GOARCH=$$arch $(GOBUILD) -o $(DIST)/fairq_$(VERSION)_linux_$$arch ./cmd/fairq; \
	done
	cd $(DIST) && sha256sum fairq_$(VERSION)_linux_* > SHA256SUMS && cat SHA256SUMS

## manifests: deploy/kubernetes/fairq.yaml, the Helm chart rendered with
## deploy/kubernetes/values.yaml (a test fails when they differ).
HELM         ?= $(shell command -v helm 2>/dev/null || echo "$$($(GO) env GOPATH)/bin/helm")
HELM_VERSION ?= v3.22.0
KUBE_SCORE         ?= $(shell command -v kube-score 2>/dev/null || echo "$$($(GO) env GOPATH)/bin/kube-score")
KUBE_SCORE_VERSION ?= v1.20.0

manifests: deps-deploy
	cp deploy/prometheus/alerts.yaml deploy/helm/fairq/files/alerts.yaml
	$(HELM) template fairq deploy/helm/fairq --namespace fairq --kube-version 1.30.0 \
	  -f deploy/kubernetes/values.yaml > deploy/kubernetes/fairq.yaml

## deps-deploy: the tools the deployment checks run, when missing: helm and
## kube-score (go install, pinned), Debian's buildah, shellcheck, jq and
## systemd (for systemd-analyze; on Debian images it is usually there, and
## installing it in a container starts nothing).
deps-deploy:
	@test -x "$(HELM)" || { echo "helm missing: installing helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)"; \
	  GOFLAGS= $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); }
	@test -x "$(KUBE_SCORE)" || { echo "kube-score missing: installing github.com/zegl/kube-score/cmd/kube-score@$(KUBE_SCORE_VERSION)"; \
	  GOFLAGS= $(GO) install github.com/zegl/kube-score/cmd/kube-score@$(KUBE_SCORE_VERSION); }
	@missing=""; \
	  command -v buildah >/dev/null 2>&1 || missing="$$missing buildah"; \
	  command -v shellcheck >/dev/null 2>&1 || missing="$$missing shellcheck"; \
	  command -v jq >/dev/null 2>&1 || missing="$$missing jq"; \
	  command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	  test -r $(CA_BUNDLE) || missing="$$missing ca-certificates"; \
	  if [ -n "$$missing" ]; then echo "installing Debian's$$missing"; \
	    $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

## deploy-check: every deployment check, each against the real tool: helm
## lint and template, strict decoding into the Kubernetes API types,
## kube-score, the Terraform module against `fairq queues create` on the SQS
## emulator, systemd-analyze security, shellcheck of the Elastic Beanstalk
## hooks, and the image built and run with buildah. `make test` runs them
## too, with everything else.
deploy-check: deps-deploy deps-fauxqs
	FAIRQ_REQUIRE_SERVICES=$${FAIRQ_REQUIRE_SERVICES:-1} $(GO) test -count=1 ./deploy/...

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
