#!/usr/bin/env bash
# `make fuzz`: runs every fuzz target of fuzz/ for FUZZ_SECONDS (default 60) each, one after the other, from
# its committed corpus fuzz/corpus/<target>/, and fails on the first target that crashes (docs/fuzzing.md).
#
# Needs the nightly toolchain (`cargo +nightly`); installs cargo-fuzz with `cargo install` when it is missing.
# New inputs the fuzzer finds go to fuzz/target/new-corpus/<target>/, not into the committed corpus: see
# docs/fuzzing.md for how to merge and minimise them. A crash leaves its input in fuzz/artifacts/<target>/.
#
# FUZZ_TARGETS="a b" runs only those targets; FUZZ_ARGS adds libFuzzer options (e.g. -jobs=2).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "make fuzz needs the nightly toolchain (cargo +nightly); install it with: rustup toolchain install nightly" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

targets=${FUZZ_TARGETS:-$(cd fuzz && cargo +nightly fuzz list)}
# -s none: the targets are safe Rust, so AddressSanitizer finds nothing the Rust checks do not, and it slows
# every run. Debug assertions and overflow checks stay on (cargo-fuzz's default).
(cd fuzz && cargo +nightly fuzz build -s none)
failed=()
for t in $targets; do
    echo "== fuzzing $t for ${seconds}s"
    mkdir -p "fuzz/target/new-corpus/$t"
    # shellcheck disable=SC2086
    if ! (cd fuzz && cargo +nightly fuzz run -s none "$t" "target/new-corpus/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 ${FUZZ_ARGS:-}); then
        failed+=("$t")
        break
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "make fuzz: $t crashed; the input is in fuzz/artifacts/$t/ (docs/fuzzing.md says how to reproduce it)" >&2
    exit 1
fi
echo "make fuzz: every target ran ${seconds}s without a crash"
