"""privstream: online learners paired with differentially-private releases, on Kafka."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("privstream")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+local"

__all__ = ["__version__"]
