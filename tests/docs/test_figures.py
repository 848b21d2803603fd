"""The documentation's figures: every placeholder names a figure, every figure is on a page, the
charts draw the committed benchmark data, and the data files come from the benchmarks' results
(the built site's figures: ``test_site.py``, on its one build)."""

from __future__ import annotations

import json

import pytest

from .examples import DOCS, ROOT
from .figure_pages import drawn, figure_data, figures, placeholders


def test_every_placeholder_names_a_figure_and_every_figure_is_on_a_page() -> None:
    asked = placeholders()
    assert set(asked) <= set(figures.FIGURES), sorted(set(asked) - set(figures.FIGURES))
    assert set(figures.FIGURES) <= set(asked), sorted(set(figures.FIGURES) - set(asked))


def test_at_least_six_figures_are_drawn_from_benchmark_data() -> None:
    sourced = {name for name, draw in figures.FIGURES.items() if draw()[2] is not None}
    assert len(sourced) >= 6, sorted(sourced)


@pytest.mark.parametrize("name", sorted(figures.FIGURES))
def test_a_figure_is_inline_svg_with_its_caption(name: str) -> None:
    html = drawn(name)
    assert html.startswith(f'<figure class="privstream-figure" id="figure-{name}"><svg')
    assert html.count("<svg") == 1 and "<figcaption>" in html and "<?xml" not in html
    assert figures.figure(name) == html  # the same bytes on every build: drawn again


def test_the_charts_draw_the_committed_data() -> None:
    """Names read from the data files appear as text in the drawings (SVG text is kept as text)."""
    real = json.loads((DOCS / "data" / "real-data.json").read_text())["result"]
    assert all(name in drawn("real-data") for name in real["offline"])
    assert all(name in drawn("online-default") for name in real["online_gap_to_river_best"])
    sanitizers = json.loads((DOCS / "data" / "sanitizers.json").read_text())["result"]
    assert all(name in drawn("sanitizers") for name in sanitizers["vs_epsilon"])
    curves = json.loads((DOCS / "data" / "learning-curves.json").read_text())["result"]
    assert all(cls in drawn("learning-curves") for cls in curves)


def test_every_data_file_names_the_benchmark_that_wrote_it() -> None:
    for path in sorted((DOCS / "data").glob("*.json")):
        document = json.loads(path.read_text())
        script = document["command"].split()[0]
        assert (ROOT / script).is_file(), f"{path.name}: {script}"
        assert path.stem in figure_data.COMMANDS and figure_data.COMMANDS[path.stem] == document["command"]


def test_the_extracts_keep_what_the_figures_draw() -> None:
    gs = {
        "gs_curve": {
            "thresholds:8": {"generic": [{"n": 10, "error_mean": 0.5}, {"n": 20, "error_mean": 0.1}]}
        }
    }
    assert figure_data.learning_curves(gs) == {"thresholds:8": {"generic": [[10, 0.5], [20, 0.1]]}}
    rows = [
        {"data": "bimodal", "bits": 16, "epsilon": 1.0, "hierarchical": {"thresholds_max": 0.01}, "mwem": {}},
        {"data": "skewed", "bits": 16, "epsilon": 1.0, "hierarchical": {"thresholds_max": 0.5}},
    ]
    assert figure_data.sanitizers({"vs_epsilon": rows, "vs_n": []})["vs_epsilon"] == {
        "hierarchical": [[1.0, 0.01]]
    }
    lines = [
        {"stream": "separable", "d": 2, "learner": "perceptron", "mistakes": 3, "margin_bound": 9},
        {"stream": "noisy", "d": 2, "learner": "perceptron", "mistakes": 90, "margin_bound": 9},
    ]
    assert figure_data.online_mistakes(lines) == {
        "rows": [{"d": 2, "learner": "perceptron", "mistakes": 3, "bound": 9}]
    }


def test_an_unknown_figure_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="release-tree"):
        figures.figure("no-such-figure")
