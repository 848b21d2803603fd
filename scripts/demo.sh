#!/usr/bin/env bash
# Set up and run the embedded demo: broker, worker and producer on this machine.
# Extra arguments go to `privstream demo` (e.g. --examples 3000 --json).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
exec "$ROOT/.venv/bin/privstream" demo "$@"
