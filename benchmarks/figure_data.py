"""The documentation's figure data: the parts of benchmark results the figures draw, in docs/data/.

Run the benchmarks (each writes its full JSON), then this script on their results:

    .venv/bin/python benchmarks/bench_release_tree.py --runs 2 --only thresholds --out R
    .venv/bin/python benchmarks/bench_private_learners.py --only gs-curve --runs 5 --out P
    .venv/bin/python benchmarks/bench_sanitizers.py --seeds 2 --peer-seeds 1 --sizes 1000 10000 100000 --out S
    .venv/bin/python benchmarks/bench_real_data.py --runs 2 > D.json
    .venv/bin/python benchmarks/bench_online_vectors.py --examples 50000 > V.json
    .venv/bin/python benchmarks/figure_data.py --release-tree R/bench_release_tree.json \\
        --private-learners P/bench_private_learners.json --sanitizers S/bench_sanitizers.json \\
        --real-data D.json --online-vectors V.json

Each file written holds ``command`` (the benchmark run it comes from, shown in the figure's
caption) and ``result`` (only what the figure draws). Rebuild the site to redraw.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "docs" / "data"

COMMANDS = {
    "release-tree-gain": "benchmarks/bench_release_tree.py --runs 2 --only thresholds",
    "learning-curves": "benchmarks/bench_private_learners.py --only gs-curve --runs 5",
    "sanitizers": "benchmarks/bench_sanitizers.py --seeds 2 --peer-seeds 1 --sizes 1000 10000 100000",
    "real-data": "benchmarks/bench_real_data.py --runs 2",
    "online-mistakes": "benchmarks/bench_online_vectors.py --examples 50000",
}


def release_tree_gain(result: dict[str, Any]) -> dict[str, Any]:
    """The best release's excess error against the examples seen, per top level L (the
    benchmark's curve: at each window's close, the newest release of the highest level)."""
    task = result["tasks"]["thresholds"]["public"]
    curves = {
        top: [[p["examples_seen"], p["mean"]] for p in tree["curve"]] for top, tree in task["trees"].items()
    }
    return {
        "epsilon": result["config"]["epsilon"],
        "window_size": result["config"]["window_size"],
        "curves": curves,
    }


def learning_curves(result: dict[str, Any]) -> dict[str, Any]:
    """Mean error against n of the generic and global-stability learners, per class."""
    return {
        cls: {
            learner: [[row["n"], row["error_mean"]] for row in rows] for learner, rows in by_learner.items()
        }
        for cls, by_learner in result["gs_curve"].items()
    }


SANITIZERS = ("hierarchical", "mwem", "fooling", "laplace_histogram")


def sanitizers(result: dict[str, Any]) -> dict[str, Any]:
    """Each sanitizer's largest threshold-query error against ε (bimodal data, 2^16) and against n."""

    def series(rows: list[dict[str, Any]], x: str) -> dict[str, list[list[float]]]:
        out: dict[str, list[list[float]]] = {}
        for row in rows:
            if row["data"] != "bimodal" or row["bits"] != 16:
                continue
            for name in SANITIZERS:
                error = row.get(name, {}).get("thresholds_max")
                if error is not None:
                    out.setdefault(name, []).append([row[x], error])
        return out

    return {"vs_epsilon": series(result["vs_epsilon"], "epsilon"), "vs_n": series(result["vs_n"], "n")}


def real_data(result: dict[str, Any]) -> dict[str, Any]:
    """Test accuracy per data set: the best private release, diffprivlib's best, non-private; and
    each online learner's gap to River's best per order."""
    offline = {}
    for name, table in result["offline"].items():
        accuracy = table["accuracy"]
        row: dict[str, float] = {"non-private": accuracy["logistic_regression"]}
        for eps in result["epsilons"]:
            ours = [
                v for k, v in accuracy.items() if k.endswith(f"@{eps:g}") and not k.startswith("diffprivlib")
            ]
            peers = [
                v for k, v in accuracy.items() if k.endswith(f"@{eps:g}") and k.startswith("diffprivlib")
            ]
            row[f"privstream@{eps:g}"], row[f"diffprivlib@{eps:g}"] = max(ours), max(peers)
        offline[name] = row
    online = {
        name: [
            a - b
            for a, b in zip(
                table["accuracy"][f"privstream_{table['default']}"], table["river_best"], strict=True
            )
        ]
        for name, table in result["online"].items()
    }
    return {"epsilons": result["epsilons"], "offline": offline, "online_gap_to_river_best": online}


def online_mistakes(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Mistakes of each online learner on separable streams, against the Perceptron's bound."""
    rows = [r for r in lines if r.get("stream") == "separable" and r.get("margin_bound")]
    return {
        "rows": [
            {"d": r["d"], "learner": r["learner"], "mistakes": r["mistakes"], "bound": r["margin_bound"]}
            for r in rows
        ]
    }


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--release-tree", type=Path)
    parser.add_argument("--private-learners", type=Path)
    parser.add_argument("--sanitizers", type=Path)
    parser.add_argument("--real-data", type=Path)
    parser.add_argument("--online-vectors", type=Path)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    jobs: list[tuple[str, Path | None, Callable[[Any], dict[str, Any]], bool]] = [
        ("release-tree-gain", args.release_tree, release_tree_gain, False),
        ("learning-curves", args.private_learners, learning_curves, False),
        ("sanitizers", args.sanitizers, sanitizers, False),
        ("real-data", args.real_data, real_data, False),
        ("online-mistakes", args.online_vectors, online_mistakes, True),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    for name, path, extract, lines in jobs:
        if path is None:
            continue
        loaded = _json_lines(path) if lines else json.loads(path.read_text())
        document = {"command": COMMANDS[name], "result": extract(loaded)}
        (args.out / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
        print(f"wrote {args.out / f'{name}.json'}")


if __name__ == "__main__":
    main()
