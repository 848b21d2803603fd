"""The contract every registered learner, vector learner and sanitizer keeps (River's ``check_estimator``).

:func:`check_algorithm` runs every check on one registered algorithm, a built-in or a third
party's; the test suite runs it over the whole registry. The checks:

* ``release_matches_schema``: the release the service publishes, and the one the offline CLI
  prints, validate against the committed JSON Schema (``privstream/schemas/json/``);
* ``certificate_has_design_fields``: the certificate carries every field the privacy model lists
  (:data:`CERTIFICATE_FIELDS`; the ones no release carries yet are in
  :data:`CERTIFICATE_FIELDS_TO_COME`, and the check fails the day one of them appears, so it
  moves over);
* ``cli_matches_service``: ``privstream learn``/``sanitize --seed S`` and the release agent (the
  policy built by the service from equivalent settings, the same seed) release the same
  hypothesis or distribution, with certificates equal field by field but for the frame each
  states (:data:`SERVICE_FRAME`: a file, or a node and its ledger entry); both are built by
  :func:`privstream.agents.certificates.build_release`;
* ``audit_spec_registered``: the audit registry has a spec under the algorithm's own name, with
  broken variants; ``audit_holds``: the spec's exact law (if any) is within its claim, the
  empirical audit passes at the claim and catches every broken variant;
* ``predicts_scalars_and_arrays`` (learners): the published hypothesis, read back by the SDK,
  predicts one point and an array of points, consistently; ``answers_queries`` (sanitizers): the
  published distribution answers a query of the class and is scored on an array of points;
* ``zero_examples_released``: a window of zero examples is released like any other, through the
  release agent, and validates against the schema;
* ``timing_inputs_run``: the public inputs a publication slot is timed on run, within the charge.

The schema checks need ``jsonschema`` (``pip install privstream[test]``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any

import numpy as np

from privstream.learning import algorithms as registry
from privstream.learning.audit import AUDITS, audit_spec
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.testing.releases import (
    CLASS_SPEC,
    FEATURES,
    Algorithm,
    Kind,
    cli_release,
    empty_window_release,
    service_policy,
    service_release,
)

#: "Every release carries its certificate": each item the privacy model lists -> its certificate key.
#: On a count window at the example level (the contract's), none of them may be null, except
#: :data:`NULL_MEANS_NO_THEOREM`.
CERTIFICATE_FIELDS: dict[str, str] = {
    "mechanism": "mechanism",
    "ε": "epsilon",
    "δ": "delta",
    "neighbouring relation": "neighbouring_relation",
    "privacy unit": "privacy_unit",
    "window or node": "window",
    "sample size (where public)": "sample_size",
    "ledger entry id": "ledger_entry_id",
    "parameters": "parameters",
    "library version": "library_version",
    "whether the accuracy guarantee of the paper holds": "accuracy_guarantee_holds",
    "whether privacy is information-theoretic or computational": "privacy",
}

#: ``accuracy_guarantee_holds`` is null when no accuracy theorem can be decided at a public n: the
#: universally consistent vector learners have no rate (VectorLearnerResult).
NULL_MEANS_NO_THEOREM = {"accuracy_guarantee_holds"}

#: The §4 items no certificate carries yet, with the key each is expected under: they land with
#: (the release tree's node and the lifetime bound).
CERTIFICATE_FIELDS_TO_COME: dict[str, str] = {
    "lifetime bound (with the rule that gives it)": "lifetime_bound",
    "level and range of the release (its node)": "node",
}


def _schema(algorithm: Algorithm) -> dict[str, Any]:
    name = "sanitized_release" if algorithm.kind == "sanitizer" else "hypothesis_release"
    text = resources.files("privstream.schemas").joinpath(f"json/{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _product(release: dict[str, Any]) -> Any:
    return release["distribution"] if "distribution" in release else release["hypothesis"]


# -- the checks --------------------------------------------------------------------------------


def _schema_problem(instance: Any, schema: dict[str, Any]) -> str | None:
    import jsonschema  # type: ignore[import-untyped]

    try:
        jsonschema.validate(instance, schema)
    except jsonschema.ValidationError as exc:
        return str(exc.message)
    return None


def release_matches_schema(algorithm: Algorithm) -> None:
    schema = _schema(algorithm)
    for made_by, body in (("service", service_release(algorithm)), ("cli", cli_release(algorithm))):
        problem = _schema_problem(json.loads(body), schema)
        if problem is not None:
            raise AssertionError(f"the {made_by}'s release breaks its schema: {problem}")


def certificate_has_design_fields(algorithm: Algorithm) -> None:
    certificate = json.loads(service_release(algorithm))["certificate"]
    missing = [
        item
        for item, key in CERTIFICATE_FIELDS.items()
        if key not in certificate or (certificate[key] is None and key not in NULL_MEANS_NO_THEOREM)
    ]
    if missing:
        raise AssertionError(f"the certificate lacks {missing}")
    landed = [item for item, key in CERTIFICATE_FIELDS_TO_COME.items() if key in certificate]
    if landed:
        raise AssertionError(
            f"{landed} landed: move them from CERTIFICATE_FIELDS_TO_COME to CERTIFICATE_FIELDS"
        )


#: The certificate fields that state where a release comes from: a file (the CLI) or a node of a
#: stream, its ledger entry, budget and schedule (the service). Every other field must agree.
SERVICE_FRAME = {
    "window",
    "ledger_entry_id",
    "ledger_id",
    "ledger_epoch",
    "composition",
    "level",
    "lifetime",
    "publication",
    "epsilon_budget_remaining",
    "delta_budget_remaining",
}
#: The service's input cap and its accounting rule (the CLI reads the whole file).
SERVICE_PARAMETERS = {"max_node_examples", "cap_rule", "user_charge_rule"}


def cli_matches_service(algorithm: Algorithm) -> None:
    cli, service = json.loads(cli_release(algorithm)), json.loads(service_release(algorithm))
    if _product(cli) != _product(service):
        raise AssertionError("the CLI and the service released different outputs")
    for key in ("hypothesis_class", "labelled"):
        if cli.get(key) != service.get(key):
            raise AssertionError(f"the CLI and the service differ in {key}")
    a, b = cli["certificate"], service["certificate"]
    # Field by field: every field but the frame each states (a file, or a node and its ledger entry)
    if a.keys() != b.keys():
        raise AssertionError(f"certificate fields differ: {sorted(a.keys() ^ b.keys())}")
    for key in sorted(a.keys() - SERVICE_FRAME):
        if key == "parameters":
            continue
        if a[key] != b[key]:
            raise AssertionError(f"certificate {key}: CLI {a[key]!r}, service {b[key]!r}")
    pa, pb = a["parameters"], b["parameters"]
    if pa.keys() - SERVICE_PARAMETERS != pb.keys() - SERVICE_PARAMETERS:
        raise AssertionError("parameter names differ")
    differing = sorted(k for k in pa.keys() - SERVICE_PARAMETERS if pa[k] != pb[k])
    if differing:
        raise AssertionError(f"the CLI's parameters {differing} differ in the service's release")


def audit_spec_registered(algorithm: Algorithm) -> None:
    if algorithm.name not in AUDITS:
        raise AssertionError(f"no audit spec named {algorithm.name!r} in learning/audit/registry.py")
    spec = audit_spec(algorithm.name)
    if spec.name != algorithm.name:
        raise AssertionError(f"the audit spec under {algorithm.name!r} is named {spec.name!r}")
    if not spec.broken:
        raise AssertionError(
            "an audit spec needs broken variants (positive controls) that the audit must catch"
        )


def predicts_scalars_and_arrays(algorithm: Algorithm) -> None:
    from privstream.stream_app.sdk import Release

    release = Release.from_json(service_release(algorithm))
    if algorithm.kind == "vector-learner":
        points: Any = np.random.default_rng(0).random((5, FEATURES))
        one: Any = points[0].tolist()
    else:
        points = np.arange(parse_class_spec(CLASS_SPEC).domain_size)
        one = int(points[0])
    labels = release.predict(points)
    if not (isinstance(labels, np.ndarray) and labels.shape == (len(points),)):
        raise AssertionError("an array of points is predicted as an array of as many labels")
    if not (set(labels.tolist()) <= {0, 1}):
        raise AssertionError("the predicted labels are 0 or 1")
    label = release.predict(one)
    if not (label in (0, 1) and label == labels[0]):
        raise AssertionError("one point is predicted as the label 0 or 1 its array predicts")
    # The client evaluates the released function exactly as the service's own model does.
    served = release.hypothesis_dict
    if algorithm.kind == "vector-learner":
        from privstream.learning.private_learners.vector_base import vector_model_from_dict

        if not np.array_equal(labels, vector_model_from_dict(served).predict(points)):
            raise AssertionError("the SDK predicts as the service's own model does")
    else:
        from privstream.learning.hypotheses import hypothesis_from_dict

        if not np.array_equal(labels, hypothesis_from_dict(served).predict(points)):
            raise AssertionError("the SDK predicts as the service's own hypothesis does")


def answers_queries(algorithm: Algorithm) -> None:
    from privstream.stream_app.sdk import SanitizedView

    view = SanitizedView.from_json(service_release(algorithm))
    hclass = parse_class_spec(CLASS_SPEC)
    answers = [view.answer(hclass.hypothesis(i)) for i in range(hclass.size)]
    if not all(0.0 <= a <= 1.0 for a in answers):
        raise AssertionError("every answer to a query of the class is in [0, 1]")
    points = np.arange(hclass.domain_size)
    worst, mean = view.errors_on(points, (points % 2).astype(np.uint8))
    if not (0.0 <= mean <= worst <= 1.0):
        raise AssertionError(f"errors on the points: mean {mean}, worst {worst} (0 <= mean <= worst <= 1)")


def timing_inputs_run(algorithm: Algorithm) -> None:
    """The public worst-case inputs a slot is timed on (``privstream.agents.releases.workload``:
    the default's stand-in and the planning's runtime inputs at the node's largest size) run, and
    each result's guarantee is within the charge."""
    from privstream.agents.releases.policy import required_guarantee
    from privstream.agents.releases.workload import slot_workload
    from privstream.learning.guarantees import shortfall

    policy = service_policy(algorithm)
    for product, (default, fits) in zip(policy.products, slot_workload(policy), strict=True):
        need = required_guarantee(policy, *product.cost(policy.top_level))
        for fit in (default, *fits):
            problem = shortfall(need, fit().privacy_guarantee)
            if problem is not None:
                raise AssertionError(f"{product.key} on a timing input: {problem}")


def audit_holds(algorithm: Algorithm) -> None:
    """The algorithm's audit spec: its exact law (where it has one) within the claim both ways, the
    empirical audit passes at the claim, and every broken variant is caught (``spec.samples`` runs
    each; the built-ins' tuned runs are in tests/contract/test_audits.py)."""
    from privstream.learning.audit import hockey_stick, run_audit

    spec = audit_spec(algorithm.name)
    if spec.exact is not None:
        p, q = spec.exact()
        for a, b in ((p, q), (q, p)):
            if not (hockey_stick(a, b, spec.claimed.epsilon) <= spec.claimed.delta + 1e-12):
                raise AssertionError(
                    f"the exact law breaks the claim ε={spec.claimed.epsilon}, δ={spec.claimed.delta}"
                )
    result = run_audit(spec, seed=1)
    if not result.passed:
        raise AssertionError(result.summary())
    for variant in sorted(spec.broken):
        caught = run_audit(spec, variant=variant, seed=2)
        if caught.passed:
            raise AssertionError(f"the audit misses the broken variant {variant}: {caught.summary()}")


def zero_examples_released(algorithm: Algorithm) -> None:
    release = json.loads(empty_window_release(algorithm))
    problem = _schema_problem(release, _schema(algorithm))
    if problem is not None:
        raise AssertionError(f"the release of zero examples breaks its schema: {problem}")
    certificate = release["certificate"]
    if not (certificate["window"]["kind"] == "time" and certificate["sample_size"] is None):
        raise AssertionError("the release of zero examples certifies a time window of private size")


CHECKS: dict[str, Callable[[Algorithm], None]] = {
    check.__name__: check
    for check in (
        release_matches_schema,
        certificate_has_design_fields,
        cli_matches_service,
        audit_spec_registered,
        predicts_scalars_and_arrays,
        answers_queries,
        zero_examples_released,
        timing_inputs_run,
        audit_holds,
    )
}


def applies(check: str, algorithm: Algorithm) -> bool:
    """``predicts_scalars_and_arrays`` is for learners, ``answers_queries`` for sanitizers."""
    if check == "predicts_scalars_and_arrays":
        return algorithm.kind != "sanitizer"
    if check == "answers_queries":
        return algorithm.kind == "sanitizer"
    return True


def check_algorithm(kind: Kind, name: str, *, skip: Iterable[str] = ()) -> list[str]:
    """Run every contract check (:data:`CHECKS`) that applies to the algorithm registered as
    ``name`` of ``kind``; raise :class:`AssertionError` naming the first that fails. Returns the
    names of the checks run. ``skip``: checks not to run (e.g. ``audit_holds`` when its runs are
    made elsewhere).

    Register the algorithm first (an entry point of the group ``privstream.algorithms``, see
    :mod:`privstream.learning.algorithms`), with an audit spec under the same name.
    """
    if name not in registry.names(kind):
        raise AssertionError(f"no {kind} is registered as {name!r} (entry point '{kind}.{name}')")
    algorithm = Algorithm(kind, name)
    ran = []
    for check, run in CHECKS.items():
        if check in skip or not applies(check, algorithm):
            continue
        try:
            run(algorithm)
        except AssertionError as exc:
            raise AssertionError(f"{algorithm.id} fails {check}: {exc}") from exc
        ran.append(check)
    return ran
