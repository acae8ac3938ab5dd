#!/usr/bin/env bash
# Creates the virtual environment of the tests that drive the web service with real Python tools
# (tests/http_peers.rs): the Pulsar client (its C++ core does Pulsar's HTTP lookup) and schemathesis (fuzzes the
# OpenAPI document), pinned, from PyPI. Idempotent: a second run with the same pins does nothing.
# The environment goes to $LOADMGR_TEST_VENV, else target/test-venv; the tests look in the same place.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${LOADMGR_TEST_VENV:-target/test-venv}
want="pulsar-client==3.13.0 schemathesis==4.32.5"
stamp="$venv/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  echo "python3 cannot make virtual environments: install Debian's python3-venv (scripts/install-test-deps.sh does)" >&2
  exit 1
fi
echo "Installing $want into $venv ..." >&2
python3 -m venv "$venv"
# shellcheck disable=SC2086
"$venv/bin/pip" install -q --disable-pip-version-check $want
echo "$want" > "$stamp"
