"""``python -m privstream`` runs the CLI."""

import sys

from privstream.stream_app.cli import main

if __name__ == "__main__":  # not when a spawned child process imports it
    sys.exit(main())
