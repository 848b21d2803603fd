"""Generate the JSON Schemas of the wire formats from the pydantic models.

python -m privstream.schemas.export [DIR]     # default: privstream/schemas/json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from privstream.schemas import MODELS

DEFAULT_DIR = Path(__file__).with_name("json")


def render_schemas() -> dict[str, str]:
    """File name -> JSON text of every model's schema (stable key order)."""
    return {
        f"{name}.schema.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for name, model in MODELS.items()
    }


def write_schemas(directory: Path = DEFAULT_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, text in render_schemas().items():
        path = directory / file_name
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_schemas(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR):
        print(path)
