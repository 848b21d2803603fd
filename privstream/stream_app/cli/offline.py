"""Offline commands: ``dims`` (dimensions of a class) and ``online`` (the SOA, or a vector stream's
online learner, over a file)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from privstream.stream_app.cli.common import CLASS_HELP, format_size


def register(subparsers: argparse._SubParsersAction) -> None:
    dims = subparsers.add_parser("dims", help="Littlestone, VC, threshold and dual dimensions of a class")
    dims.add_argument("hclass", metavar="CLASS", help=CLASS_HELP)
    dims.add_argument("--json", action="store_true", help="print one JSON object")
    dims.add_argument(
        "--witness",
        action="store_true",
        help="also print a shattered mistake tree of depth Ldim (finite or small classes)",
    )
    dims.set_defaults(handler=run_dims)

    online = subparsers.add_parser(
        "online", help="run the SOA (or, on feature vectors, the Perceptron) over a file of labelled examples"
    )
    online.add_argument(
        "hclass", metavar="CLASS", help=CLASS_HELP + "; halfspaces:D for D-feature vectors (needs --bounds)"
    )
    online.add_argument(
        "--examples",
        required=True,
        metavar="FILE",
        help="CSV with header x,y (feature vectors: feature columns and y) or JSON lines with fields x and y",
    )
    online.add_argument("--tie", type=int, choices=(0, 1), default=1, help="SOA tie rule (default 1)")
    online.add_argument(
        "--bounds",
        help="halfspaces:D: the public [lo, hi] of each feature, as JSON: [[0, 100], [0, 1], ...]",
    )
    online.add_argument(
        "--learner",
        default="auto",  # privstream.learning.online.DEFAULT_ONLINE_LEARNER, without importing numpy here
        help="halfspaces:D: auto (the service's default), perceptron, averaged-perceptron, "
        "second-order-perceptron, logistic, scaled-logistic, scaled-passive-aggressive, weighted-majority "
        "or block-vote",
    )
    online.add_argument(
        "--margin", type=float, help="halfspaces:D: the Perceptrons' margin γ (default 0.1): bound (D+1)/γ²"
    )
    online.add_argument("--json", action="store_true", help="print one JSON object")
    online.set_defaults(handler=run_online)


def run_dims(args: argparse.Namespace) -> int:
    from privstream.learning.dimensions import all_dimensions, witness_tree
    from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec

    cls = parse_class_spec(args.hclass)
    out = all_dimensions(cls)
    if args.witness:
        if isinstance(cls, FiniteClass):
            out["witness"] = witness_tree(cls)
        elif cls.size * cls.domain_size <= 10**6:
            out["witness"] = witness_tree(FiniteClass(cls.matrix(), spec=cls.spec))
        else:
            out["witness"] = None
            reason = "witness trees are built from the truth table, which is too large here"
            out.setdefault("reasons", {})["witness"] = reason
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"class:            {out['class']}")
    print(f"size:             {format_size(out['size'])}")
    print(f"domain:           {format_size(out['domain'])}")
    for key in ("littlestone", "vc", "threshold", "dual_littlestone", "dual_vc"):
        value = out[key]
        shown = format_size(value) if value is not None else f"unknown ({out['reasons'][key]})"
        print(f"{key + ':':<17} {shown}")
    if args.witness:
        print(f"witness:          {json.dumps(out['witness'])}")
    return 0


def run_online(args: argparse.Namespace) -> int:
    from privstream.stream_app.sources.synthetic import vector_dimension

    if vector_dimension(args.hclass) is not None:
        return run_online_vectors(args, vector_dimension(args.hclass) or 0)
    from privstream.learning.hypothesis_classes import parse_class_spec
    from privstream.learning.soa import SOA
    from privstream.stream_app.sources.files import read_examples

    cls = parse_class_spec(args.hclass)
    xs, ys = read_examples(args.examples)
    soa = SOA(cls, tie=args.tie)
    soa.learn_many(xs, ys)
    out: dict[str, Any] = {
        "class": cls.spec,
        "tie": soa.tie,
        "examples": soa.examples_seen,
        "mistakes": soa.mistakes,
        "mistake_bound": soa.mistake_bound,
        "realizable": soa.realizable,
        "final_predictor": soa.predictor().to_dict(),
    }
    if args.json:
        print(json.dumps(out))
        return 0
    verdict = "yes" if soa.realizable else "no (extended SOA: frozen predictor patched pointwise)"
    print(f"class:           {out['class']}")
    print(f"examples:        {out['examples']}")
    print(f"mistakes:        {out['mistakes']} (bound {out['mistake_bound']})")
    print(f"realizable:      {verdict}")
    print(f"final predictor: {_describe(out['final_predictor'])}")
    return 0


def _describe(h: dict[str, Any]) -> str:
    if h["kind"] == "runs":
        if not h["changes"]:
            return f"constant {h['first']} on [0, {h['domain']})"
        return f"{h['first']} at 0, flips at {', '.join(map(str, h['changes'][:20]))}" + (
            " ..." if len(h["changes"]) > 20 else ""
        )
    from privstream.learning.hypotheses import hypothesis_from_dict

    table = hypothesis_from_dict(h).truth_table()
    shown = "".join("1" if v else "0" for v in table[:128].tolist())
    return f"labels of 0..{min(h['domain'], 128) - 1}: {shown}" + (" ..." if h["domain"] > 128 else "")


def run_online_vectors(args: argparse.Namespace, d: int) -> int:
    """The stream's online learner over a file of feature vectors: what the service would predict."""
    from privstream.learning.online import make_online_learner
    from privstream.stream_app.sources.files import read_vector_stream_file

    if not args.bounds:
        raise ValueError("halfspaces:D needs --bounds '[[lo, hi], ...]': the features' public bounds")
    try:
        bounds = json.loads(args.bounds)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--bounds is not JSON: {exc.msg}") from None
    X, ys, names = read_vector_stream_file(args.examples)
    if X.shape[1] != d:
        raise ValueError(f"{args.examples}: {X.shape[1]} features, the class halfspaces:{d} has {d}")
    params = {} if args.margin is None else {"margin": args.margin}
    learner = make_online_learner(args.learner, bounds, **params)
    learner.learn_many(X, ys)
    weights, offset = learner.weights()
    out: dict[str, Any] = {
        "class": f"halfspaces:{d}",
        "learner": learner.name,
        "parameters": {p: getattr(learner, p) for p in type(learner)._params},
        "examples": learner.examples_seen,
        "mistakes": learner.mistakes,
        "mistake_bound": learner.mistake_bound,
        "margin_mistakes": learner.margin_mistakes,
        "margin_bound": learner.margin_bound,
        "realizable": learner.realizable,
        "weights": dict(zip(names, weights.tolist(), strict=True)),
        "offset": offset,
    }
    if args.json:
        print(json.dumps(out))
        return 0
    counted = f"{learner.margin_mistakes} Perceptron mistakes"
    verdict = {
        True: f"not disproved: {counted} <= (R/γ)² = {learner.margin_bound}",
        False: f"no: {counted} > (R/γ)² = {learner.margin_bound}, so no halfspace separates the "
        f"stream with margin {getattr(learner, 'margin', '')}",
        None: "not tested (this learner has no margin test)",
    }[learner.realizable]
    terms = " ".join(f"{w:+.4g}*{n}" for n, w in zip(names, weights.tolist(), strict=True))
    print(f"learner:         {learner.name} {out['parameters']}")
    print(f"examples:        {out['examples']}")
    bound = "" if learner.mistake_bound is None else f" (bound {learner.mistake_bound})"
    print(f"mistakes:        {out['mistakes']}{bound}")
    print(f"separable:       {verdict}")
    print(f"final rule:      1 when {terms} {offset:+.4g} >= 0")
    return 0
