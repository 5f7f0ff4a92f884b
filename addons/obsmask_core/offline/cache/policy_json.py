"""A masking policy as JSON, for the documents of measure and the cache benchmark."""

from __future__ import annotations

from dataclasses import fields

from obsmask_core.conversation.settings.policy import MaskPolicy


def policy_settings(policy: MaskPolicy) -> dict[str, object]:
    """The policy's init fields, for the JSON output (whatever fields it has)."""
    return {f.name: _jsonable(getattr(policy, f.name)) for f in fields(policy) if f.init}


def _jsonable(value: object) -> object:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(item) for item in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return repr(value)
