"""The model each shape of traffic names in the speed benchmarks
(``bench_rewrite``, ``bench_load``): ids people run today.

The fixtures' sessions were recorded with DeepSeek's ids, which obsmask's
model table does not know: it prices an unknown model under every row of
its provider at once (``Ledger.alternatives``), the costliest case.
``--recorded-models`` keeps the sessions' own ids, to measure that case.
"""

from __future__ import annotations

import re

import orjson

SHAPE_MODELS: dict[str, str] = {
    "chat": "gpt-5.6",
    "responses": "gpt-5.6",
    "anthropic": "claude-sonnet-5",
    # Claude Code 2.1.330's default model.
    "claude_code": "claude-opus-5-5",
}
# A ``model`` member and its string value, as a client writes one.
_MEMBER = re.compile(rb'("model"\s*:\s*)("(?:[^"\\]|\\.)*")')


def shape_models(recorded: bool) -> dict[str, str | None]:
    """The model per shape (None: the session's own, with ``recorded``)."""
    return {shape: None if recorded else model for shape, model in SHAPE_MODELS.items()}


def named(body: bytes, model: str | None) -> bytes:
    """``body`` with its top-level ``model`` member naming ``model``, every
    other byte as it was; ``body`` itself when ``model`` is None. Raises
    ValueError for a body with no such member."""
    if model is None:
        return body
    expected = {**orjson.loads(body), "model": model}
    value = orjson.dumps(model)
    for found in _MEMBER.finditer(body):
        renamed = body[:found.start(2)] + value + body[found.end(2):]
        if orjson.loads(renamed) == expected:
            return renamed
    raise ValueError("a request body without a top-level model member")
