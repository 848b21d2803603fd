#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install privstream into it.
# Sourced by scripts/demo.sh and scripts/test.sh; needs only python3 (>= 3.11) and the package index.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "privstream needs Python >= 3.11; $PYTHON is $("$PYTHON" --version 2>&1)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
echo "== installing privstream${EXTRAS:-} into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
# privstream depends on privstream-client (clients/python/, the subscriber's code): both come
# from this checkout, in one resolution, so the index is never asked for the client.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  -e "$ROOT/clients/python" -e "$ROOT${EXTRAS:-}" >&2
