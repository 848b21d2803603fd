#!/usr/bin/env bash
# Set up and run the whole test suite (unit, property, privacy audits, the documentation, live
# embedded-broker tests, the ops tier). Extra arguments go to pytest. Tests marked `kafka` run only
# with PRIVSTREAM_KAFKA_BOOTSTRAP set.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# System programs some test tiers need, from Debian: postgresql (initdb, postgres: the PostgreSQL
# store tests start a throwaway server), prometheus (prometheus, promtool) and chromium for the
# `ops` tier (tests/ops/). ONE list: add packages here, not another block.
# Installed only as root with apt-get, and only when one is missing; apt's output is hidden and
# its failure never fails this script (the tests that need a missing program skip, naming it).
SYSTEM_PACKAGES=(postgresql prometheus chromium)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for package in "${SYSTEM_PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "== installing ${missing[*]} with apt-get" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
      >/dev/null 2>&1 || echo "== apt-get could not install ${missing[*]}: their tests will skip" >&2
  fi
fi

EXTRAS="[test,docs]" source "$ROOT/scripts/setup.sh"
cd "$ROOT"
# Bytecode for the package itself (an editable install has none, and PYTHONDONTWRITEBYTECODE may
# forbid writing it on import): every worker, CLI and learner process the tests start loads it.
"$ROOT/.venv/bin/python" -m compileall -q privstream >/dev/null
# Two test processes (pytest-xdist), each test file in one of them: the live tests mostly wait on
# brokers and workers, so the other runs meanwhile. `-n 0` on the command line runs them in one.
exec "$ROOT/.venv/bin/python" -m pytest -n 2 --dist loadfile --durations=40 "$@"
