"""``privstream bounds FILE --epsilon E`` through the CLI entry point: private bounds in column
order, the label left out, the cost stated; user errors in one line with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream.stream_app.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def table(tmp_path):
    gen = np.random.default_rng(0)
    age, income = gen.normal(40, 10, 5000), gen.exponential(2_000, 5000)
    path = tmp_path / "people.csv"
    path.write_text(
        "age,income,y\n"
        + "".join(f"{a:.2f},{i:.2f},{int(a > 40)}\n" for a, i in zip(age, income, strict=True))
    )
    return path, np.column_stack([age, income])


def test_bounds_are_printed_with_their_cost(capsys, table) -> None:
    path, X = table
    code, out, err = run(
        capsys,
        "bounds",
        str(path),
        "--epsilon",
        "4",
        "--range",
        "-10000",
        "10000",
        "--cells",
        "20000",
        "--seed",
        "1",
    )
    assert code == 0, err
    released = json.loads(out)
    assert released["features"] == ["age", "income"]  # the label y left out
    assert released["epsilon"] == 4.0 and released["delta"] == 0.0
    assert released["epsilon_per_quantile"] == 1.0 and released["composition"].startswith(
        "basic: 4 quantiles"
    )
    assert released["private"] is False  # a seed was given
    truth = np.quantile(X, [0.01, 0.99], axis=0).T
    for (lo, hi), (t_lo, t_hi) in zip(released["bounds"], truth, strict=True):
        assert lo < hi and abs(lo - t_lo) <= 3 and abs(hi - t_hi) <= 400
    assert set(released) == {
        "features",
        "bounds",
        "epsilon",
        "delta",
        "epsilon_per_quantile",
        "quantiles",
        "composition",
        "range",
        "cells",
        "mechanism",
        "private",
    }  # nothing else of the data


def test_the_release_is_random_without_a_seed(capsys, table) -> None:
    path, _ = table
    outs = set()
    for _ in range(3):
        code, out, _ = run(
            capsys, "bounds", str(path), "--epsilon", "0.5", "--range", "-10000", "10000", "--cells", "20000"
        )
        assert code == 0 and json.loads(out)["private"] is True
        outs.add(json.dumps(json.loads(out)["bounds"]))
    assert len(outs) > 1


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("a,y\nred,1\n", [], "line 2: a = 'red' is not a number"),
        ("a,y\n,1\n", [], "line 2: a = '' is not a number"),
        ("a,y\nnan,1\n", [], "not a finite number"),
        ("a,b\n1\n", [], "line 2: 1 cells, the header has 2"),
        ("y\n1\n", [], "no feature column"),
        ("a\n1\n", ["--range", "1", "0"], "--range must be finite with LO < HI"),
        ("a\n1\n", ["--quantile", "0.5"], "--quantile must be in (0, 0.5)"),
        ("a\n1\n", ["--epsilon", "0"], "--epsilon must be a positive number"),
        ("a,plan,y\n1,pro,1\n", ["--columns", "a,city"], "--columns: no column 'city' in its header"),
        ("a,plan,y\n1,pro,1\n", ["--columns", "a,a"], "--columns: name each column once"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(capsys, tmp_path, content, args, message) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    argv = ["bounds", str(path), "--epsilon", "1", "--range", "0", "10", *args]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("privstream bounds: error:") and message in err


def test_columns_pick_a_tabular_file_s_numeric_columns_in_their_order(capsys, tmp_path) -> None:
    gen = np.random.default_rng(1)
    age, spend = gen.uniform(20, 60, 4000), gen.uniform(0, 100, 4000)
    path = tmp_path / "customers.csv"
    path.write_text(
        "plan,age,city,spend,y\n"
        + "".join(f"pro,{a:.1f},paris,{s:.1f},1\n" for a, s in zip(age, spend, strict=True))
    )
    argv = ["bounds", str(path), "--epsilon", "4", "--range", "0", "200", "--quantile", "0.05"]
    code, out, err = run(capsys, *argv, "--columns", "spend,age", "--seed", "3")
    assert code == 0, err
    released = json.loads(out)
    assert released["features"] == ["spend", "age"]
    (s_lo, s_hi), (a_lo, a_hi) = released["bounds"]
    assert abs(s_lo - 5) < 6 and abs(s_hi - 95) < 6  # the 5% and 95% quantiles of U(0, 100)
    assert abs(a_lo - 22) < 6 and abs(a_hi - 58) < 6  # of U(20, 60)
    # without --columns the categorical columns are numbers it cannot read
    code, out, err = run(capsys, *argv)
    assert code == 2 and "plan = 'pro' is not a number" in err
