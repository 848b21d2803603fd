"""``privstream bench scale``: its figures from samples, its refusals, and one live run end to end."""

import json
import os
import subprocess
import sys

import pytest

from privstream.stream_app.bench.scale import children, metric_sum, phase_figures, rss_mib
from privstream.stream_app.cli import main


def test_the_figures_of_a_phase_come_from_its_samples():
    # 100 examples learned at 10/s from t=1, sent at 20/s; memory rises by 1 MiB a second.
    samples = [
        {
            "time": float(t),
            "learned": max(0, 10 * (t - 1)),
            "sent": min(100, 20 * t),
            "rss": 100 + t,
            "rss_all": 300 + 2 * t,
        }
        for t in range(12)
    ]
    figures = phase_figures(samples, 100)
    assert figures["rate"] == pytest.approx(10.0)  # from the last sample before the first learned one
    assert figures["seconds"] == pytest.approx(10.0)
    assert figures["backlog_max"] == max(s["sent"] - s["learned"] for s in samples) == 60
    # 20 % learned at t=3, the peak afterwards at t=11
    assert figures["rss_growth_after_20_percent_mib"] == pytest.approx(8.0)
    assert figures["rss_with_children_growth_after_20_percent_mib"] == pytest.approx(16.0)
    assert figures["rss_mib"]["20%"] == 103 and figures["rss_mib"]["100%"] == 111


def test_metric_sums_read_only_the_streams_samples():
    text = "\n".join(
        [
            "# HELP privstream_releases_total Private releases published.",
            'privstream_releases_total{stream="scale"} 3.0',
            'privstream_releases_total{stream="other"} 5.0',
            'privstream_release_defaults_total{reason="late",stream="scale"} 1.0',
            'privstream_release_defaults_total{reason="died",stream="scale"} 2.0',
        ]
    )
    assert metric_sum(text, "privstream_releases_total", "scale") == 3.0
    assert metric_sum(text, "privstream_release_defaults_total", "scale") == 3.0
    assert metric_sum(text, "privstream_releases_total", "absent") == 0.0


def test_memory_of_this_process_and_its_children_is_read_from_proc():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert rss_mib(os.getpid()) > 1
        assert child.pid in children(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert rss_mib(child.pid) == 0.0


@pytest.mark.parametrize(
    "argv",
    [
        ["--examples", "1000", "--window", "5000"],
        ["--features", "0"],
        ["--producers", "0"],
        ["--window", "0"],
        ["--ready-streams", "0"],
    ],
)
def test_bad_sizes_are_refused_in_one_line_before_anything_starts(argv, capsys):
    assert main(["bench", "scale", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error:" in err


@pytest.mark.live
@pytest.mark.slow
def test_bench_scale_reports_both_phases_their_ratio_and_the_releases():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "privstream",
            "bench",
            "scale",
            "--json",
            "--examples",
            "20000",
            "--window",
            "5000",
            "--top-level",
            "1",
            "--features",
            "4",
            "--producers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=1500,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    online, releases = result["online"], result["releases"]
    assert result["ratio"] == pytest.approx(releases["rate"] / online["rate"])
    assert online["rate"] > 0 and releases["rate"] > 0
    assert releases["releases_expected"] == 4 + 2  # 4 windows, 2 level-1 nodes
    assert releases["releases_published"] == releases["releases_expected"]
    assert releases["deadlines_missed"] == 0
    assert "releases_expected" not in online


def test_the_default_window_is_a_twentieth_of_the_examples(monkeypatch):
    # 20 windows whatever --examples: the release path's cost shows at every size.
    from privstream.stream_app.bench import scale

    seen = {}
    monkeypatch.setattr(scale, "run_scale_benchmark", lambda n, **kw: seen.update(n=n, **kw) or {"ratio": 1})
    assert main(["bench", "scale", "--examples", "60000"]) == 0
    assert seen["n"] == 60_000 and seen["window"] == 3_000
