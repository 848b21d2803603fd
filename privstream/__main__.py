"""``python -m privstream`` runs the CLI."""

import sys

from privstream.stream_app.cli import main

sys.exit(main())
