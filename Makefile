# loadmgr — the two commands: `make test` (everything CI runs) and `make demo` (the main job).
CARGO ?= cargo

.PHONY: test demo deps fmt lint unit bench docker-test fuzz

## Installs the test dependencies if needed, checks formatting and lints, runs the benchmarks once as smoke
## tests, then the whole test suite.
test: deps
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) test --bench '*' --no-fail-fast
	$(CARGO) test --no-fail-fast

## Debian packages the tests need (protoc, ZooKeeper, etcd); installs them as root, else prints the command.
deps:
	@./scripts/install-test-deps.sh

## Runs the built-in simulation suite for every strategy and writes target/loadmgr-report/index.html.
demo:
	@./scripts/demo.sh

## Failover in Docker: builds FROM-scratch images (release binary, or LOADMGR_BIN), starts three brokers on a
## three-member etcd with docker-compose, kills, restarts, partitions and reconnects brokers (docker/).
docker-test:
	@./docker/failover-test.sh

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
