#!/usr/bin/env bash
# `make demo`: loadmgr's main job on a laptop. Runs the built-in scenario suite (every scenario except `large`)
# for every shedding strategy with its default placement through the real decision core, prints one table
# per scenario and writes an HTML report with charts to target/loadmgr-report/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --bin loadmgr
start=$(date +%s%N)
target/debug/loadmgr simulate --report target/loadmgr-report
end=$(date +%s%N)
ms=$(( (end - start) / 1000000 ))
printf '\nReport: %s/target/loadmgr-report/index.html (simulation took %d.%01d s)\n' "$PWD" $((ms / 1000)) $(((ms % 1000) / 100))
