"""Reading back the JSONL files rlvr writes (metrics.jsonl, completions.jsonl, eval_completions.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file, one per '\\n'-ended line; none when the file does not exist, and a row torn by a
    kill mid-write is skipped. Not `str.splitlines`: it also splits at U+2028, U+0085, form feeds and the like,
    which `json.dumps(..., ensure_ascii=False)` leaves unescaped inside a completion's text."""
    path = Path(path)
    rows = []
    if path.is_file():
        for line in path.read_text(errors="replace").split("\n"):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a row torn by a kill
    return rows
