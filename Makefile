# ctrlhost — the two commands that matter: `make demo` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
# The Kubernetes version is written in one place: the module that builds
# the test binaries (internal/testbin/go.mod.txt). testenv.KubernetesVersion
# and upstream/go.mod must name the same (TestModuleVersionsAgree).
KUBE_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*|\1|p' \
	internal/testbin/go.mod.txt)
TESTBIN_DIR := $(CURDIR)/_output/testbin/$(KUBE_VERSION)
# testenv finds the binaries here unless the caller points it elsewhere.
export CTRLHOST_TESTBIN ?= $(TESTBIN_DIR)
GOTEST_FLAGS ?= -race -count=1
# The upstream module (k8s.io/kubernetes' controllers) is vetted with -race
# too, so vet, tests and the drop-in binary the tests build share one set of
# compiled packages: compiling k8s.io/kubernetes twice would cost minutes.
UPSTREAM := $(GO) -C upstream
# The cloud module (k8s.io/cloud-provider's controllers, the example
# cloud-controller-manager, the KCM → CCM migration test).
CLOUD := $(GO) -C cloud
# The controller-runtime twin of examples/widget-operator (a module of its
# own, for docs/operators.md's comparison): built and tested so that it
# stays a fair, working twin.
CRTWIN := $(GO) -C examples/widget-operator/controllerruntime
# The native validatingadmissionpolicy-status controller, a module of its
# own: its type checker is k8s.io/apiserver's, which the root module keeps
# out of its graph (test/deps).
VAPSTATUS := $(GO) -C controllers/vapstatus
# Every test command of make test runs through hack/failures.sh, which
# repeats what failed at the end of the output.
FAILURES := bash hack/failures.sh

.PHONY: all help deps build test verify unit integration testbin demo bench fuzz chaos clean api sim \
	sim-mutants compare-operators clusterparts load matrix

all: build

## help: this list: every target a developer runs, and what it does.
help:
	@awk '/^## /{ sub(/^## /, ""); if ($$0 ~ /^[a-z-]+:/) print ""; print "  " $$0 }' $(MAKEFILE_LIST)

build:
	$(GO) build ./...

## deps: fetch every module the build needs, before any test runs.
deps:
	$(GO) mod download
	$(UPSTREAM) mod download
	$(CLOUD) mod download
	$(CRTWIN) mod download
	$(GO) -C tools mod download
	@tools="$$(mktemp -d)"; trap 'rm -rf "$$tools"' EXIT; \
	$(GO) run ./cmd/testbin -write-module "$$tools" && GOWORK=off $(GO) -C "$$tools" mod download

## test: formatting and vet, every unit test, then the integration suite
## against a real etcd + kube-apiserver (built first if missing).
test: deps verify unit integration

## verify: gofmt, go vet in every module, and staticcheck (pinned in
## tools/go.mod, configured by staticcheck.conf) over the root module with
## every build tag its tests use.
verify:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	@long="$$(awk 'length > 100 {print FILENAME ":" FNR}' $$(git ls-files '*.go' 2>/dev/null | grep -v '_test.go$$' || find . -name '*.go' -not -name '*_test.go' -not -path './_output/*'))"; \
	if [ -n "$$long" ]; then echo "lines over 100 columns in non-test Go files:"; echo "$$long"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/... ./testenv/... ./examples/...
	$(GO) vet -tags chaos ./test/chaos/...
	$(GO) vet -tags conformance ./test/cluster/... ./test/conformance/...
	$(UPSTREAM) vet -race -tags integration ./...
	$(CLOUD) vet -tags integration ./...
	$(CRTWIN) vet -tags integration ./...
	$(VAPSTATUS) vet ./...
	$(GO) tool -modfile=tools/go.mod staticcheck -tags integration,chaos,conformance ./...

# The host's hot-path benchmarks; `make unit` runs each once, so that a
# broken benchmark fails `make test`, not only `make bench`.
HOT_BENCH := 'Resolve100|Item$$|TermStartStop|ReadyzVerbose|Handoff|ServedUnitFreesItsCache'
HOT_BENCH_PKGS := ./internal/selection/ ./workloop/ ./manager/ ./leader/

## unit: fast tests, no binaries needed (`go test -race ./...` in the root
## module, in upstream/ and in cloud/).
unit:
	$(FAILURES) $(GO) test $(GOTEST_FLAGS) ./...
	$(FAILURES) $(GO) test -count=1 -timeout 30m ./test/sim/ -run '^TestSimulation$$' -sim.seeds=300
	$(FAILURES) $(GO) test -run '^$$' -bench $(HOT_BENCH) -benchtime 1x $(HOT_BENCH_PKGS)
	$(FAILURES) $(UPSTREAM) test $(GOTEST_FLAGS) ./...
	$(FAILURES) $(CLOUD) test $(GOTEST_FLAGS) ./...
	$(FAILURES) $(CRTWIN) test $(GOTEST_FLAGS) ./...
	$(FAILURES) $(VAPSTATUS) test $(GOTEST_FLAGS) ./...

## integration: tests tagged `integration`, on testenv.
integration: testbin
	$(FAILURES) $(GO) test $(GOTEST_FLAGS) -timeout 30m -tags integration ./testenv/... ./test/integration/... \
		./test/chaos/... ./test/cluster/ ./examples/widget-operator/ ./examples/kcm/
	$(FAILURES) $(UPSTREAM) test $(GOTEST_FLAGS) -timeout 30m -tags integration ./...
	$(FAILURES) $(CLOUD) test $(GOTEST_FLAGS) -timeout 30m -tags integration ./...
	KUBEBUILDER_ASSETS=$(CTRLHOST_TESTBIN) $(FAILURES) $(CRTWIN) test $(GOTEST_FLAGS) -timeout 10m -tags integration ./...

## testbin: build etcd and kube-apiserver from the Go module proxy into
## _output/testbin/$(KUBE_VERSION) (skips what is already built, and never
## leaves a half-written binary), with cmd/testbin from the tools module
## embedded in internal/testbin, which is where KUBE_VERSION is read from
## (tested). Downstream modules run `go run
## github.com/ctrlhost/ctrlhost/cmd/testbin@<version>`.
testbin: deps
	$(GO) run ./cmd/testbin -go "$(GO)" -dir "$(TESTBIN_DIR)"

## matrix: the host's integration suite (the contract table's rows among
## it), the widget operator's integration tests and testenv's against every
## kube-apiserver minor of the tested window (`go run ./cmd/testbin
## -list-minors`; MATRIX_MINORS picks some), each minor's etcd and
## kube-apiserver built first into _output/testbin/<version>. make test
## runs the newest only. Time and result: docs/versioning.md.
MATRIX_MINORS ?= $(shell $(GO) run ./cmd/testbin -list-minors)
MATRIX_PKGS := ./testenv/... ./test/integration/... ./examples/widget-operator/
matrix: deps
	@status=0; for minor in $(MATRIX_MINORS); do \
		version="$$($(GO) run ./cmd/testbin -minor $$minor -print-version)" || exit 1; \
		dir="$(CURDIR)/_output/testbin/$$version"; \
		$(GO) run ./cmd/testbin -go "$(GO)" -minor $$minor -dir "$$dir" || exit 1; \
		echo "== kube-apiserver $$version"; \
		start=$$(date +%s); \
		CTRLHOST_TESTBIN="$$dir" CTRLHOST_KUBERNETES_VERSION="$$version" $(FAILURES) \
			$(GO) test $(GOTEST_FLAGS) -timeout 30m -tags integration $(MATRIX_PKGS) || status=1; \
		echo "== kube-apiserver $$version: $$(( $$(date +%s) - start )) s"; \
	done; exit $$status

## demo: a local control plane plus the example controller manager.
demo: testbin
	$(GO) run ./hack/demo

## bench: the host's hot paths (Go benchmarks); leader failover across
## processes on testenv (ten crash failovers wait out the lease); the widget
## operator's SIGTERM handoff against its controller-runtime twin; the KCM →
## CCM migration handoff; and ctrlhost against upstream
## kube-controller-manager v1.37.1 side by side (upstream/bench: about 40
## minutes at the default sizes; BENCH_ROUNDS, BENCH_QPS, BENCH_RS,
## BENCH_REPLICAS, BENCH_PODS, BENCH_KILL, BENCH_SCENARIOS scale it;
## docs/benchmarks.md); then `make load`.
bench: testbin
	$(GO) test -run '^$$' -bench $(HOT_BENCH) $(HOT_BENCH_PKGS)
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -tags integration ./test/integration/
	$(GO) test -run '^$$' -bench OperatorHandoff -benchtime 1x -timeout 30m -tags integration ./examples/widget-operator/
	$(CLOUD) test -run '^$$' -bench . -benchtime 1x -timeout 30m -tags integration ./test/e2e/
	$(UPSTREAM) test -run '^$$' -bench 'VersusUpstream|Sharding' -benchtime 1x -timeout 150m -tags integration ./bench/
	$(MAKE) load

## fuzz: each fuzz target for FUZZTIME (go test -fuzz takes one target at a
## time). Seeds alone already run in `make unit`.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./manager:FuzzControllersFlag ./manager:FuzzFlagValue ./leader:FuzzMigrationConfig ./descriptor:FuzzNewSet
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## chaos: three replicas of a small operator on testenv under random
## partitions, signals, API server restarts and misbehaving controllers;
## prints a table and fails on overlap or stuck processes (docs/chaos.md).
## CHAOS_ROUNDS scales it; not part of `make test`.
chaos: testbin
	$(GO) test -count=1 -tags chaos -run TestChaos -timeout 60m -v ./test/chaos/...

## sim: the host simulation over SIM_SEEDS seeds (10,000 by default, about
## half an hour on 2 cores; make unit runs 30 under -race and 300 without);
## SIM_FIRST picks the first seed. A failing seed prints its replay command.
SIM_SEEDS ?= 10000
SIM_FIRST ?= 1
sim:
	$(GO) test -count=1 -timeout 120m ./test/sim/ -run '^TestSimulation$$' -sim.seeds=$(SIM_SEEDS) -sim.first=$(SIM_FIRST)

## sim-mutants: revert, one at a time, the fixes the simulation must catch
## (test/sim/testdata/mutants) and check that 300 seeds catch each.
sim-mutants:
	@bash hack/sim-mutants.sh

## compare-operators: the widget operator on ctrlhost against its
## controller-runtime twin: lines, library names, cold build time, binary
## size, modules (docs/operators.md; the handoff is in `make bench`).
compare-operators:
	@bash hack/compare-operators.sh

## api: rewrite api/*.txt, the recorded public API, from the source
## (TestAPIIsRecorded in `make unit` fails while they differ).
api:
	$(GO) test ./test/api/ -run '^TestAPIIsRecorded$$' -count=1 -update

clean:
	rm -rf _output

# A cluster on one machine (issue 37): etcd and kube-apiserver (testenv),
# kube-scheduler, kwok as the kubelet of simulated nodes, and one controller
# manager, judged by upstream's own e2e tests (test/cluster,
# test/conformance, docs/conformance.md).
.PHONY: clusterbin conformance conformance-smoke node-failure rolling-upgrade
CONFORMANCE_SET ?= full
CONFORMANCE_FLAGS ?= -conformance.parallel=4
CONFORMANCE_DIR := $(CURDIR)/_output/conformance

## clusterbin: build kube-scheduler, kube-controller-manager and e2e.test
## ($(KUBE_VERSION)) and kwok from the Go module proxy into
## _output/testbin/$(KUBE_VERSION) (skips what is built; about 20 minutes
## cold on 2 cores, most of it e2e.test).
clusterbin: testbin
	$(GO) run ./test/cluster/clusterbin -go "$(GO)" -dir "$(TESTBIN_DIR)"

## clusterparts: clusterbin without e2e.test (kube-scheduler,
## kube-controller-manager and kwok): what node-failure, rolling-upgrade
## and load run on.
clusterparts: testbin
	$(GO) run ./test/cluster/clusterbin -go "$(GO)" -dir "$(TESTBIN_DIR)" -e2e=false

## load: a clusterloader-style load (LOAD_PODS pods, 10,000 by default, as
## Deployments and Jobs on LOAD_NODES kwok nodes, 500: create, scale up,
## rolling update, scale down, delete) under upstream KCM and the native
## examples/kcm; per phase the time until every pod is Ready and the
## manager's CPU, its peak RSS, its requests by verb and its 409s, with
## ratios (docs/benchmarks.md; about 45 minutes on 2 cores).
LOAD_PODS ?= 10000
LOAD_NODES ?= 500
load: clusterparts
	$(GO) test -count=1 -timeout 4h -tags conformance -run '^TestLoad$$' ./test/cluster/ -v \
		-cluster.load-pods=$(LOAD_PODS) -cluster.load-nodes=$(LOAD_NODES) \
		-cluster.report=$(CONFORMANCE_DIR)/load.md

## conformance: upstream's e2e tests of the controllers (CONFORMANCE_SET:
## full, conformance or smoke) on a kwok cluster, under upstream KCM, the
## native examples/kcm and the drop-in; prints the table
## (docs/conformance.md: about 2 hours for the full set on 2 cores); then
## the rolling upgrade from upstream KCM.
conformance: clusterbin rolling-upgrade
	@status=0; $(GO) test -count=1 -timeout 10h -tags conformance -run '^TestConformance$$' \
		./test/conformance/ -v -conformance.set=$(CONFORMANCE_SET) \
		-conformance.dir=$(CONFORMANCE_DIR)/$(CONFORMANCE_SET) $(CONFORMANCE_FLAGS) || status=$$?; \
	echo; cat $(CONFORMANCE_DIR)/$(CONFORMANCE_SET)/table.md 2>/dev/null; exit $$status

## conformance-smoke: the cluster's own test (kwok plays the kubelet) and
## six e2e tests under the three controller managers (a few minutes): the
## smoke for `make test`.
conformance-smoke: clusterbin
	$(GO) vet -tags conformance ./test/cluster/... ./test/conformance/...
	$(FAILURES) $(GO) test -count=1 -timeout 15m -tags conformance \
		-run '^TestClusterPlaysTheKubelet$$' ./test/cluster/
	$(FAILURES) $(GO) test -count=1 -timeout 20m -tags conformance -run '^TestConformance$$' \
		./test/conformance/ -conformance.set=smoke -conformance.dir=$(CONFORMANCE_DIR)/smoke

## node-failure: kubelets (kwok processes) killed under upstream KCM and
## under the native examples/kcm, on one cluster shape: one node of a
## zone, then a whole zone; time to the taint, to eviction and to every
## replacement Ready, and the zone's taints at --node-eviction-rate
## (docs/benchmarks.md; about 10 minutes).
node-failure: clusterparts
	$(GO) test -count=1 -timeout 30m -tags conformance -run '^TestNodeFailure$$' ./test/cluster/ \
		-v -cluster.report=$(CONFORMANCE_DIR)/node-failure.md

## rolling-upgrade: three controller manager replicas upgraded from
## upstream KCM to ctrlhost one at a time (2+1, 1+2, 0+3), the leader
## stopped with SIGTERM and SIGKILL at each step; fails on any overlap of
## two replicas' writes (docs/upstream.md; about 10 minutes).
rolling-upgrade: clusterparts
	$(GO) test -count=1 -timeout 30m -tags conformance -run '^TestRollingUpgrade$$' \
		./test/cluster/ -v -cluster.report=$(CONFORMANCE_DIR)/rolling-upgrade.md
