"""How big the release tree's node data is: 64 windows of 2,000 examples of
thresholds over a domain of 65,536 points, every level's nodes merged from their children, as the
state store keeps them (``NodeData.to_bytes``). Prints JSON: bytes per level, the whole tree, and
the raw examples for comparison.

    .venv/bin/python benchmarks/bench_node_size.py
"""

from __future__ import annotations

import json

import numpy as np

from privstream.agents.interfaces import NodeBounds, NodeData

WINDOWS, SIZE, DOMAIN, THRESHOLD = 64, 2000, 65536, 30000


def main() -> None:
    rng = np.random.default_rng(0)
    bounds = NodeBounds()
    level = []
    for _ in range(WINDOWS):
        xs = rng.integers(0, DOMAIN, SIZE)
        level.append(NodeData.from_rows(xs, (xs >= THRESHOLD).astype(np.uint8), None, bounds))
    per_level = {}
    j = 0
    while True:
        per_level[j] = {
            "nodes": len(level),
            "bytes": sum(len(node.to_bytes()) for node in level),
            "cells_per_node_max": max(len(node.xs) for node in level),
        }
        if len(level) == 1:
            break
        level = [NodeData.merge(level[i], level[i + 1], bounds) for i in range(0, len(level), 2)]
        j += 1
    print(
        json.dumps(
            {
                "windows": WINDOWS,
                "examples_per_window": SIZE,
                "class": f"thresholds:{DOMAIN}",
                "per_level": per_level,
                "tree_bytes": sum(level["bytes"] for level in per_level.values()),
                "raw_examples_bytes_int64_x_uint8_y": WINDOWS * SIZE * 9,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
