# moraine: run `make help` for the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODULE_DIRS := schemas pkg ingest processor query delivery deploy e2e
SERVICES    := ingest processor query delivery
STACK       := deploy/stack/stack.sh
BIN         := bin
STATE_DIR   := $(or $(MORAINE_STATE_DIR),.moraine)
# Each test run's whole output, kept for reading after a failure.
TEST_OUT    := $(abspath $(STATE_DIR))/logs/tests
# Test binaries are built with -race; CI has 2 cores, so keep package parallelism modest.
GOTEST_FLAGS ?= -race -count=1 -timeout 30m -p 2

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the four services, the chain sources and the tools into ./bin.
	@mkdir -p $(BIN)
	@for s in $(SERVICES); do (cd $$s && go build -o ../$(BIN)/$$s ./cmd/$$s) || exit 1; done
	@cd deploy && go build -o ../$(BIN)/devchain ./cmd/devchain && go build -o ../$(BIN)/replay ./cmd/replay && go build -o ../$(BIN)/corpus ./cmd/corpus
	@cd query && go build -o ../$(BIN)/querybench ./cmd/querybench && go build -o ../$(BIN)/moraine-admin ./cmd/moraine-admin
	@echo "built: $$(ls $(BIN) | tr '\n' ' ')"

.PHONY: stack-up
stack-up: ## Install (if needed) and start ClickHouse and Kafka under .moraine/.
	@bash $(STACK) start

.PHONY: stack-status
stack-status: ## Show whether ClickHouse, Kafka and the services run.
	@bash $(STACK) status || true
	@bash deploy/run.sh status || true

.PHONY: test
test: stack-up ## Start the local stack, then run unit and integration tests of every module (-race) and the API fuzzer.
	@eval "$$(bash $(STACK) env)"; \
	export MORAINE_CHDB_PYTHON=$$(bash deploy/stack/chdb.sh install) || exit 1; \
	export MORAINE_SCHEMATHESIS=$$(bash deploy/stack/schemathesis.sh install) || exit 1; \
	out=$(TEST_OUT)/test; mkdir -p $$out; fail=0; for m in $(MODULE_DIRS); do \
	  echo "=== go test $$m"; \
	  (cd $$m && go test $(GOTEST_FLAGS) ./... 2>&1 | tee $$out/$$m.out; exit $${PIPESTATUS[0]}) || \
	    { fail=1; failed="$$failed $$m"; }; \
	done; for m in $$failed; do bash e2e/failure-summary.sh $$out/$$m.out; done; exit $$fail

.PHONY: run
run: build stack-up ## Start the stack, the development chain and the four services (background; logs in .moraine/logs).
	@bash deploy/run.sh up

.PHONY: down
down: ## Stop the services, the development chain and the stack (data is kept); the local cluster too.
	@bash deploy/run.sh down
	@bash $(STACK) stop
	@if [ -d $(STATE_DIR)/cluster ]; then bash deploy/run.sh cluster down && bash $(STACK) cluster stop; fi

.PHONY: reset
reset: ## Stop everything and delete the local data (ClickHouse, Kafka, dev chain, keys, the local cluster); downloads are kept.
	@bash deploy/run.sh down
	@bash $(STACK) reset
	@if [ -d $(STATE_DIR)/cluster ]; then bash deploy/run.sh cluster down && bash $(STACK) cluster reset; fi
	@rm -rf $(STATE_DIR)/devchain $(STATE_DIR)/devchain.json $(STATE_DIR)/dev-api-key $(STATE_DIR)/query $(STATE_DIR)/logs $(STATE_DIR)/run
	@echo "local data deleted; make run starts afresh"

.PHONY: cluster
cluster: build ## Local cluster: ZooKeeper, 2 ClickHouse replicas, 3 Kafka nodes, nginx (API on :19080), 2 instances of every service.
	@bash $(STACK) cluster start
	@bash deploy/run.sh cluster up

.PHONY: cluster-status
cluster-status: ## Show each node of the local cluster and each service instance on it.
	@bash $(STACK) cluster status || true
	@bash deploy/run.sh cluster status || true

.PHONY: cluster-check
cluster-check: ## Start the cluster's engines if needed, then kill -9 and restart a ClickHouse replica and a Kafka broker (about 1 min).
	@bash $(STACK) cluster start
	@mkdir -p $(BIN) && cd deploy && go build -o ../$(BIN)/clustercheck ./cmd/clustercheck
	@$(BIN)/clustercheck --stack $(STACK)

.PHONY: test-cluster
test-cluster: ## Fault suite on the local cluster: kills Kafka, ClickHouse and service instances under traffic, then checks ledgers (about 8 min; MORAINE_FAULT_SEED replays a run).
	@bash $(STACK) cluster start
	@bash deploy/run.sh cluster down >/dev/null
	@eval "$$(bash $(STACK) cluster env)"; \
	export MORAINE_CHDB_PYTHON=$$(bash deploy/stack/chdb.sh install) || exit 1; \
	echo "=== pkg integration tests on the cluster"; \
	(cd pkg && go test -count=1 -timeout 10m ./chclient/ ./kafkautil/ ./accountdb/) || exit 1; \
	echo "=== fault suite"; \
	out=$(TEST_OUT)/test-cluster.out; mkdir -p $(TEST_OUT); \
	cd e2e && go test -tags cluster -count=1 -timeout 30m -run TestClusterFaults -v . 2>&1 | grep -v "level=INFO" | tee $$out; \
	rc=$${PIPESTATUS[0]}; [ $$rc = 0 ] || bash failure-summary.sh $$out; exit $$rc

.PHONY: test-nodes
test-nodes: stack-up ## Node fault suite: one chain on 3 replay nodes that die, freeze, lag, answer 429s, drop logs, receipts and traces, and fork, in a backfill and at the head; checks ClickHouse and Kafka against the corpus (about 3 min; MORAINE_NODE_FAULT_SEED replays a run).
	@eval "$$(bash $(STACK) env)"; \
	out=$(TEST_OUT)/test-nodes.out; mkdir -p $(TEST_OUT); \
	cd e2e && go test -tags nodes -count=1 -timeout 15m -run TestNodeFaults -v . 2>&1 | grep -v "level=INFO" | tee $$out; \
	rc=$${PIPESTATUS[0]}; [ $$rc = 0 ] || bash failure-summary.sh $$out; exit $$rc

.PHONY: cluster-down
cluster-down: ## Stop the local cluster's services and nodes (data is kept); the single-node stack keeps running.
	@bash deploy/run.sh cluster down
	@bash $(STACK) cluster stop

.PHONY: bench
bench: build stack-up ## Run the benchmarks; results go to bench/results.md and the README.
	@eval "$$(bash $(STACK) env)"; bash bench/run.sh

.PHONY: bench-history
bench-history: build stack-up ## The transaction-history routes alone: 50M synthetic transactions (seeded once, ~30 min), 4 routes at 200 req/s.
	@eval "$$(bash $(STACK) env)"; bash bench/history.sh

.PHONY: bench-balances
bench-balances: build stack-up ## The balance routes alone: the balances of 50M synthetic transactions (seeded once), 3 routes at 200 req/s, the old-block curve.
	@eval "$$(bash $(STACK) env)"; bash bench/balances.sh

.PHONY: bench-usage
bench-usage: build stack-up ## Request logging on vs off at 500 req/s, a 60 s ClickHouse outage under load, usage reads over 10M logged requests (~30 min).
	@eval "$$(bash $(STACK) env)"; bash bench/usage.sh

# The benchmark corpus (make corpus, make bench-backfill): where it is written and how large.
CORPUS              ?= $(STATE_DIR)/corpus
CORPUS_BLOCKS       ?= 200000
CORPUS_TRANSACTIONS ?= 5000000

.PHONY: corpus
corpus: ## Build the backfill corpus from ../shared/data (CORPUS=dir, CORPUS_BLOCKS, CORPUS_TRANSACTIONS; about 2.2 GB).
	@cd deploy && go build -o ../$(BIN)/corpus ./cmd/corpus
	@$(BIN)/corpus --out $(CORPUS) --blocks $(CORPUS_BLOCKS) --transactions $(CORPUS_TRANSACTIONS)

.PHONY: bench-backfill
bench-backfill: stack-up ## Backfill the corpus end to end twice (builds it if missing): nothing served, then serving reads and webhooks first; results to bench/ and the README (about 30 min at 10,000 tx/s).
	@eval "$$(bash $(STACK) env)"; MORAINE_BENCH_CORPUS=$${MORAINE_BENCH_CORPUS:-$(CORPUS)} CORPUS_BLOCKS=$(CORPUS_BLOCKS) \
		CORPUS_TRANSACTIONS=$(CORPUS_TRANSACTIONS) bash bench/backfill.sh

.PHONY: soak
soak: stack-up ## Run at the development chain's head for 30 min (MORAINE_SOAK_DURATION): webhook latency, memory, lag every 5 min; not in CI.
	@eval "$$(bash $(STACK) env)"; bash bench/soak.sh

# staticcheck, pinned; its checks are in staticcheck.conf. go run fetches it through the Go module proxy once and
# caches the build. The cluster and nodes tags bring in the fault suites' files, which nothing else excludes.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK         := go run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags cluster,nodes

.PHONY: lint
lint: ## gofmt check, go vet and staticcheck (staticcheck.conf) of every module; every service flag in its README.
	@fail=0; out=$$(gofmt -l $(MODULE_DIRS)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; fail=1; fi; \
	for m in $(MODULE_DIRS); do (cd $$m && go vet ./...) || fail=1; done; \
	$(STATICCHECK) $(addprefix ./,$(addsuffix /...,$(MODULE_DIRS))) || fail=1; \
	bash deploy/docs-flags.sh || fail=1; \
	exit $$fail

.PHONY: fmt
fmt: ## gofmt every module.
	@gofmt -w $(MODULE_DIRS)

.PHONY: generate
generate: ## Regenerate the protobuf record types (needs protoc; installs protoc-gen-go and -go-vtproto) and golden files.
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	@command -v protoc-gen-go >/dev/null || PATH=$$PATH:$$(go env GOPATH)/bin command -v protoc-gen-go >/dev/null || go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.10
	@command -v protoc-gen-go-vtproto >/dev/null || PATH=$$PATH:$$(go env GOPATH)/bin command -v protoc-gen-go-vtproto >/dev/null || go install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0
	@cd schemas && PATH=$$PATH:$$(go env GOPATH)/bin protoc --go_out=. --go_opt=module=github.com/moraine-data/moraine/schemas \
		--go-vtproto_out=. --go-vtproto_opt=module=github.com/moraine-data/moraine/schemas,features=marshal+unmarshal+unmarshal_unsafe+size \
		proto/moraine/v1/*.proto
	@cd schemas && go test ./codec -run Golden -update >/dev/null && echo "regenerated schemas/record and schemas/testdata"

.PHONY: tidy
tidy: ## go mod tidy in every module.
	@for m in $(MODULE_DIRS); do (cd $$m && go mod tidy) || exit 1; done
