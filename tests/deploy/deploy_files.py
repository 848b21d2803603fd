"""Readers for the files under deploy/ and a small PromQL scanner, shared by the deploy tests.

The scanner is not a PromQL parser: it removes what cannot hold a metric name (strings, label
matchers, ranges, grouping clauses, function names, keywords) and returns the identifiers left.
That is enough to check names; the syntax itself is checked by ``promtool`` where it is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "privstream.json"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
ALERTS_TEST = DEPLOY / "prometheus" / "alerts_test.yml"
RULES = DEPLOY / "prometheus" / "rules.yml"
K8S = DEPLOY / "k8s"

#: Grafana's variables, replaced by values that make the expression plain PromQL.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h", "$stream": ".*"}

#: Metrics that do not come from privstream's /metrics, and where they come from.
EXTERNAL_METRICS = {
    "up": "Prometheus itself: 1 when the scrape of a target succeeded",
}

#: Labels with a bounded set of values (configuration, fixed enumerations, the deployment's size).
#: Nothing may group by a label with one value per example, user or window.
BOUNDED_LABELS = {
    "stream": "configured streams",
    "reason": "the fixed set of invalid reasons",
    "learner": "configured learners and sanitizers",
    "instance": "workers",
    "job": "Prometheus jobs",
    "partition": "partitions of the examples topic",
    "level": "levels of the release tree (0..20, configured)",
    "store": "ledger or state",
    "operation": "methods of the storage ports",
    "version": "privstream versions running",
    "feature": "configured features of a vector stream (d, public)",
    "le": "histogram buckets",
    "listener": "the two listeners (public, operator)",
}

_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "atan2",
}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_yaml_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def k8s_documents() -> list[dict[str, Any]]:
    """Every Kubernetes object under deploy/k8s (multi-document files included)."""
    return [doc for path in sorted(K8S.glob("*.yaml")) for doc in load_yaml_all(path)]


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_panels() -> Iterator[dict[str, Any]]:
    """Panels, including those nested in collapsed rows."""
    for panel in dashboard()["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs() -> list[str]:
    """Every PromQL expression of the dashboard (panel targets and template variable queries)."""
    exprs = [t["expr"] for p in dashboard_panels() for t in p.get("targets", [])]
    for variable in dashboard().get("templating", {}).get("list", []):
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        match = re.fullmatch(r"label_values\((.+),\s*\w+\)", text or "")
        if match:
            exprs.append(match.group(1))
    return exprs


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ALERTS)["groups"] for rule in group["rules"]]


def recording_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(RULES)["groups"] for rule in group["rules"]]


def grouping_labels(expr: str) -> set[str]:
    """The labels an expression groups or matches by (``by``, ``without``, ``on``, ``ignoring``).

    >>> sorted(grouping_labels('sum by (le, learner) (rate(x[5m])) / on (instance) y'))
    ['instance', 'le', 'learner']
    """
    found = re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr)
    return {label.strip() for group in found for label in group.split(",") if label.strip()}


def plain_promql(expr: str) -> str:
    """The expression with Grafana's variables replaced by constants."""
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def balanced(expr: str) -> bool:
    """Parentheses, brackets and braces nest properly (outside string literals)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in expr:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects.

    >>> sorted(metric_names('sum by (le) (rate(a_bucket{x="b c"}[5m])) / on (i) b_total > 0.5 and up'))
    ['a_bucket', 'b_total', 'up']
    """
    text = plain_promql(expr)
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group(0)
        if re.match(r"\s*\(", text[match.end() :]) or name in _KEYWORDS:
            continue  # a function call or an operator keyword
        before = text[match.start() - 1] if match.start() else " "
        if before.isdigit() or before == ".":
            continue  # the exponent or unit of a number (1e3, 5m)
        names.add(name)
    return names


def referenceable_names(families: list[Any]) -> dict[str, str]:
    """Names a query may select, mapped to their metric family, from parsed ``/metrics`` text.

    Counters are selected as ``<name>_total``; histograms only through their ``_bucket``, ``_sum``
    and ``_count`` series (never by the bare name); gauges by their name. The ``<name>_created``
    series that prometheus_client adds to counters and histograms (as separate gauge families in
    the text format) belong to their counter or histogram.
    """
    names: dict[str, str] = {}
    for family in families:
        if family.type == "counter":
            base = family.name.removesuffix("_total")
            names[f"{base}_total"] = base
            names[f"{base}_created"] = base
        elif family.type == "histogram":
            for suffix in ("_bucket", "_sum", "_count", "_created"):
                names[family.name + suffix] = family.name
    for family in families:
        if family.type not in ("counter", "histogram"):
            names.setdefault(family.name, family.name)
    return names


def compose_env(service: dict[str, Any]) -> dict[str, str]:
    """A compose service's environment as a dict (both the mapping and the list forms)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}
