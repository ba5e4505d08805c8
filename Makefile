# nodesnap — build, test, bench, lint.
SHELL   := /bin/bash
.SHELLFLAGS := -o pipefail -c
GO      ?= go
BIN     ?= bin/nodesnap
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BUILD_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit is stamped too: the go command's own VCS stamp is off whenever the
# builder sets -buildvcs=false (GOFLAGS) or builds outside a checkout.
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.buildDate=$(BUILD_DATE) -X main.revision=$(REVISION)

.PHONY: all build test test-kernel test-short e2e-k8s bench bench-smoke lint fmt vet fuzz reliability clean

all: build

## build: one static binary at bin/nodesnap
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nodesnap

## test: every test, the real-kernel ones included (they need root; CI runs as root).
## Packages run one at a time (-p 1): their real-kernel fixtures (hung FUSE
## mounts, private namespaces) are visible node-wide, and one package's hung
## mount must not show up in another package's "healthy node" assertions.
## Then, as root, the end-to-end tests on a real Kubernetes (e2e-k8s below).
test: test-kernel
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory e2e-k8s; \
	 else echo "make test: e2e-k8s skipped: it needs root (a kubelet, containerd and mounts)"; fi

## test-kernel: the unit and real-kernel tests, without the Kubernetes e2e
test-kernel: vet s3-server
	$(GO) test -p 1 -count=1 -timeout 30m ./...
	$(GO) -C release test -count=1 -timeout 20m ./...
	$(MAKE) --no-print-directory bench-smoke

## e2e-k8s: a real single-node Kubernetes built from upstream source (cached in
## /var/cache/nodesnap-e2e; about 12 minutes cold on 2 cores), nodesnap's e2e tests on it,
## then the cluster taken down: its own pids, mounts, links, cgroups, sysctls.
E2E_STATE ?= /var/lib/nodesnap-e2e
E2E_K8S   ?= v1.34.4
# E2E_RUN=TestJobInPod runs only the e2e tests it matches (go test -run).
E2E_RUN   ?=
e2e-k8s: build image s3-server
	@test/kube/cluster.sh down
	NODESNAP_E2E_IMAGE_ARCHIVE=$(IMAGE_ARCHIVE) test/kube/cluster.sh up
	@status=0; \
	NODESNAP_E2E_KUBECONFIG=$(E2E_STATE)/admin.kubeconfig NODESNAP_E2E_IMAGE=$(IMAGE) \
	NODESNAP_E2E_KUBECTL=/var/cache/nodesnap-e2e/$(E2E_K8S)/bin/kubectl \
	  $(GO) test -count=1 -timeout 30m -v -run '$(E2E_RUN)' ./test/kube/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)' || status=$$?; \
	test/kube/cluster.sh down; exit $$status

## driver-words: regenerate signatures/driverwords/words.json, every CSI driver's own error wording
## (status errors with their gRPC code, wrapped errors, error logs, with the node operation that
## reaches them), from the drivers of signatures/driverwords/sources.txt: the module proxy's for a
## module it serves, else a snapshot at the release tag under DRIVERWORDS_SRC/<driver>@<version>
## (for instance `git clone --depth 1 --branch v3.12.2 https://github.com/ceph/ceph-csi
## $$DRIVERWORDS_SRC/ceph-csi@v3.12.2`). Not part of CI; commit the result.
.PHONY: driver-words
DRIVERWORDS_SRC ?=
driver-words:
	$(GO) run ./signatures/driverwords/gen -go $(GO) -sources signatures/driverwords/sources.txt -src '$(DRIVERWORDS_SRC)' -out signatures/driverwords/words.json
	$(GO) test -count=1 ./signatures/driverwords/...

## redact-rules: regenerate redact/rules_scanner.go (and the scanner's own negative examples
## in redact/corpusgen) from the secret scanner's default rules at the version pinned in
## redact/rulegen/go.mod; move the pin with `cd redact/rulegen && go get MODULE@VERSION`
.PHONY: redact-rules
redact-rules:
	$(GO) -C redact/rulegen run . -out ../rules_scanner.go -examples ../corpusgen/scanner_examples.json
	$(GO) test -count=1 -run 'TestRedactionDocUpToDate' ./redact -update

## s3-server: the S3-compatible store the object-storage tests run against (SeaweedFS,
## built from its module source into the e2e cache; 38 minutes cold on a loaded 2-core machine,
## nothing when cached)
.PHONY: s3-server
s3-server:
	GO=$(GO) test/s3server/build.sh

## test-short: the tests that need neither root nor long runs
test-short:
	$(GO) test -short -count=1 ./...

## bench: Go micro-benchmarks, then the side-by-side comparisons in test/bench/ (root),
## each one's output kept in bench-results/ and copied into docs/performance.md
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@mkdir -p bench-results
	@for s in test/bench/*.sh; do [ -x "$$s" ] || continue; echo "== $$s"; \
	  { echo "# command: $$s"; NODESNAP=$(CURDIR)/$(BIN) "$$s"; } 2>&1 | tee bench-results/$$(basename $$s .sh).txt || exit 1; done
	test/bench/perfdoc

## bench-smoke: every test/bench/*.sh once at its smallest size (root): it runs,
## its own checks hold, it prints its figures; no timing is asserted.
bench-smoke: build
	NODESNAP=$(CURDIR)/$(BIN) test/bench/smoke

## fuzz: each fuzz target for FUZZTIME (default 20s). A target fails only when it
## writes a failing input to testdata/fuzz/<target>: Go 1.26's coordinator can end a
## clean run with a bare "context deadline exceeded" (golang/go#75804), counted here
## as a harness flake, not a finding.
## Inputs that widen coverage are minimised for at most FUZZMINTIME: the default
## (a minute each) could spend a whole run minimising and never look further.
FUZZTIME ?= 20s
FUZZMINTIME ?= 5s
fuzz:
	@pass=0; fail=0; flake=0; \
	for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    before=$$(ls $$dir/testdata/fuzz/$$f 2>/dev/null | wc -l); \
	    if $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) $$pkg > /tmp/nodesnap-fuzz.$$$$ 2>&1; then pass=$$((pass+1)); \
	    else \
	      after=$$(ls $$dir/testdata/fuzz/$$f 2>/dev/null | wc -l); \
	      if [ "$$after" -gt "$$before" ] || ! grep -q 'context deadline exceeded' /tmp/nodesnap-fuzz.$$$$; then \
	        cat /tmp/nodesnap-fuzz.$$$$; fail=$$((fail+1)); \
	      else echo "   (harness flake: context deadline exceeded, no failing input written)"; flake=$$((flake+1)); fi; \
	    fi; \
	    rm -f /tmp/nodesnap-fuzz.$$$$; \
	  done; \
	done; \
	echo "fuzz: $$pass passed, $$fail failed, $$flake flaked"; [ $$fail -eq 0 ]

## vet: go vet and a gofmt check
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags nofleet ./cmd/nodesnap   # the node image's build (see image)

## lint: golangci-lint with the repo's config (.golangci.yml), installed on demand
lint: vet
	@command -v golangci-lint >/dev/null || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@latest
	golangci-lint run ./...

## reliability: every fault for several rounds, then the fuzz corpora for FUZZTIME;
## prints the summary table recorded in docs/reliability.md
reliability:
	@mkdir -p bench-results
	NODESNAP_RELIABILITY=full NODESNAP_RELIABILITY_OUT=$(CURDIR)/bench-results/reliability.md \
	  $(GO) test -count=1 -timeout 60m -v ./test/faults/ | grep -E '^(---|ok|FAIL|PASS)|\|' 
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)
	@echo; cat bench-results/reliability.md

# Release artifacts (release/ is a module of its own: nodesnap does not
# depend on its image and package builders). Every file and layer is stamped
# with the commit's time, so the same commit gives the same bytes.
DIST     ?= dist
IMAGE    ?= ghcr.io/nodesnap/nodesnap:$(VERSION)
ARCHES   ?= amd64 arm64
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
MKRELEASE := bin/mkrelease
# Where the krew manifest (dist/nodesnap.yaml) downloads the plugin's archives from.
KREW_BASE_URL ?= https://github.com/nodesnap/nodesnap/releases/download/$(VERSION)
IMAGE_ARCHIVE := $(DIST)/nodesnap-$(VERSION).oci.tar
DIST_BINARIES := $(foreach a,$(ARCHES),--binary $(a)=$(DIST)/nodesnap-$(VERSION)-linux-$(a))
# The image's binaries leave out 'fleet collect' (-tags nofleet): a node never
# drives its cluster, and client-go is more than half of the full binary.
NODE_BINARIES := $(foreach a,$(ARCHES),--binary $(a)=$(DIST)/node/nodesnap-$(VERSION)-linux-$(a))
.PHONY: image image-test release dist-binaries node-binaries mkrelease

## image: the OCI image archive $(DIST)/nodesnap-<version>.oci.tar, linux/amd64 and arm64, built
## without a daemon or a registry; IMAGE=repo/name:tag names it. Prints the archive's path last.
image: node-binaries mkrelease
	@echo "image $(IMAGE)"
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(MKRELEASE) image --out $(IMAGE_ARCHIVE) --ref $(IMAGE) \
	  --version $(VERSION) --revision $(REVISION) $(NODE_BINARIES)

## image-test: import the archive into a private containerd (and podman, where installed) and
## run the image's nodesnap (root)
image-test: image
	cd release && NODESNAP_IMAGE_ARCHIVE=$(abspath $(IMAGE_ARCHIVE)) NODESNAP_IMAGE_REF=$(IMAGE) \
	  $(GO) test -count=1 -v -run 'Test(Containerd|Podman)' ./cmd/mkrelease/

## release: $(DIST)/ with the static binaries, .deb, .rpm and krew archive (kubectl-nodesnap) per
## architecture, the filled krew manifest nodesnap.yaml (KREW_BASE_URL= where its archives are
## downloaded from), the image archive and SHA256SUMS; the same commit gives the same sha256 for
## every file
release:
	@mkdir -p $(DIST) && rm -f $(DIST)/nodesnap[-_.]* $(DIST)/SHA256SUMS
	$(MAKE) --no-print-directory image DIST=$(DIST) VERSION=$(VERSION) REVISION=$(REVISION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)
	$(MAKE) --no-print-directory dist-binaries DIST=$(DIST) VERSION=$(VERSION)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(MKRELEASE) packages --out-dir $(DIST) --version $(VERSION) --root . \
	  --krew-base-url $(KREW_BASE_URL) $(DIST_BINARIES)
	$(MKRELEASE) sums $(DIST)

node-binaries:
	@mkdir -p $(DIST)/node
	@for a in $(ARCHES); do \
	  echo "CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -tags nofleet -trimpath -ldflags '$(LDFLAGS)' -o $(DIST)/node/nodesnap-$(VERSION)-linux-$$a ./cmd/nodesnap"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -tags nofleet -trimpath -ldflags '$(LDFLAGS)' -o $(DIST)/node/nodesnap-$(VERSION)-linux-$$a ./cmd/nodesnap || exit 1; \
	done

dist-binaries:
	@mkdir -p $(DIST)
	@for a in $(ARCHES); do \
	  echo "CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(DIST)/nodesnap-$(VERSION)-linux-$$a ./cmd/nodesnap"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(DIST)/nodesnap-$(VERSION)-linux-$$a ./cmd/nodesnap || exit 1; \
	done

mkrelease:
	$(GO) -C release build -trimpath -o $(CURDIR)/$(MKRELEASE) ./cmd/mkrelease

clean:
	rm -rf bin dist

## signatures: regenerate the log-signature table (signatures/table_gen.go) and the report of
## upstream formats no class took (signatures/unclassified.tsv) from upstream source: every
## kubelet minor from 1.10, the runtimes and the CSI drivers of signatures/internal/extract/modules.txt,
## downloaded through the Go module proxy into the module cache. Not part of CI; commit the result.
.PHONY: signatures
signatures:
	@mods=$$(mktemp); trap 'rm -f $$mods' EXIT; \
	  GO=$(GO) sh signatures/internal/extract/download.sh signatures/internal/extract/modules.txt > $$mods && \
	  $(GO) run ./signatures/internal/extract -mods $$mods -table signatures/table_gen.go -report signatures/unclassified.tsv && \
	  gofmt -w signatures/table_gen.go
