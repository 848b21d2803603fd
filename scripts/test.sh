#!/usr/bin/env bash
# Set up and run the whole test suite (unit, property, privacy audits, live embedded-broker tests).
# Extra arguments go to pytest. Tests marked `kafka` run only with PRIVSTREAM_KAFKA_BOOTSTRAP set.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# --- System packages the tests use, installed when missing (root with apt only; never fatal) ----
# PostgreSQL server binaries (initdb, postgres): the PostgreSQL ledger and state-store tests start a
# throwaway server with them, and skip, naming what is missing, where they cannot be installed.
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing postgresql (apt-get)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      postgresql >/dev/null; } || echo "== apt-get could not install postgresql; its tests will skip" >&2
fi

EXTRAS="[test]" source "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
