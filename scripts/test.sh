#!/usr/bin/env bash
# Set up and run the whole test suite (unit, property, privacy audits, live embedded-broker tests).
# Extra arguments go to pytest. Tests marked `kafka` run only with PRIVSTREAM_KAFKA_BOOTSTRAP set.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXTRAS="[test]" source "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
