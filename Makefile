# nodesnap — build, test, bench, lint.
GO      ?= go
BIN     ?= bin/nodesnap
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build test test-short bench lint fmt vet fuzz reliability clean

all: build

## build: one static binary at bin/nodesnap
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nodesnap

## test: every test, the real-kernel ones included (they need root; CI runs as root)
test: vet
	$(GO) test -count=1 -timeout 20m ./...

## test-short: the tests that need neither root nor long runs
test-short:
	$(GO) test -short -count=1 ./...

## bench: Go micro-benchmarks, then the side-by-side comparisons in bench/ (root)
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@for s in bench/*.sh; do [ -x "$$s" ] || continue; echo "== $$s"; NODESNAP=$(CURDIR)/$(BIN) "$$s" || exit 1; done

## fuzz: each fuzz target for FUZZTIME (default 20s)
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## vet: go vet and a gofmt check
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## lint: golangci-lint with the repo's config (.golangci.yml), installed on demand
lint: vet
	@command -v golangci-lint >/dev/null || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@latest
	golangci-lint run ./...

clean:
	rm -rf bin
