"""The page for people in headless Chromium: it loads with no console errors, shows the stream, its
hypothesis and its charts, follows a new release, and draws every kind of hypothesis the learners
release. The stream page is screenshotted into the test's temporary folder (never into git).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from privstream_client.freshness import Freshness
from privstream_client.release import Release
from privstream_client.signing import DeploymentStatement, KeySet, Signer, deployment_ledger_id

from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners.vector_base import make_vector_learner
from privstream.stream_app.embedded.demo import fetch_json
from tests.integration.conftest import wait_until

from .browser import Browser
from .deployment import WINDOW, LiveDeployment
from .programs import require

pytestmark = [pytest.mark.ops, pytest.mark.live]


async def released(deployment: LiveDeployment, examples: int, at_least: int) -> dict:
    """Send ``examples`` examples and wait until the stream has ``at_least`` releases; the history."""
    await asyncio.to_thread(deployment.load, examples, 4000.0)
    url = f"{deployment.public_url}/streams/{deployment.stream}/releases"

    def enough() -> dict | None:
        history = fetch_json(url)
        return history if history and len(history["releases"]) >= at_least else None

    return await asyncio.to_thread(wait_until, enough, 60, 0.25, f"{at_least} releases")


def latest(deployment: LiveDeployment) -> dict:
    answer = fetch_json(f"{deployment.public_url}/streams/{deployment.stream}/releases/latest")
    assert answer is not None and "certificate" in answer, answer
    return answer


async def test_the_stream_page_shows_the_stream_its_charts_and_follows_a_new_release(deployment, tmp_path):
    browser_binary = require("chromium")
    deployment.running()  # in this thread: the worker dies with the thread that starts it (PDEATHSIG)
    before = fetch_json(f"{deployment.public_url}/streams/{deployment.stream}/releases")
    history = await released(deployment, WINDOW, len(before["releases"]) + 1)
    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        shown = await browser.wait_for("document.body.dataset.latestEntry", 20, "the latest release drawn")
        release = latest(deployment)
        assert shown == release["certificate"]["ledger_entry_id"]
        page = await browser.evaluate("""({
            title: document.getElementById("title").textContent,
            summary: document.getElementById("summary").textContent,
            text: document.getElementById("hypothesis-text").textContent,
            shapes: document.querySelectorAll("#hypothesis svg rect, #hypothesis svg circle").length,
            labels: Array.from(document.querySelectorAll("#hypothesis svg text")).map(t => t.textContent),
            releases: Number(document.body.dataset.releases),
            charts: document.querySelectorAll("#releases-chart canvas, #budget-chart canvas").length,
            budget: document.getElementById("budget-text").textContent,
            levels: document.getElementById("levels-text").textContent,
        })""")
        assert page["title"] == deployment.stream
        assert page["summary"].startswith("thresholds:65536 · releasing")
        assert page["releases"] >= len(history["releases"])
        assert page["charts"] == 2 and page["shapes"] >= 1
        figures = history["lifetime"]
        committed, budget = figures["lifetime_epsilon_committed"], figures["lifetime_epsilon_budget"]
        plan = f"{committed:g} of {budget:g} lifetime ε per example committed by the release plan"
        assert page["budget"].startswith(plan), page["budget"]
        spent = f"the most any example has spent so far: {figures['lifetime_epsilon_spent']:g}"
        assert spent in page["budget"] and "used" not in page["budget"], page["budget"]
        assert page["levels"].startswith("Releases: ") and "at level 0" in page["levels"], page["levels"]
        # The drawing is the released threshold: its change point is labelled on the domain line.
        hypothesis = release["hypothesis"]
        assert hypothesis["kind"] == "runs" and hypothesis["domain"] == 65536
        if hypothesis["changes"]:
            threshold = f"{hypothesis['changes'][0]:,}"
            assert threshold in page["text"] and threshold in page["labels"], page
        screenshot = await browser.screenshot(tmp_path / "stream-page.png")
        print(f"screenshot of the stream page: {screenshot}")
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000

        # A new release arrives: the page draws it without a reload.
        await released(deployment, WINDOW, page["releases"] + 1)

        def newer() -> str | None:  # each page is cached for public_cache_seconds on its own
            entry = latest(deployment)["certificate"]["ledger_entry_id"]
            return entry if entry != shown else None  # public ids name nodes, they are not ordered

        newest = await asyncio.to_thread(wait_until, newer, 10, 0.25, "the newer release on releases/latest")
        await browser.wait_for(
            f"document.body.dataset.latestEntry === {json.dumps(newest)}",
            30,
            "the page to show the new release",
        )
        assert newest != shown  # another release: its public id names another node

        # The list of streams shows it too.
        await browser.open(f"{deployment.public_url}/")
        card = await browser.wait_for(
            f"document.querySelector('[data-stream={json.dumps(deployment.stream)}]')?.textContent",
            20,
            "the stream's card",
        )
        assert "releasing" in card and "lifetime ε per example committed" in card and "Latest release" in card
        assert "at level 0" in card
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()


def two_d_models() -> dict[str, dict]:
    rng = np.random.default_rng(5)
    xs = rng.random((3000, 2)) * 10
    ys = (xs[:, 0] + xs[:, 1] > 10).astype(np.uint8)
    bounds = np.array([[0.0, 10.0], [0.0, 10.0]])
    grid = make_vector_learner("bayes-consistent").fit(xs, ys, epsilon=1.0, delta=0.0, bounds=bounds)
    stump = make_vector_learner("semi-supervised").fit(xs, ys, epsilon=1.0, delta=1e-6, bounds=bounds)
    return {"grid": grid.model.to_dict(), "stump": stump.model.to_dict()}


async def test_the_lifetime_chart_sums_the_releases_covering_each_window(deployment, tmp_path):
    """The lifetime ε per example after each release, from the releases' nodes (the ledger's rule):
    a tree of levels 0..2 over 4 windows at ε = 0.25 per level, a sanitizer at 0.1 beside window 0,
    then a release without a node (before the tree), which counts against every window."""
    browser_binary = require("chromium")
    deployment.running()

    def node(level: int, index: int, epsilon: float = 0.25) -> dict:
        return {"epsilon": epsilon, "first_window": index << level, "last_window": ((index + 1) << level) - 1}

    releases = [
        node(0, 0),
        node(0, 0, 0.1),
        node(0, 1),
        node(1, 0),
        node(0, 2),
        node(0, 3),
        node(1, 1),
        node(2, 0),
        {"epsilon": 0.5, "first_window": None, "last_window": None},
    ]
    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        spent = await browser.evaluate(f"PrivstreamPage.lifetimeSpent({json.dumps(releases)})")
        assert spent == pytest.approx([0.25, 0.35, 0.35, 0.6, 0.6, 0.6, 0.6, 0.85, 1.35])
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()


async def test_the_page_draws_every_kind_of_hypothesis(deployment, tmp_path):
    """Hypotheses as the learners release them: thresholds, intervals and points on the domain
    line (runs and packed bits), and the 2-D models of the vector learners over their bounds."""
    browser_binary = require("chromium")
    deployment.running()  # in this thread: the worker dies with the thread that starts it (PDEATHSIG)
    intervals = parse_class_spec("intervals:100")
    interval = next(
        h
        for h in map(intervals.hypothesis, range(intervals.size))
        if len(ends := h.change_points()[1]) == 2 and ends[1] - ends[0] > 5
    )
    a, b = interval.change_points()[1]
    cases = {
        "A threshold: predicts 1 for x ≥ 40,000": parse_class_spec("thresholds:65536").hypothesis(40_000),
        f"An interval: predicts 1 for {a} ≤ x < {b}": interval,
        "A point: predicts 1 only at x = 7": parse_class_spec("points:100").hypothesis(7),
        "Predicts 0 everywhere": parse_class_spec("points:100").hypothesis(100),
    }
    points = parse_class_spec("points:100").hypothesis(7)
    assert points.to_dict()["kind"] == "bits" and int(points.predict(7)) == 1  # bits: decoded by the page
    models = two_d_models()
    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        for expected, hypothesis in cases.items():
            release = json.dumps({"hypothesis": hypothesis.to_dict()})
            drawn = await browser.evaluate(f"PrivstreamPage.draw({release})")
            assert drawn["text"].startswith(expected), (expected, drawn["text"])
            assert drawn["svg"].startswith("<svg")
        stream = {"feature_bounds": [[0.0, 10.0], [0.0, 10.0]]}
        grid = await browser.evaluate(
            f"PrivstreamPage.draw({{hypothesis: {json.dumps(models['grid'])}}}, {json.dumps(stream)})"
        )
        k = models["grid"]["cells_per_axis"]
        packed = np.frombuffer(base64.b64decode(models["grid"]["labels"]), np.uint8)
        labels = np.unpackbits(packed, bitorder="little")[: k * k]
        assert grid["text"].startswith(f"A grid of {k} cells per feature")
        squares = re.findall(r'<rect[^>]*fill="var\(--one\)"', grid["svg"])
        assert len(squares) == int(labels.sum()) > 0  # one square per cell labelled 1
        stump = await browser.evaluate(
            f"PrivstreamPage.draw({{hypothesis: {json.dumps(models['stump'])}}}, {json.dumps(stream)})"
        )
        if models["stump"].get("constant") is None:
            feature = models["stump"]["feature"]
            assert stump["text"].startswith(f"A decision stump: predicts 1 where feature {feature}")
            assert "<line" in stump["svg"]  # the decision boundary
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()


async def test_the_page_shows_a_halfspace_in_any_dimension_and_checks_its_accuracy(deployment, tmp_path):
    """A 9-feature halfspace release: its rule on the named features, a bar per feature and a 2-D
    slice; the accuracy a person computes in the browser on a CSV file equals the model's; and a
    certificate with a public n says so."""
    browser_binary = require("chromium")
    deployment.running()
    names = ["age", "income", "score", "visits", "tenure", "clicks", "basket", "returns", "region"]
    bounds = [[0.0, 100.0], [0.0, 1e5], [-1.0, 1.0], [0.0, 50.0], [0.0, 10.0], [0.0, 1e3], [0.0, 500.0]]
    bounds += [[0.0, 20.0], [0.0, 8.0]]
    rng = np.random.default_rng(3)
    lo, hi = np.array(bounds).T
    X = lo + (hi - lo) * rng.random((3000, 9))
    normal = np.array([0.8, -0.5, 0.1, 0.0, 0.05, 0.2, -0.1, 0.0, 0.02])
    y = (((X - lo) / (hi - lo)) @ normal >= 0.2).astype(np.uint8)
    fit = make_vector_learner("halfspaces").fit(X, y, epsilon=1.0, bounds=np.array(bounds))
    model = fit.model
    X_test = lo + (hi - lo) * rng.random((500, 9)) * 1.1  # some values beyond the bounds: clipped
    y_test = (rng.random(500) < 0.5).astype(np.uint8)
    csv = ",".join(reversed(names)) + ",y\n"  # columns in another order than the stream's
    csv += "".join(
        ",".join(map(repr, row[::-1].tolist())) + f",{label}\n"
        for row, label in zip(X_test, y_test, strict=True)
    )
    expected = float(np.mean(model.predict(X_test) == y_test))
    release = {"hypothesis": model.to_dict()}
    stream = {"feature_names": names, "feature_bounds": bounds}
    certificate = {"sample_size": 8000, "accuracy_guarantee_holds": None, "theorem_sample_size": 40000}
    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        drawn = await browser.evaluate(f"PrivstreamPage.draw({json.dumps(release)}, {json.dumps(stream)})")
        assert drawn["text"].startswith("A halfspace on 9 features: predicts 1 when ")
        assert "age" in drawn["text"] and "income" in drawn["text"]  # the two most influential, by name
        assert all(f">{name}</text>" in drawn["svg"] for name in names)  # a bar per named feature
        assert drawn["svg"].count("<polygon") == 1  # the 2-D slice's region
        accuracy = await browser.evaluate(
            f"PrivstreamPage.accuracyOn({json.dumps(release)}, {json.dumps(csv)}, {json.dumps(names)})"
        )
        assert accuracy["n"] == 500 and accuracy["accuracy"] == pytest.approx(expected)
        said = await browser.evaluate(f"PrivstreamPage.theoremText({json.dumps(certificate)})")
        assert said.startswith("not decided: n = 8,000 is public") and "n is private" not in said
        private = await browser.evaluate(
            "PrivstreamPage.theoremText({sample_size: null, accuracy_guarantee_holds: null})"
        )
        assert private == "not published (n is private)"
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()


VECTORS = Path(__file__).resolve().parents[2] / "clients" / "spec" / "vectors"


async def test_the_pages_verifier_gets_every_test_vector_right(deployment, tmp_path):
    """The page's WebCrypto verifier (assets/verify.js) accepts the vectors that verify and refuses
    the others for the reason stated, as the Python client does (tests/clients/test_vectors.py)."""
    browser_binary = require("chromium")
    deployment.running()
    statement = json.loads((VECTORS / "vectors.json").read_text())
    keys = (VECTORS / statement["keys"]).read_text()
    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        assert await browser.evaluate("PrivstreamVerify.available()") is True
        got = {}
        for case in statement["cases"]:
            text = (VECTORS / case["release"]).read_text()
            arguments = ", ".join(
                json.dumps(a) for a in (keys, text, case["key_id"], case["signature"], case["timestamp_ms"])
            )
            got[case["name"]] = await browser.evaluate(f"PrivstreamVerify.verifyWith({arguments})")
        assert got == {case["name"]: case["problem"] for case in statement["cases"]}
        # Without the record's time, a retired key's release is judged by its signed schedule.
        retired = next(c for c in statement["cases"] if c["problem"] == "retired_key")
        text = (VECTORS / retired["release"]).read_text()
        arguments = ", ".join(json.dumps(a) for a in (keys, text, retired["key_id"], retired["signature"]))
        assert await browser.evaluate(f"PrivstreamVerify.verifyWith({arguments}, null)") == "retired_key"
        # A key statement whose id does not match its key is refused whole.
        bad = json.loads(keys)
        bad["keys"][0]["key_id"] = "0" * 16
        with pytest.raises(AssertionError, match="does not match its public key"):
            await browser.evaluate(f"PrivstreamVerify.readKeys({json.dumps(bad)}).then(() => 'read')")
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()


#: Served bodies of the best and latest releases with their hypothesis complemented (`first`
#: flipped), under their real signature headers: what a forger on the path could serve.
FORGE_RELEASES = """(() => {
    const real = window.fetch;
    window.fetch = (url, options) => real(url, options).then(response => {
        if (!/\\/releases\\/(best|latest)$/.test(String(url)) || !response.ok) return response;
        return response.text().then(text => new Response(
            text.replace(/"first":([01])/, (m, v) => '"first":' + (1 - Number(v))),
            {status: response.status, headers: response.headers}));
    });
    return true;
})()"""


async def test_the_page_marks_every_release_it_shows_verified_and_a_forged_one_not(deployment, tmp_path):
    browser_binary = require("chromium")
    deployment.running()
    before = fetch_json(f"{deployment.public_url}/streams/{deployment.stream}/releases")
    await released(deployment, WINDOW, len(before["releases"]) + 1)
    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        state = await browser.wait_for("document.body.dataset.bestVerified", 20, "the best release checked")
        assert state == "verified"
        badge = await browser.evaluate("document.querySelector('#best-verified .badge').textContent")
        assert badge == "verified"
        latest_state = await browser.evaluate("document.body.dataset.latestVerified")
        assert latest_state == "verified"

        assert await browser.evaluate(FORGE_RELEASES) is True
        await browser.wait_for(
            "document.body.dataset.bestVerified === 'bad_signature'", 20, "the forged release marked"
        )
        badge = await browser.evaluate("document.querySelector('#best-verified .badge').textContent")
        assert badge == "not signed by this deployment (bad_signature)"

        # A page whose /keys cannot be read shows the releases, marked not verified.
        await browser.evaluate("""(() => {
            const real = window.fetch;
            window.fetch = (url, options) => String(url) === "/keys"
                ? Promise.reject(new TypeError("offline")) : real(url, options);
            return true;
        })()""")
        checked = await browser.evaluate(
            "PrivstreamVerify.forgetKeys() || PrivstreamVerify.fetchRelease("
            f"'/streams/' + encodeURIComponent({json.dumps(deployment.stream)}) + '/releases/best')"
            ".then(r => [r.problem, !!r.release, PrivstreamPage.verification(r).text])"
        )
        assert checked == ["keys_unavailable", True, "not verified"]

        await browser.open(f"{deployment.public_url}/")
        card = await browser.wait_for(
            f"document.querySelector('[data-stream={json.dumps(deployment.stream)}] .verification')"
            "?.dataset.verified",
            20,
            "the stream card's release checked",
        )
        assert card == "verified"
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()


def foreign_release_script(text: str, key_id: str, signature: str) -> str:
    """Served in place of the best and latest releases: ``text`` under its own valid signature."""
    return f"""(() => {{
    const real = window.fetch;
    window.fetch = (url, options) => real(url, options).then(response => {{
        if (!/\\/releases\\/(best|latest)$/.test(String(url)) || !response.ok) return response;
        const headers = new Headers(response.headers);
        headers.set("Privstream-Key-Id", {json.dumps(key_id)});
        headers.set("Privstream-Signature", {json.dumps(signature)});
        return new Response({json.dumps(text)}, {{status: response.status, headers}});
    }});
    return true;
}})()"""


async def test_the_pages_verifier_refuses_a_release_of_another_deployment(deployment, tmp_path):
    """/keys states the deployment's ledger id, signed by its key (its deployment statement): a
    release that verifies under the deployment's key but names another ledger (a staging worker
    mounting production's key) is refused, ``foreign_deployment``, as the Python client refuses it;
    a statement that does not verify decides nothing. On the live page too: such a release,
    signed by the deployment's own key, is marked as another deployment's."""
    browser_binary = require("chromium")
    deployment.running()
    vectors = json.loads((VECTORS / "vectors.json").read_text())
    keys = json.loads((VECTORS / vectors["keys"]).read_text())
    case = next(c for c in vectors["cases"] if c["name"] == "threshold")
    text = (VECTORS / case["release"]).read_text()
    seed = bytes.fromhex(vectors["test_private_seeds"][case["key_id"]])
    signer = Signer(Ed25519PrivateKey.from_private_bytes(seed))
    ours, theirs = json.loads(text)["certificate"]["ledger_id"], "0123456789abcdef"

    def stating(ledger_id: str) -> dict:
        return {**keys, "deployment": DeploymentStatement.sign(signer, ledger_id).to_dict()}

    unsigned = stating(theirs)
    unsigned["deployment"]["signature"] = stating(ours)["deployment"]["signature"]  # not over `theirs`
    statements = {"ours": stating(ours), "theirs": stating(theirs), "bad": unsigned, "none": keys}
    python = {
        name: Freshness(deployment_ledger_id(json.dumps(doc), KeySet.from_json(json.dumps(keys)))).judge(
            Release.from_json(text)
        )
        for name, doc in statements.items()
    }
    assert python == {"ours": None, "theirs": "foreign_deployment", "bad": None, "none": None}

    # The deployment's own key signs a release naming another ledger.
    history = fetch_json(f"{deployment.public_url}/streams/{deployment.stream}/releases")
    if not history or not history["releases"]:
        await released(deployment, WINDOW, 1)
    live = latest(deployment)
    live["certificate"]["ledger_id"] = theirs
    foreign = json.dumps(live, separators=(",", ":"))
    deployment_key = Signer.from_pem((deployment.settings.data_dir / "signing_key.pem").read_bytes())
    foreign_key_id, foreign_signature = deployment_key.sign(foreign.encode())

    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        got = {}
        for name, doc in statements.items():
            arguments = ", ".join(
                json.dumps(a) for a in (doc, text, case["key_id"], case["signature"], case["timestamp_ms"])
            )
            got[name] = await browser.evaluate(f"PrivstreamVerify.verifyWith({arguments})")
        assert got == python
        state = await browser.wait_for("document.body.dataset.bestVerified", 20, "the best release checked")
        assert state == "verified"  # the deployment's own releases: its /keys states their ledger

        assert await browser.evaluate(foreign_release_script(foreign, foreign_key_id, foreign_signature))
        await browser.wait_for(
            "document.body.dataset.bestVerified === 'foreign_deployment'", 20, "the foreign release marked"
        )
        badge = await browser.evaluate("document.querySelector('#best-verified .badge').textContent")
        assert badge == "another deployment's release (foreign_deployment)"
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()


async def test_the_page_shows_a_release_of_k_classes_and_checks_its_accuracy(deployment, tmp_path):
    """A one-vs-rest release of 4 classes on 3 features: the page names the classes, draws the
    predicted class over the plane of the two most influential features (one colour per class, each
    cell the class the model gives it), predicts as the service's model does, and computes the
    accuracy of a CSV file of class labels 0..3 as the model's."""
    from privstream.learning.private_learners.one_vs_rest import OneVsRestLearner

    browser_binary = require("chromium")
    deployment.running()
    names = ["width", "ink", "noise"]
    bounds = [[0.0, 16.0], [0.0, 1.0], [-1.0, 1.0]]
    rng = np.random.default_rng(11)
    lo, hi = np.array(bounds).T
    centres = np.array([[0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]])
    y = rng.integers(0, 4, 4000)
    U = np.column_stack([np.clip(centres[y] + rng.normal(0, 0.1, (4000, 2)), 0, 1), rng.random(4000)])
    X = lo + (hi - lo) * U
    fit = OneVsRestLearner(4).fit(X, y, epsilon=4.0, bounds=np.array(bounds))
    model = fit.model
    X_test = lo + (hi - lo) * rng.random((400, 3)) * 1.1  # some values beyond the bounds: clipped
    y_test = rng.integers(0, 4, 400)
    csv = "noise,width,ink,y\n" + "".join(  # columns in another order than the stream's
        f"{row[2]!r},{row[0]!r},{row[1]!r},{label}\n"
        for row, label in zip(X_test.tolist(), y_test, strict=True)
    )
    expected = float(np.mean(model.predict(X_test) == y_test))
    release = {"hypothesis": model.to_dict()}
    stream = {"feature_names": names, "feature_bounds": bounds, "classes": 4}
    browser = await Browser(browser_binary, tmp_path / "chromium").start()
    try:
        await browser.open(f"{deployment.public_url}/stream/{deployment.stream}")
        drawn = await browser.evaluate(f"PrivstreamPage.draw({json.dumps(release)}, {json.dumps(stream)})")
        assert drawn["text"].startswith("4 classes on 3 features, one halfspace per class against the rest")
        assert ">width</text>" in drawn["svg"] and ">ink</text>" in drawn["svg"]  # the plane's two axes
        cells = [int(k) for k in re.findall(r'data-class="(\d+)"', drawn["svg"])]
        assert len(cells) == 48 * 48 and set(cells) == {0, 1, 2, 3}  # every class has its region
        assert all(f">class {k}</text>" in drawn["svg"] for k in range(4))  # the legend
        rows, hypothesis = json.dumps(X_test[:100].tolist()), json.dumps(model.to_dict())
        said = await browser.evaluate(f"{rows}.map(x => PrivstreamPage.predict({hypothesis}, x))")
        assert said == model.predict(X_test[:100]).tolist()
        accuracy = await browser.evaluate(
            f"PrivstreamPage.accuracyOn({json.dumps(release)}, {json.dumps(csv)}, {json.dumps(names)})"
        )
        assert accuracy["n"] == 400 and accuracy["accuracy"] == pytest.approx(expected)
        assert browser.errors == [], browser.errors
    finally:
        await browser.close()
