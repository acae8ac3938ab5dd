# loadmgr — the two commands: `make test` (everything CI runs) and `make demo` (the main job).
CARGO ?= cargo

.PHONY: test demo deps fmt lint unit bench bench-cluster docker-test chaos fuzz dashboard-demo

## Installs the test dependencies if needed, checks formatting and lints, runs the benchmarks once as smoke
## tests, then the whole test suite.
test: deps
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) test --bench '*' --no-fail-fast
	$(CARGO) test --no-fail-fast

## Debian packages the tests need (protoc, ZooKeeper, etcd, curl, Prometheus, python3-venv; installs them as
## root, else prints the command), then the Python packages of tests/http_peers.rs into target/test-venv.
deps:
	@./scripts/install-test-deps.sh
	@./scripts/install-python-deps.sh

## Runs the built-in simulation suite for every strategy and writes target/loadmgr-report/index.html.
demo:
	@./scripts/demo.sh

## Failover in Docker: builds FROM-scratch images (release binary, or LOADMGR_BIN), starts three brokers on a
## three-member etcd with docker-compose, kills, restarts, partitions and reconnects brokers (docker/); then the
## same on a three-member ZooKeeper ensemble, even if etcd failed (each run prints its own results).
## `make docker-test DOCKER_STORES=zk` runs one store only.
DOCKER_STORES ?= etcd zk
docker-test:
	@failed=""; for store in $(DOCKER_STORES); do \
	  LOADMGR_DOCKER_STORE=$$store ./docker/failover-test.sh || failed="$$failed $$store"; \
	done; [ -z "$$failed" ] || { echo "docker-test failed on:$$failed" >&2; exit 1; }

## The chaos suite (docs/chaos.md): CHAOS_TRIALS seeded fault trials per store (ZooKeeper, etcd; single servers
## and three-member ensembles) on four broker processes, checked by an ownership oracle built from the hosts'
## serving timelines; prints the table and writes target/chaos/report.md. About 25 min at 110 trials per store.
## `make test` runs a smoke of it (six trials).
CHAOS_TRIALS ?= 110
CHAOS_SEED ?= 1
chaos: deps
	LOADMGR_CHAOS_TRIALS=$(CHAOS_TRIALS) LOADMGR_CHAOS_SEED=$(CHAOS_SEED) $(CARGO) test --release --test chaos -- --nocapture

## The live cluster at scale (docs/benchmarks.md, "The live cluster"): starts a ZooKeeper and an etcd of its own
## and runs `loadmgr bench cluster` on each, 1,000 brokers × 100,000 bundles unless BENCH_CLUSTER_ARGS says
## otherwise (BENCH_CLUSTER_STORES="zk" for one store). About 10 min per store on 2 cores. `make test` runs a
## small one (tests/bench_cluster.rs).
bench-cluster: deps
	@./scripts/bench-cluster.sh

## A small live cluster to look at in the dashboard (docs/dashboard.md): a ZooKeeper of its own, four brokers
## with synthetic traffic joining one after the other, shedding, splits and an unload; prints the URL and runs
## until Ctrl-C. DEMO_SCREENSHOT=FILE writes a headless Chromium screenshot after DEMO_SECONDS (300) instead.
dashboard-demo: deps
	@./scripts/dashboard-demo.sh

## Fuzzing (docs/fuzzing.md), not part of `make test`: installs cargo-fuzz if missing and runs every target of
## fuzz/ for FUZZ_SECONDS (default 60) each, one after the other, from its committed corpus in fuzz/corpus/;
## fails if any target crashes. Needs the nightly toolchain.
FUZZ_SECONDS ?= 60
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh

## The fast tests only, for the edit-compile-test loop: the library's and the binary's unit tests and the tests/
## files that need no ZooKeeper, etcd, Docker or network (a few seconds once built; tests/README.md lists what
## every file needs and how long it takes). `make test` runs these and the rest.
UNIT_TESTS := cli consistency explain_cli golden layers model_props routing runtime runtime_cli sim
unit:
	$(CARGO) test --lib --bins $(addprefix --test ,$(UNIT_TESTS))

fmt:
	$(CARGO) fmt

lint:
	$(CARGO) clippy --all-targets -- -D warnings

bench:
	$(CARGO) bench
