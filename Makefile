# wasmrec: `make run` runs the demo on a local control plane, `make test` is what CI runs.
# `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := all

GO        ?= go
BIN       := $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
# Pinned control-plane versions: change them in e2e/controlplane/*/go.mod.
# Evaluated only when kube-apiserver is built (recursive =), from the pin module itself.
KUBE_VERSION = $(shell cd e2e/controlplane/kube-apiserver && $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
KUBE_MINOR   = $(word 2,$(subst ., ,$(KUBE_VERSION)))

export KUBEBUILDER_ASSETS := $(BIN)

.PHONY: all
all: controlplane build ## Build the control plane and the wasmrec binary.

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_\/.-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/wasmrec.
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/wasmrec ./cmd/wasmrec

.PHONY: controlplane
controlplane: $(BIN)/etcd $(BIN)/kube-apiserver ## Build etcd and kube-apiserver into bin/ from the Go module proxy.

$(BIN)/etcd: e2e/controlplane/etcd/go.mod e2e/controlplane/etcd/go.sum
	@echo ">> building etcd from the Go module proxy into bin/ (about a minute the first time)"
	cd e2e/controlplane/etcd && $(GO) build -o $@ go.etcd.io/etcd/server/v3

$(BIN)/kube-apiserver: e2e/controlplane/kube-apiserver/go.mod e2e/controlplane/kube-apiserver/go.sum
	@test -n "$(KUBE_VERSION)" || { echo "cannot read the pinned k8s.io/kubernetes version from e2e/controlplane/kube-apiserver/go.mod"; exit 1; }
	@echo ">> building kube-apiserver $(KUBE_VERSION) from the Go module proxy into bin/ (3 to 7 minutes the first time, cached after)"
	cd e2e/controlplane/kube-apiserver && $(GO) build -o $@ \
		-ldflags "-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)" \
		k8s.io/kubernetes/cmd/kube-apiserver

.PHONY: run
run: controlplane build ## Run the demo: a local control plane with the example controllers (Ctrl-C stops).
	$(BIN)/wasmrec dev

.PHONY: test
test: controlplane ## Run unit and end-to-end tests (race detector on).
	@echo ">> go test: unit tests, then e2e on a local kube-apiserver + etcd"
	$(GO) test -race -count=1 -timeout 20m ./...

.PHONY: bench
bench: controlplane ## Run the benchmarks and print their figures.
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

MODULES := . e2e/controlplane/etcd e2e/controlplane/kube-apiserver

.PHONY: check
check: ## Format, vet and tidy; fail if anything changed.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done
	@git diff --exit-code -- $(addsuffix /go.mod,$(MODULES)) $(addsuffix /go.sum,$(MODULES)) || { echo "go mod tidy changed the files above: commit them"; exit 1; }

.PHONY: clean
clean: ## Remove what the build made (bin/ included: the control plane is rebuilt next time).
	rm -rf $(BIN)
