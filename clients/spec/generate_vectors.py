"""Write the release specification's test vectors into ``clients/spec/vectors/``.

``python clients/spec/generate_vectors.py`` (with the service installed): the releases are built
with the service's own release models, as the worker writes them, and signed by test keys whose
private seeds are public (``vectors.json`` states them: never sign anything else with them).
Ed25519 is deterministic, so the output is the same on every run; ``tests/clients/test_vectors.py``
checks that the committed files are what this writes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from privstream_client.signing import KeySet, PublicKeyEntry, RotationStatement, Signer

from privstream.learning.private_learners.halfspaces.model import HalfspaceModel
from privstream.learning.private_learners.one_vs_rest import OneVsRestModel
from privstream.schemas import (
    Certificate,
    HypothesisRelease,
    LifetimeBound,
    Publication,
    ReleaseGuarantee,
    WindowInfo,
)

VECTORS = Path(__file__).resolve().parent / "vectors"
#: When the vectors' records were published (their Kafka timestamps, ms since the epoch).
PUBLISHED_MS = 1_796_212_800_000  # 2026-12-02T12:00:00Z
#: The retired key's not_after: before PUBLISHED_MS, so what it signs then is refused.
RETIRED_AT = "2026-12-01T00:00:00+00:00"
#: The deployment (ledger) the vector releases and the rotation statement belong to.
LEDGER_ID = "5f0c3e9a7b2d4e61"


def test_signer(name: str) -> tuple[Signer, str]:
    """A test key from a public seed: SHA-256 of its name."""
    seed = hashlib.sha256(f"privstream test vector key: {name}".encode()).digest()
    return Signer(Ed25519PrivateKey.from_private_bytes(seed)), seed.hex()


def certificate(**changes: Any) -> Certificate:
    """A certificate as a worker writes one for a level-1 node of a count-window stream."""
    fields: dict[str, Any] = {
        "mechanism": "generic-exponential",
        "epsilon": 0.5,
        "delta": 0.0,
        "neighbouring_relation": "replace-one",
        "privacy": "information-theoretic",
        "guarantee": ReleaseGuarantee(
            epsilon=0.5,
            delta=0.0,
            neighbouring_relation="replace-one",
            unit="example",
            algorithm_epsilon=0.5,
            algorithm_delta=0.0,
        ),
        "window": WindowInfo(
            window_id="c1f0e2a4-c2000-L1-3",
            kind="count",
            start=12000,
            end=16000,
            first_window=6,
            last_window=7,
        ),
        "sample_size": 4000,
        "ledger_entry_id": "41",
        "ledger_id": LEDGER_ID,
        "ledger_epoch": 3,
        "composition": "tree",
        "level": 1,
        "lifetime": LifetimeBound(
            epsilon=1.0,
            delta=0.0,
            epsilon_budget=1.0,
            delta_budget=0.0,
            top_level=1,
            level_epsilon=[0.5, 0.5],
            rule="parallel composition over the disjoint nodes of a level, sequential over the levels",
        ),
        "publication": Publication(
            scheduled_at=datetime.fromtimestamp(PUBLISHED_MS / 1000, UTC),
            publish_delay_seconds=5.0,
            max_node_examples=4000,
            rule="published at scheduled_at: the end of its publication slot",
        ),
        "epsilon_budget_remaining": 0.0,
        "delta_budget_remaining": 0.0,
        "parameters": {"class_size": 65537, "alpha": 0.1, "beta": 0.05},
        "dp_outputs": {},
        "proper": True,
        "accuracy_guarantee_holds": True,
        "theorem_sample_size": 3316,
        "randomness": "secure",
        "library_version": "0.1.0",
    }
    fields.update(changes)
    return Certificate(**fields)


def release(stream_id: str, hypothesis_class: str, hypothesis: dict[str, Any], **changes: Any) -> bytes:
    """The exact bytes a worker stores in its ledger and publishes (and signs)."""
    model = HypothesisRelease(
        stream_id=stream_id,
        hypothesis_class=hypothesis_class,
        hypothesis=hypothesis,
        certificate=certificate(**changes),
    )
    return model.model_dump_json().encode()


def vectors() -> dict[str, bytes]:
    """Every file of ``vectors/``, by name."""
    current, current_seed = test_signer("current")
    retired, retired_seed = test_signer("retired")
    stranger, stranger_seed = test_signer("not in the key set")
    retired_entry = PublicKeyEntry(retired.key_id, retired.public_key, datetime.fromisoformat(RETIRED_AT))
    keys = KeySet([current.public_entry(), retired_entry])

    threshold = release(
        "clicks", "thresholds:65536", {"kind": "runs", "domain": 65536, "first": 0, "changes": [14577]}
    )
    table = release(
        "bands",
        "intervals:64",
        {"kind": "bits", "domain": 64, "bits": "AAD8/w8AAAA="},
        mechanism="generic-exponential",
        parameters={"class_size": 2081},
    )
    halfspace = release(
        "sensors",
        "halfspaces:2",
        {"kind": "halfspace", "bounds": [[0.0, 10.0], [-1.0, 1.0]], "normal": [0.6, -0.8], "offset": 0.25},
        mechanism="halfspaces-noisy-gradient",
        sample_size=None,
        neighbouring_relation="add-remove-one",
        accuracy_guarantee_holds=None,
        theorem_sample_size=None,
        parameters={"features": 2},
    )
    # Three classes on the halfspace's box, as the service's one-vs-rest model writes them.
    box = [[0.0, 10.0], [-1.0, 1.0]]
    classes = [([-1.0, 0.0], -0.3), ([1.0, 0.0], 0.7), ([0.0, 1.0], 0.6)]
    one_vs_rest = release(
        "digits",
        "one-vs-rest:2",
        OneVsRestModel(
            tuple(HalfspaceModel(np.array(box), np.array(w), b) for w, b in classes), 0.5, 0.0
        ).to_dict(),
        mechanism="one-vs-rest(halfspace-net-em)",
        sample_size=None,
        neighbouring_relation="add-remove-one",
        accuracy_guarantee_holds=None,
        theorem_sample_size=None,
        parameters={"classes": 3, "composition": "basic: 3 one-vs-rest halfspaces at ε/3 each"},
    )
    forged = threshold.replace(b'"changes":[14577]', b'"changes":[1]')
    assert forged != threshold

    def case(
        name: str, data: str, signer: Signer, problem: str | None, about: str, **more: Any
    ) -> dict[str, Any]:
        key_id, signature = signer.sign(files[data] if data != "forged.release.json" else threshold)
        return {
            "name": name,
            "about": about,
            "release": data,
            "key_id": key_id,
            "signature": signature,
            "timestamp_ms": PUBLISHED_MS,
            "problem": problem,
            **more,
        }

    files: dict[str, bytes] = {
        "threshold.release.json": threshold,
        "bits.release.json": table,
        "halfspace.release.json": halfspace,
        "one-vs-rest.release.json": one_vs_rest,
        "forged.release.json": forged,
    }
    cases = [
        case(
            "threshold",
            "threshold.release.json",
            current,
            None,
            "a release of a threshold (runs form), signed by the current key: verifies",
            predictions=[[0, 0], [14576, 0], [14577, 1], [65535, 1]],
        ),
        case(
            "bits",
            "bits.release.json",
            current,
            None,
            "a release in the bits form (little-endian packed truth table): verifies",
            predictions=[[0, 0], [17, 0], [18, 1], [35, 1], [36, 0], [63, 0]],
        ),
        case(
            "halfspace",
            "halfspace.release.json",
            current,
            None,
            "a release on feature vectors: verifies; u = (x - lo)/(hi - lo), clipped to [0, 1]",
            predictions=[[[10.0, -1.0], 1], [[0.0, 1.0], 0], [[5.0, 0.0], 0], [[20.0, -5.0], 1]],
        ),
        case(
            "one-vs-rest",
            "one-vs-rest.release.json",
            current,
            None,
            "a release of a stream of 3 classes: verifies; the class k of the highest "
            "<normal_k, u> - offset_k (a tie to the smallest k)",
            predictions=[
                [[0.0, -1.0], 0],
                [[10.0, -1.0], 1],
                [[2.0, 1.0], 2],
                [[9.0, 0.5], 1],
                [[-5.0, 3.0], 2],
            ],
        ),
        case(
            "forged",
            "forged.release.json",
            current,
            "bad_signature",
            "threshold.release.json with its change point moved, under threshold.release.json's signature",
        ),
        case(
            "unknown-key",
            "threshold.release.json",
            stranger,
            "unknown_key",
            "signed by a key the key set does not list",
        ),
        case(
            "retired-key",
            "threshold.release.json",
            retired,
            "retired_key",
            f"signed by a key retired at {RETIRED_AT}, in a record published after that",
        ),
    ]
    statement = {
        "about": "Test vectors of the privstream release specification. Each case: verify the bytes of "
        "`release` with `signature` (base64) by `key_id` against keys.json at the record time "
        "`timestamp_ms`; `problem` is null (verifies) or why a verifier refuses it; `predictions` "
        "are [point, label] pairs of the released hypothesis.",
        "keys": "keys.json",
        "test_private_seeds": {
            "about": "32-byte Ed25519 seeds (hex) of the test keys; public, for testing only",
            current.key_id: current_seed,
            retired.key_id: retired_seed,
            stranger.key_id: stranger_seed,
        },
        "cases": cases,
    }
    # The retired key handed the deployment over to the current one at RETIRED_AT.
    rotation = RotationStatement.sign(retired, current, LEDGER_ID, datetime.fromisoformat(RETIRED_AT))
    forged_rotations = {
        "genuine": (rotation, None, "the retired key hands over to the current key: followed"),
        "unknown-key": (
            RotationStatement.sign(stranger, current, LEDGER_ID, rotation.at),
            "unknown_key",
            "signed by a key the pinned set does not hold",
        ),
        "bad-signature": (
            replace(rotation, new_key=stranger.public_entry()),
            "bad_signature",
            "the genuine statement with another new key swapped in",
        ),
        "bad-countersignature": (
            replace(rotation, countersignature=stranger.sign(rotation.signed_bytes())[1]),
            "bad_countersignature",
            "countersigned by a key other than the new one",
        ),
    }
    files["rotations.json"] = (
        json.dumps(
            {
                "about": "Rotation statements for a subscriber that pinned only the retired key (as "
                "before its retirement): it follows a statement whose `problem` is null (and then "
                "trusts `follows_to`), and refuses the others for that reason, trusting nothing new.",
                "pinned": {"keys": [retired.public_entry().to_dict()]},
                "cases": [
                    {
                        "name": name,
                        "about": about,
                        "statement": statement.to_dict(),
                        "problem": problem,
                        "follows_to": [retired.key_id, current.key_id]
                        if problem is None
                        else [retired.key_id],
                    }
                    for name, (statement, problem, about) in forged_rotations.items()
                ],
            },
            indent=2,
        )
        + "\n"
    ).encode()
    document = {**keys.to_dict(), "rotations": [rotation.to_dict()]}
    files["keys.json"] = (json.dumps(document, indent=2) + "\n").encode()
    files["vectors.json"] = (json.dumps(statement, indent=2) + "\n").encode()
    return files


def main() -> int:
    VECTORS.mkdir(parents=True, exist_ok=True)
    for name, data in vectors().items():
        (VECTORS / name).write_bytes(data)
    print(f"wrote {len(vectors())} files to {VECTORS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
