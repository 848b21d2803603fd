"""The documentation's figures, drawn when the site is built (a MkDocs hook; matplotlib, SVG).

A page asks for a figure with an HTML comment on a line of its own, ``<!-- figure: NAME -->``; the
hook replaces it with the figure as inline SVG and a caption naming what it is drawn from. Charts
read the benchmark results committed in ``docs/data/`` (each file names the command that wrote
it: run it again and rebuild to redraw); the diagrams of the release tree and the data flow are
drawn from the library's own definitions. Nothing drawn is committed.

Every name in :data:`FIGURES` must be used by some page and every placeholder must name a figure
(``tests/docs/test_figures.py``).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

DATA = Path(__file__).resolve().parent.parent / "data"
PLACEHOLDER = re.compile(r"<!--\s*figure:\s*([a-z0-9-]+)\s*-->")
COLOURS = ["#3f51b5", "#e65100", "#2e7d32", "#6a1b9a", "#00838f", "#c62828", "#5d4037"]

plt.rcParams.update(
    {
        "svg.fonttype": "none",  # text stays text: searchable, and readable by the tests
        "svg.hashsalt": "privstream",  # the same SVG on every build
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "figure.dpi": 100,
    }
)


def data(name: str) -> dict[str, Any]:
    """A committed benchmark result: ``{"command": ..., "result": ...}``."""
    loaded: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return loaded


def _svg(fig: Any) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg") :]


def _caption(text: str, source: str | None) -> str:
    if source is None:
        return text
    command = data(source)["command"]
    return f"{text} Drawn from <code>docs/data/{source}.json</code>, from <code>{command}</code>."


# -- the diagrams ------------------------------------------------------------------------------------


def release_tree() -> tuple[Any, str, str | None]:
    from privstream.agents.windows import completed_nodes, node_windows

    windows, top = 8, 3
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for level in range(top + 1):
        for index in range(windows >> level):
            span = node_windows(level, index)
            ax.add_patch(
                Rectangle(
                    (span.start + 0.05, level + 0.1), len(span) - 0.1, 0.8, color=COLOURS[level], alpha=0.75
                )
            )
            ax.text(
                span.start + len(span) / 2,
                level + 0.5,
                f"({level}, {index})",
                ha="center",
                va="center",
                color="white",
            )
    for window in range(windows):  # the moment each node is released: when its last window closes
        for level, _ in [(0, window), *completed_nodes(window, top)]:
            ax.plot(window + 1, level + 0.5, marker=">", color="black", markersize=5)
    ax.set_xlim(0, windows + 0.3)
    ax.set_ylim(0, top + 1)
    ax.set_yticks([level + 0.5 for level in range(top + 1)], [f"level {level}" for level in range(top + 1)])
    ax.set_xticks(range(windows + 1))
    ax.set_xlabel("windows closed")
    ax.grid(False)
    return (
        fig,
        "The release tree with top level 3 over 8 windows: node (j, m) learns from windows "
        "m·2^j to (m+1)·2^j − 1 and is released (▸) when its last window closes. Every example lies in "
        "one node per level, so its lifetime cost is the sum of the levels' ε.",
        None,
    )


_FLOW_BOXES = {  # name: (column, row, label, public)
    "producers": (0, 1, "producers", False),
    "examples": (1, 1, "examples\ntopic", False),
    "ingest": (2, 1, "ingest\n(validation)", False),
    "dlq": (2, 2, "examples.dlq", False),
    "online": (3, 2, "online learner", False),
    "predictions": (4, 2, "predictions", False),
    "store": (3, 1, "window store", False),
    "ledger": (3, 0, "privacy ledger", False),
    "release": (4, 1, "private learner,\nsanitizer", False),
    "public": (5, 1, "hypotheses,\nsanitized (signed)", True),
    "subscribers": (6, 1, "subscribers\n(privstream-client)", True),
}
_FLOW_ARROWS = [
    ("producers", "examples"),
    ("examples", "ingest"),
    ("ingest", "dlq"),
    ("ingest", "online"),
    ("online", "predictions"),
    ("ingest", "store"),
    ("store", "release"),
    ("ledger", "release"),
    ("release", "public"),
    ("public", "subscribers"),
]
_STEP_X, _STEP_Y, _WIDTH, _HEIGHT = 2.35, 1.3, 2.05, 0.8


def _edge(column: int, row: int, towards: tuple[int, int]) -> tuple[float, float]:
    """The middle of the box's side that faces ``towards`` (right/left first, then top/bottom)."""
    x, y = column * _STEP_X, row * _STEP_Y
    dx, dy = towards[0] - column, towards[1] - row
    if dx:
        return (x + _WIDTH if dx > 0 else x), y + _HEIGHT / 2
    return x + _WIDTH / 2, (y + _HEIGHT if dy > 0 else y)


def data_flow() -> tuple[Any, str, str | None]:
    fig, ax = plt.subplots(figsize=(11, 3.4))
    for column, row, label, public in _FLOW_BOXES.values():
        ax.add_patch(
            FancyBboxPatch(
                (column * _STEP_X, row * _STEP_Y),
                _WIDTH,
                _HEIGHT,
                boxstyle="round,pad=0.04",
                facecolor="#e8f5e9" if public else "#e8eaf6",
                edgecolor=COLOURS[2] if public else COLOURS[0],
            )
        )
        ax.text(
            column * _STEP_X + _WIDTH / 2,
            row * _STEP_Y + _HEIGHT / 2,
            label,
            ha="center",
            va="center",
            fontsize=9,
        )
    for start, end in _FLOW_ARROWS:
        (c0, r0, *_), (c1, r1, *_) = _FLOW_BOXES[start], _FLOW_BOXES[end]
        ax.add_patch(
            FancyArrowPatch(
                _edge(c0, r0, (c1, r1)),
                _edge(c1, r1, (c0, r0)),
                arrowstyle="-|>",
                mutation_scale=12,
                shrinkA=2,
                shrinkB=2,
                color="#424242",
            )
        )
    ax.set_xlim(-0.2, 6 * _STEP_X + _WIDTH + 0.2)
    ax.set_ylim(-0.2, 2 * _STEP_Y + _HEIGHT + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    return (
        fig,
        "The data flow: examples are validated once, learned online (predictions are trusted, not "
        "public) and stored in windows; a window's node is charged in the ledger before a private "
        "learner or sanitizer reads it, and only the signed releases (green) are public.",
        None,
    )


# -- the charts ---------------------------------------------------------------------------------------


def _lines(ax: Any, series: dict[str, list[list[float]]], **style: Any) -> None:
    for colour, (label, points) in zip(COLOURS, series.items(), strict=False):
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, marker="o", markersize=3, label=label, color=colour, **style)


def release_tree_gain() -> tuple[Any, str, str | None]:
    result = data("release-tree-gain")["result"]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    chosen = {
        f"top level {top}": result["curves"][top] for top in ("0", "2", "4", "6") if top in result["curves"]
    }
    floor = 1e-5  # an exact release (excess 0) drawn at the axis' floor
    _lines(ax, {k: [[x, max(y, floor)] for x, y in v] for k, v in chosen.items()}, linewidth=1.2)
    ax.set_yscale("log")
    ax.set_xlabel("examples seen")
    ax.set_ylabel("excess error of the best release")
    ax.legend(frameon=False)
    return (
        fig,
        f"The release tree's gain: the best release's excess error (over the best threshold) as a "
        f"stream of count windows of {result['window_size']:,} examples goes on, every example's "
        f"lifetime ε = {result['epsilon']:g}, for top levels 0 to 6 (the generic learner on "
        "thresholds:65536, 5% label noise). Higher levels learn from more examples at a smaller ε each.",
        "release-tree-gain",
    )


def learning_curves() -> tuple[Any, str, str | None]:
    result = data("learning-curves")["result"]
    fig, axes = plt.subplots(1, len(result), figsize=(10, 3.2), sharey=True)
    for ax, (cls, by_learner) in zip(axes, result.items(), strict=True):
        _lines(ax, {k: [[x, max(y, 1e-4)] for x, y in v] for k, v in by_learner.items()})
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(cls)
        ax.set_xlabel("n (examples)")
    axes[0].set_ylabel("mean population error")
    axes[0].legend(frameon=False)
    return (
        fig,
        "Learning curves: the mean exact population error of the generic and the global-stability "
        "learners against n, at ε = 1, δ = 10⁻⁶ (α = β = 0.1; an error of 0 is drawn at 10⁻⁴).",
        "learning-curves",
    )


def sanitizers() -> tuple[Any, str, str | None]:
    result = data("sanitizers")["result"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
    _lines(left, result["vs_epsilon"])
    _lines(right, result["vs_n"])
    for ax, label in ((left, "ε (n = 10,000)"), (right, "n (ε = 1)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(label)
    left.set_ylabel("largest error over all thresholds")
    left.legend(frameon=False)
    return (
        fig,
        "Sanitizers against ε and n: the largest error over every threshold query of the released "
        "distribution (bimodal data on 2¹⁶ points), beside a Laplace histogram of the same ε.",
        "sanitizers",
    )


def real_data() -> tuple[Any, str, str | None]:
    result = data("real-data")["result"]
    names = list(result["offline"])
    fig, ax = plt.subplots(figsize=(10, 3.6))
    columns = ["non-private"] + [
        f"{who}@{eps:g}" for eps in result["epsilons"] for who in ("privstream", "diffprivlib")
    ]
    width = 0.8 / len(columns)
    for i, (colour, column) in enumerate(zip(COLOURS, columns, strict=False)):
        xs = [j + (i - (len(columns) - 1) / 2) * width for j in range(len(names))]
        ax.bar(
            xs,
            [result["offline"][n][column] for n in names],
            width,
            label=column.replace("@", " ε="),
            color=colour,
        )
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("test accuracy")
    ax.legend(frameon=False, ncol=len(columns), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 1.15))
    return (
        fig,
        "Private releases on real data sets: the best of this project's learners and the best of "
        "diffprivlib's at each ε, beside non-private logistic regression (80/20 splits, mean of runs).",
        "real-data",
    )


def online_default() -> tuple[Any, str, str | None]:
    result = data("real-data")["result"]["online_gap_to_river_best"]
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for j, gaps in enumerate(result.values()):
        ax.scatter([j] * len(gaps), gaps, color=COLOURS[0], s=14)
    ax.axhline(-0.01, color=COLOURS[5], linestyle="--", linewidth=1, label="0.01 below River's best")
    ax.axhline(0, color="#616161", linewidth=0.8)
    ax.set_xticks(range(len(result)), list(result), rotation=20)
    ax.set_ylabel("accuracy − River's best")
    ax.legend(frameon=False, loc="lower right")
    return (
        fig,
        "The online default on real streams: its prequential accuracy minus the best of River's "
        "classifiers on the same order, one dot per shuffled order of each data set.",
        "real-data",
    )


def online_mistakes() -> tuple[Any, str, str | None]:
    rows = data("online-mistakes")["result"]["rows"]
    dims = sorted({r["d"] for r in rows})
    learners = sorted({r["learner"] for r in rows})
    fig, ax = plt.subplots(figsize=(9, 3.4))
    width = 0.8 / (len(learners) + 1)
    for i, (colour, learner) in enumerate(zip(COLOURS, learners, strict=False)):
        heights = [next(r["mistakes"] for r in rows if r["d"] == d and r["learner"] == learner) for d in dims]
        ax.bar([j + i * width for j in range(len(dims))], heights, width, label=learner, color=colour)
    bounds = [next(r["bound"] for r in rows if r["d"] == d) for d in dims]
    ax.bar(
        [j + len(learners) * width for j in range(len(dims))],
        bounds,
        width,
        label="bound (d+1)/γ²",
        color="#bdbdbd",
    )
    ax.set_yscale("log")
    ax.set_xticks([j + len(learners) * width / 2 for j in range(len(dims))], [f"d = {d}" for d in dims])
    ax.set_ylabel("mistakes in 50,000 examples")
    ax.legend(frameon=False, fontsize=8, ncol=3)
    return (
        fig,
        "Online mistakes against the Perceptron's bound: each online learner on a stream separable with "
        "margin γ = 0.05 (features scaled to [-1, 1]), its mistakes beside (d + 1)/γ².",
        "online-mistakes",
    )


FIGURES: dict[str, Callable[[], tuple[Any, str, str | None]]] = {
    "release-tree": release_tree,
    "data-flow": data_flow,
    "release-tree-gain": release_tree_gain,
    "learning-curves": learning_curves,
    "sanitizers": sanitizers,
    "real-data": real_data,
    "online-default": online_default,
    "online-mistakes": online_mistakes,
}


def figure(name: str) -> str:
    """The figure ``name`` as HTML: inline SVG and its caption."""
    if name not in FIGURES:
        raise KeyError(f"no figure {name!r}; figures: {', '.join(sorted(FIGURES))}")
    fig, caption, source = FIGURES[name]()
    return (
        f'<figure class="privstream-figure" id="figure-{name}">{_svg(fig)}'
        f"<figcaption>{_caption(caption, source)}</figcaption></figure>"
    )


def on_page_content(html: str, **_: Any) -> str:
    """The MkDocs hook: each placeholder replaced by its figure."""
    return PLACEHOLDER.sub(lambda match: figure(match.group(1)), html)
