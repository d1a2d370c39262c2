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
KUBE_VERSION = $(shell cd e2e/controlplane/kube-apiserver && GOWORK=off $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
KUBE_MINOR   = $(word 2,$(subst ., ,$(KUBE_VERSION)))

export KUBEBUILDER_ASSETS := $(BIN)

.PHONY: all
all: controlplane build plugins ## Build the control plane, the wasmrec binary and the example plugins.

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_\/.-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# -trimpath: the binary, and so the image's digest, does not depend on where the tree is.
.PHONY: build
build: sdk-modules ## Build bin/wasmrec.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN)/wasmrec ./cmd/wasmrec

# The image deploy/deployment.yaml runs, built with no container engine (internal/cmd/image):
# bin/wasmrec and bin/plugins on a root made from scratch, as an OCI layout in bin/image/, its
# digest the same for the same binary, plugins, CA certificates, labels and commit time
# (SOURCE_DATE_EPOCH overrides it). IMAGE_PUSH=registry/wasmrec:tag pushes it (plain HTTP to a
# loopback registry only, unless IMAGE_FLAGS=-insecure); IMAGE_REPO=registry/wasmrec names where
# you push bin/image yourself. Either writes bin/image/deploy/: deploy/ with the image by digest.
IMAGE_PUSH  ?=
IMAGE_REPO  ?=
IMAGE_FLAGS ?=

.PHONY: image
image: build plugins ## Build the host image into bin/image/ (an OCI layout) and print its digest; IMAGE_PUSH=REF pushes it.
	@echo ">> assembling the image from bin/wasmrec and bin/plugins into bin/image/ (compressing takes a few seconds)$(if $(IMAGE_PUSH), and pushing it to $(IMAGE_PUSH))"
	@env -u GOOS -u GOARCH $(GO) run ./internal/cmd/image -o $(BIN)/image -binary $(BIN)/wasmrec -plugins $(BIN)/plugins \
		-version $(VERSION) $(if $(GOARCH),-arch $(GOARCH)) $(if $(IMAGE_PUSH),-push $(IMAGE_PUSH)) $(if $(IMAGE_REPO),-repo $(IMAGE_REPO)) $(IMAGE_FLAGS)

# GOBIN, or GOPATH/bin, as go install does; GOBIN given to make (make install GOBIN=DIR) as well
# as in the environment.
INSTALL_DIR = $(or $(GOBIN),$(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)

.PHONY: install
install: controlplane sdk-modules ## Install wasmrec, and etcd, kube-apiserver and kube-controller-manager for `wasmrec dev`, into $(go env GOBIN) or $(go env GOPATH)/bin.
	CGO_ENABLED=0 GOBIN=$(INSTALL_DIR) $(GO) install -trimpath -ldflags "-X main.version=$(VERSION)" ./cmd/wasmrec
	install -m 0755 $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(INSTALL_DIR)/
	@echo ">> installed wasmrec, etcd, kube-apiserver and kube-controller-manager into $(INSTALL_DIR)"

# abi and sdk/go at the version plugins require (internal/release), written from the tree as a
# file-based module proxy that bin/wasmrec embeds and serves to the go command when it makes or
# builds a Go plugin (internal/sdkproxy): authors need no published copy of them.
.PHONY: sdk-modules
sdk-modules:
	@$(GO) run ./internal/cmd/goproxy -o internal/sdkproxy/modules

.PHONY: controlplane
controlplane: $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kube-controller-manager ## Build etcd, kube-apiserver and kube-controller-manager into bin/ from the Go module proxy.

$(BIN)/etcd: e2e/controlplane/etcd/go.mod e2e/controlplane/etcd/go.sum
	@echo ">> building etcd from the Go module proxy into bin/ (about a minute the first time)"
	cd e2e/controlplane/etcd && GOWORK=off $(GO) build -o $@ go.etcd.io/etcd/server/v3

$(BIN)/kube-apiserver: e2e/controlplane/kube-apiserver/go.mod e2e/controlplane/kube-apiserver/go.sum
	@test -n "$(KUBE_VERSION)" || { echo "cannot read the pinned k8s.io/kubernetes version from e2e/controlplane/kube-apiserver/go.mod"; exit 1; }
	@echo ">> building kube-apiserver $(KUBE_VERSION) from the Go module proxy into bin/ (3 to 7 minutes the first time, cached after)"
	cd e2e/controlplane/kube-apiserver && GOWORK=off $(GO) build -o $@ \
		-ldflags "-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)" \
		k8s.io/kubernetes/cmd/kube-apiserver

# From the same pinned k8s.io/kubernetes as kube-apiserver: `wasmrec dev` runs it for garbage
# collection, namespace deletion and ServiceAccount tokens.
$(BIN)/kube-controller-manager: e2e/controlplane/kube-apiserver/go.mod e2e/controlplane/kube-apiserver/go.sum
	@test -n "$(KUBE_VERSION)" || { echo "cannot read the pinned k8s.io/kubernetes version from e2e/controlplane/kube-apiserver/go.mod"; exit 1; }
	@echo ">> building kube-controller-manager $(KUBE_VERSION) from the Go module proxy into bin/ (about 2 minutes once kube-apiserver's build is cached)"
	cd e2e/controlplane/kube-apiserver && GOWORK=off $(GO) build -o $@ \
		-ldflags "-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)" \
		k8s.io/kubernetes/cmd/kube-controller-manager

# --- plugins: Go with GOOS=wasip1, C with clang + wasi-libc. Never committed. ---

GO_PLUGINS := app failing mirror rollout
C_PLUGINS  := app-c
# The exploration corpus (internal/explore/testdata/corpus): each plugin with a bug, and its twin.
CORPUS := twice staledelete forgetful stalestatus loop edge mapped
TESTGUESTS := misbehave tenant flood abi7 badimport noop flags logc follow readsecret clock benchc bench-go crud-go hashc hash-go hashtyped-go typed-go record-go record-v2-go panic-go map-go mapnoexport mapc mapc-nomap overlap overlap-v2 overlap-fail-tenth overlap-write-other swap-v1 swap-v2 swap-v3 swap-v4 swap-v5 \
	$(foreach p,$(CORPUS),explore-$(p) explore-$(p)-fixed)
CLANG      ?= clang
WASI_CFLAGS := --target=wasm32-wasi --sysroot=/usr -O2 -Wall -Wno-unused-parameter

# wasi-cc compiles the prerequisites' .c files with extra flags $(1) and links them into $@, in two
# steps as `wasmrec build` does: clang given -O2 when it links runs wasm-opt if it is on PATH, which
# drops the name section (a trap's stack would name no function).
define wasi-cc
	@mkdir -p $(@D) $@.objs
	for s in $(filter %.c,$^); do $(CLANG) $(WASI_CFLAGS) $(1) -c -o $@.objs/$$(basename $$s .c).o $$s || exit 1; done
	$(CLANG) --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -o $@ $@.objs/*.o
	@rm -rf $@.objs
endef

.PHONY: plugins
plugins: $(GO_PLUGINS:%=$(BIN)/plugins/%.wasm) $(C_PLUGINS:%=$(BIN)/plugins/%.wasm) ## Build the example plugins into bin/plugins/.

.PHONY: testguests
testguests: $(TESTGUESTS:%=$(BIN)/testguests/%.wasm) ## Build the misbehaving test modules into bin/testguests/.

SDK_GO := $(shell find sdk/go abi -name "*.go" -o -name go.mod)
SDK_C  := sdk/c/wasmrec.h sdk/c/wasmrec.c

.SECONDEXPANSION:
$(BIN)/plugins/%.wasm: $$(wildcard plugins/$$*/*.go plugins/$$*/go.mod plugins/$$*/go.sum) $(SDK_GO)
	@mkdir -p $(@D)
	cd plugins/$* && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ .

$(BIN)/plugins/app-c.wasm: plugins/app-c/app.c $(SDK_C) | c-toolchain
	$(call wasi-cc,-I sdk/c)

# Test guests speak the raw ABI, except benchc, hashc, overlap, mapc and logc, which use the C SDK.
$(BIN)/testguests/%.wasm: host/wasm/testdata/%.c | c-toolchain
	$(call wasi-cc,)

$(BIN)/testguests/benchc.wasm $(BIN)/testguests/hashc.wasm $(BIN)/testguests/overlap.wasm $(BIN)/testguests/mapc.wasm $(BIN)/testguests/logc.wasm: $(BIN)/testguests/%.wasm: host/wasm/testdata/%.c $(SDK_C) | c-toolchain
	$(call wasi-cc,-I sdk/c)

# The rollout e2e's new versions of the overlap guest.
$(BIN)/testguests/overlap-%.wasm: host/wasm/testdata/overlap.c $(SDK_C) | c-toolchain
	$(call wasi-cc,-D$(shell echo $* | tr a-z- A-Z_) -I sdk/c)

$(BIN)/testguests/mapc-nomap.wasm: host/wasm/testdata/mapc.c $(SDK_C) | c-toolchain
	$(call wasi-cc,-DNO_MAP -I sdk/c)

$(BIN)/testguests/swap-v%.wasm: host/wasm/testdata/swap.c $(SDK_C) | c-toolchain
	$(call wasi-cc,-DVERSION=$* $(if $(filter 3,$*),-DWATCH_CONFIGMAPS) $(if $(filter 4 5,$*),-DWATCH_SECRETS) $(if $(filter 5,$*),-DASK_SECRETS) -I sdk/c)

$(BIN)/testguests/record-v2-go.wasm: $(wildcard host/wasm/testdata/recordgo/*) $(SDK_GO)
	@mkdir -p $(@D)
	cd host/wasm/testdata/recordgo && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags=-X=main.version=2 -o $@ .

$(BIN)/testguests/explore-%.wasm: $$(wildcard internal/explore/testdata/corpus/$$*/*.go internal/explore/testdata/corpus/widget/*.go) $(SDK_GO)
	@mkdir -p $(@D)
	cd internal/explore/testdata/corpus/$* && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ .

$(BIN)/testguests/explore-%-fixed.wasm: $$(wildcard internal/explore/testdata/corpus/$$*/*.go internal/explore/testdata/corpus/widget/*.go) $(SDK_GO)
	@mkdir -p $(@D)
	cd internal/explore/testdata/corpus/$* && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags=-X=github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget.Fixed=true -o $@ .

$(BIN)/testguests/%-go.wasm: $$(wildcard host/wasm/testdata/$$*go/*) $(SDK_GO)
	@mkdir -p $(@D)
	cd host/wasm/testdata/$*go && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ .

# binaryen's wasm-opt, which wasmrec build --optimize runs (its test needs it).
.PHONY: binaryen
binaryen:
	@if ! command -v wasm-opt >/dev/null; then \
		echo ">> installing binaryen (wasm-opt) with apt-get (the test of wasmrec build --optimize runs it)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get install -y -q binaryen >/dev/null || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q binaryen >/dev/null; }; \
	fi

# clang, wasm-ld, wasi-libc and the compiler runtimes (wasm32; sanitizers for the C SDK test), from
# Debian's packages. (The check links with -O0: with -O2, clang would run wasm-opt, if installed, on
# /dev/null, and fail.)
.PHONY: c-toolchain
c-toolchain:
	@if ! echo 'int main(void){return 0;}' | $(CLANG) $(WASI_CFLAGS) -O0 -mexec-model=command -x c -o /dev/null - 2>/dev/null || \
	    ! echo 'int main(void){return 0;}' | $(CLANG) $(C_TEST_FLAGS) -x c -o /dev/null - 2>/dev/null; then \
		echo ">> installing clang, lld, wasi-libc and the compiler runtimes (wasm32, sanitizers) with apt-get (C plugins need them)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get install -y -q $(C_PACKAGES) >/dev/null || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q $(C_PACKAGES) >/dev/null; }; \
	fi

C_PACKAGES   := clang lld wasi-libc libclang-rt-dev-wasm32 libclang-rt-dev
C_TEST_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -O1 -Wall -Werror -Wno-unused-parameter

# The C SDK's JSON helpers, tested natively under the address and undefined-behaviour sanitizers.
$(BIN)/sdk-c-test: sdk/c/wasmrec_test.c $(SDK_C) | c-toolchain
	@mkdir -p $(@D)
	$(CLANG) $(C_TEST_FLAGS) -I sdk/c -o $@ sdk/c/wasmrec_test.c sdk/c/wasmrec.c

# An OCI registry for the e2e tests: distribution, as Debian packages it.
.PHONY: registry-tool
registry-tool:
	@if ! command -v docker-registry >/dev/null; then \
		echo ">> installing Debian's docker-registry with apt-get (the e2e tests push plugins to it)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get install -y -q docker-registry >/dev/null || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q docker-registry >/dev/null; }; \
	fi

# A browser for the tests of pages (wasmrec replay --page): Debian's Chromium, run headless.
.PHONY: browser
browser:
	@if ! command -v chromium >/dev/null; then \
		echo ">> installing Debian's Chromium with apt-get (the tests of recording pages load them in it, headless)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get install -y -q chromium >/dev/null || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q chromium >/dev/null; }; \
	fi

.PHONY: run
run: controlplane build plugins ## Run the demo: a local control plane with the example controllers (Ctrl-C stops).
	$(BIN)/wasmrec dev

# An execution count, not a duration: Go 1.26's fuzz coordinator can report a spurious
# "context deadline exceeded" when a -fuzztime duration ends mid-exec (golang/go#75804,
# fixed in Go 1.27). About 5 s per target on this machine.
FUZZTIME ?= 250000x
# The SDK's JSON fuzzers run encoding/json beside jsonv on deep inputs: about 30 s at 250000x,
# fewer for about 6 s each.
FUZZTIME_JSON ?= 50000x
# FuzzDecode decodes with apimachinery too, about 5 times slower an execution: fewer, for
# about 10 s.
FUZZTIME_OBJECT ?= 50000x
# FuzzInstrumentLoops compiles each input with wazero too: fewer executions.
FUZZTIME_INSTRUMENT ?= 20000x

.PHONY: test
test: controlplane build plugins testguests registry-tool browser binaryen $(BIN)/sdk-c-test ## Run unit and end-to-end tests (race detector on), then the fuzz targets briefly.
	$(BIN)/sdk-c-test
	@echo ">> go test: unit tests, then e2e on a local kube-apiserver + etcd (the scale-out e2e runs several host processes for about 2 minutes)"
	@rm -f $(BIN)/scaleout.txt $(BIN)/explore-corpus.txt
	WASMREC_TEST_ALL=1 $(GO) test -race -count=1 -timeout 20m ./...
	@cat $(BIN)/author-journey.txt 2>/dev/null || true
	@cat $(BIN)/explore-corpus.txt 2>/dev/null || true
	@cat $(BIN)/scaleout.txt 2>/dev/null || true
	cd abi && $(GO) test -count=1 ./...
	cd sdk/go && $(GO) test -count=1 ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	@echo ">> the generated Kubernetes types (sdk/go/k8s) against k8s.io/api and Kubernetes' JSON decoder, on every kind"
	cd internal/typegen && GOWORK=off $(GO) test -count=1 ./...
	@echo ">> fuzzing the host's decoding of what guests hand back (-fuzztime $(FUZZTIME) each)"
	cd abi && for f in FuzzDecodeResult FuzzDecodeRequest FuzzDecodeManifest; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) . || exit 1; done
	@echo ">> fuzzing the Go SDK's JSON decoder and encoder against encoding/json (-fuzztime $(FUZZTIME_JSON) each)"
	cd sdk/go && for f in FuzzDecode FuzzMarshal; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME_JSON) ./internal/jsonv || exit 1; done
	@echo ">> fuzzing how the host reads objects from the API server's JSON (-fuzztime $(FUZZTIME_OBJECT))"
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME_OBJECT) ./host/object
	@echo ">> fuzzing the loop instrumentation that makes modules interruptible (-fuzztime $(FUZZTIME_INSTRUMENT))"
	$(GO) test -run '^$$' -fuzz '^FuzzInstrumentLoops$$' -fuzztime $(FUZZTIME_INSTRUMENT) ./host/wasm/internal/binary

.PHONY: bench
bench: controlplane build plugins testguests ## Run the benchmarks and print their figures.
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 3h ./...
	@echo ">> the generated Kubernetes types' decoder against encoding/json, natively"
	cd internal/typegen && GOWORK=off $(GO) test -run '^$$' -bench . -benchmem -count=1 .

ABI_MODULE := github.com/wasmrec/wasmrec/abi
SDK_MODULE := github.com/wasmrec/wasmrec/sdk/go

# Modules with Go code, and the two that only pin the control plane's versions.
CODE_MODULES := . abi sdk/go $(GO_PLUGINS:%=plugins/%) host/wasm/testdata/benchgo host/wasm/testdata/crudgo host/wasm/testdata/hashgo host/wasm/testdata/hashtypedgo host/wasm/testdata/panicgo host/wasm/testdata/recordgo host/wasm/testdata/mapgo host/wasm/testdata/typedgo internal/explore/testdata/corpus
MODULES      := $(CODE_MODULES) e2e/controlplane/etcd e2e/controlplane/kube-apiserver

.PHONY: check
# Each module is tidied on its own (go mod tidy ignores go.work), through a copy of its go.mod
# that replaces abi and sdk/go with this tree's folders; the copy, less those replace lines,
# becomes go.mod. Nothing is fetched for them, and go.sum holds no checksum of theirs: in the
# tree they are the working copy, and a user's go.sum gets them from the checksum database. A file
# tidy leaves as it was is not rewritten, so that make check does not make the control plane's pin
# modules look newer than bin/kube-apiserver and rebuild it.
check: ## Format, vet and tidy; fail if anything changed.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@for m in $(CODE_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	cd sdk/go && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	@for m in $(MODULES); do (cd $$m && root=$$(realpath --relative-to=. $(CURDIR)) && \
		cp go.mod .tidy.mod && { [ ! -f go.sum ] || cp go.sum .tidy.sum; } && \
		$(GO) mod edit -modfile=.tidy.mod -replace=$(ABI_MODULE)=$$root/abi -replace=$(SDK_MODULE)=$$root/sdk/go && \
		GOWORK=off $(GO) mod tidy -modfile=.tidy.mod && \
		$(GO) mod edit -modfile=.tidy.mod -dropreplace=$(ABI_MODULE) -dropreplace=$(SDK_MODULE) && \
		{ cmp -s .tidy.mod go.mod && rm .tidy.mod || mv .tidy.mod go.mod; } && \
		{ [ ! -s .tidy.sum ] && rm -f .tidy.sum go.sum || { cmp -s .tidy.sum go.sum && rm .tidy.sum || mv .tidy.sum go.sum; }; }) || exit 1; done
	@git diff --exit-code -- $(addsuffix /go.mod,$(MODULES)) $(addsuffix /go.sum,$(MODULES)) || { echo "go mod tidy changed the files above: commit them"; exit 1; }
	cd internal/typegen && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) mod tidy
	@$(MAKE) -s generate-types
	@git diff --exit-code -- internal/typegen sdk/go/k8s internal/scaffold/zz_generated_typed.go || { echo "internal/typegen's module or the generated sdk/go/k8s changed: commit them (make generate-types)"; exit 1; }
	@test -z "$$(git status --porcelain -- sdk/go/k8s)" || { echo "make generate-types made files not committed:"; git status --porcelain -- sdk/go/k8s; exit 1; }

.PHONY: generate-types
# The Go types of sdk/go/k8s. With a control plane running (KUBECONFIG=... make generate-types
# SERVED=1, or 'wasmrec dev' in another terminal), it first reads what that API server serves
# into internal/typegen/served.json; without SERVED=1 it generates from the committed digest.
generate-types: ## Generate sdk/go/k8s (the Kubernetes types for Go plugins) from internal/typegen/served.json.
	@if [ -n "$(SERVED)" ]; then cd internal/typegen && GOWORK=off $(GO) run . digest > served.json.new && mv served.json.new served.json; fi
	rm -rf sdk/go/k8s/api $(addprefix sdk/go/k8s/apimachinery/pkg/apis/meta/v1/,zz_generated.types.go zz_generated.codec.go zz_generated.patchfields.go zz_generated.deepcopy.go)
	cd internal/typegen && GOWORK=off $(GO) run . generate -served served.json -out ../../sdk/go/k8s -kinds-test zz_generated_kinds_test.go -scaffold-kinds ../scaffold/zz_generated_typed.go -fake-patch-meta ../../sdk/go/fake/zz_generated.patchmeta.go

.PHONY: clean
clean: ## Remove what the build made (bin/ included: the control plane is rebuilt next time).
	rm -rf $(BIN)
