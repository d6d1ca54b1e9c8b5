"""Error-code families shared with the TypeScript side (src/core/codes.ts writes error_codes.json).

Every code the package raises is `family.detail` with a family listed there, so that `fcp run`
and the Python API report the same codes for the same problems."""
from __future__ import annotations

import json
from pathlib import Path

FAMILIES: dict = json.loads((Path(__file__).with_name("error_codes.json")).read_text())["families"]


def is_code(code: str) -> bool:
    """True when `code` is `family.detail` with a declared family."""
    family, dot, detail = code.partition(".")
    return bool(dot) and bool(detail) and family in FAMILIES
