"""The ways clients write a JSON body, for the property tests: orjson's
compact UTF-8 (JavaScript, serde_json, httpx), Python's json.dumps with its
ASCII escapes, with UTF-8, compact, and indented."""

from __future__ import annotations

import json
from collections.abc import Callable

import orjson

ENCODERS: dict[str, Callable[[object], bytes]] = {
    "orjson": orjson.dumps,
    "json": lambda d: json.dumps(d).encode(),
    "json-utf8": lambda d: json.dumps(d, ensure_ascii=False).encode(),
    "json-compact": lambda d: json.dumps(d, separators=(",", ":")).encode(),
    "indented": lambda d: json.dumps(d, indent=2).encode(),
}
