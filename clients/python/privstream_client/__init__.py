"""privstream-client: follow a privstream deployment's signed private releases.

Decode a release (:class:`Release`), verify its signature (:class:`KeySet`), follow a stream
(:func:`subscribe`, ``level="best"``) and predict with it, from a row for a tabular stream
(:class:`TabularEncoder`). Depends on numpy, cryptography and
aiokafka only; the privstream service uses this same code to sign and read releases.

>>> release = Release.from_json(EXAMPLE)
>>> release.describe_hypothesis()
'predicts 1 for x ≥ 14,577'
"""

from privstream_client.models import ReleaseFormatError, describe, model_from_dict
from privstream_client.release import (
    EXAMPLE,
    Certificate,
    LevelChoice,
    LifetimeBound,
    Publication,
    Release,
    ReleaseSelector,
    WindowInfo,
    certificate_problem,
    check_level,
    describe_release,
)
from privstream_client.signing import (
    KEY_ID_HEADER,
    SIGNATURE_HEADER,
    VERIFY_PROBLEMS,
    KeySet,
    PublicKeyEntry,
    Signer,
    SigningKeyError,
    key_id,
    public_key_from_text,
)
from privstream_client.subscription import (
    SKIP_REASONS,
    KeysUnavailableError,
    Subscription,
    fetch_key_set,
    subscribe,
    trusted_key_set,
)
from privstream_client.tabular import ColumnError, RowError, TabularEncoder

__version__ = "0.1.0"

__all__ = [
    "EXAMPLE",
    "KEY_ID_HEADER",
    "SIGNATURE_HEADER",
    "SKIP_REASONS",
    "VERIFY_PROBLEMS",
    "Certificate",
    "ColumnError",
    "KeySet",
    "KeysUnavailableError",
    "LevelChoice",
    "LifetimeBound",
    "PublicKeyEntry",
    "Publication",
    "Release",
    "ReleaseFormatError",
    "ReleaseSelector",
    "RowError",
    "Signer",
    "SigningKeyError",
    "Subscription",
    "TabularEncoder",
    "WindowInfo",
    "certificate_problem",
    "check_level",
    "describe",
    "describe_release",
    "fetch_key_set",
    "key_id",
    "model_from_dict",
    "public_key_from_text",
    "subscribe",
    "trusted_key_set",
]
