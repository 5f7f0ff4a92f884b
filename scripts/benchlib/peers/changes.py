"""What a proxy changed outside tool-result contents: the body the upstream
received against the one the client sent, and the answer the client got
against the one the upstream gave.

Categories, each counted once per request where it happens:

- ``items``: the conversation list's length, or an item's role, type or any
  id (``id``, ``tool_call_id``, ``call_id``, ``tool_use_id``, the ids of tool
  calls) at the same position;
- ``contents``: anything else in the items (texts, tool calls and their
  arguments, reasoning...), tool-result values left out;
- ``tools``: the tool definitions (added, removed, reordered or rewritten);
- ``system``: Anthropic's ``system``, Responses' ``instructions``;
- ``members``: the body's other top-level members (model, max_tokens...);
- ``breakpoints_moved_or_removed``: a client's ``cache_control`` no longer
  where the client put it, with the same value;
- ``breakpoints_added``: a ``cache_control`` the client did not send (obsmask
  adds one, documented, in Anthropic requests; counted apart);
- ``answers``: the answer's JSON as the client got it differs from the
  upstream's (e.g. ``usage.input_tokens`` rewritten).

``cache_control`` is left out of every comparison but the two breakpoint
categories, so a moved breakpoint is counted once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from benchlib.peers.wire import LIST_MEMBERS, PREAMBLES, result_places

CATEGORIES = ("items", "contents", "tools", "system", "members",
              "breakpoints_moved_or_removed", "breakpoints_added", "answers")
# Not a change of the client's meaning: reported, but apart.
DOCUMENTED_ADDITIONS = ("breakpoints_added",)
CACHE_CONTROL = "cache_control"
_ID_KEYS = ("id", "tool_call_id", "call_id", "tool_use_id")
_EXAMPLES = 3
_RESULT = "<tool result>"
_ABSENT = object()  # a member one side lacks

Path = tuple[str | int, ...]


def without_breakpoints(value: object) -> object:
    if isinstance(value, dict):
        return {key: without_breakpoints(inner) for key, inner in value.items()
                if key != CACHE_CONTROL}
    if isinstance(value, list):
        return [without_breakpoints(inner) for inner in value]
    return value


def breakpoints(value: object, path: Path = ()) -> set[tuple[Path, str]]:
    """(where, the value as JSON text) of every ``cache_control``."""
    found: set[tuple[Path, str]] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == CACHE_CONTROL:
                found.add((path, repr(inner)))
            else:
                found |= breakpoints(inner, (*path, key))
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            found |= breakpoints(inner, (*path, position))
    return found


def _blank_results(fmt: str, items: list[object]) -> list[object]:
    """The items with every tool result's value replaced by one marker."""
    out = list(items)
    for place in result_places(fmt, items):
        item = out[place.item]
        assert isinstance(item, dict)
        if place.block is None:
            out[place.item] = {**item, place.key: _RESULT}
        else:
            content = list(item["content"])
            block = content[place.block]
            assert isinstance(block, dict)
            content[place.block] = {**block, place.key: _RESULT}
            out[place.item] = {**item, "content": content}
    return out


def _ids(value: object) -> list[object]:
    """Every id in an item, in document order."""
    if isinstance(value, dict):
        found = [value[key] for key in _ID_KEYS if key in value]
        return found + [i for inner in value.values() for i in _ids(inner)]
    if isinstance(value, list):
        return [i for inner in value for i in _ids(inner)]
    return []


def _shape(item: object) -> tuple[object, object, list[object]]:
    if not isinstance(item, dict):
        return None, None, []
    return item.get("role"), item.get("type"), _ids(item)


def _tool_name(tool: object) -> str:
    if not isinstance(tool, dict):
        return repr(tool)
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return str(name)


def _tools_change(sent: object, forwarded: object) -> str | None:
    if sent == forwarded:
        return None
    before = [_tool_name(t) for t in sent] if isinstance(sent, list) else []
    after = [_tool_name(t) for t in forwarded] if isinstance(forwarded, list) else []
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    if added or removed:
        return f"tools added {added}, removed {removed}"
    if before != after:
        return f"tools reordered: {before[:6]} -> {after[:6]}"
    return "tool definitions rewritten"


def _differing_paths(a: object, b: object, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in list(a) + [k for k in b if k not in a]:
            inner = f"{path}.{key}" if path else str(key)
            found += ([inner] if (key in a) != (key in b)
                      else _differing_paths(a[key], b[key], inner))
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for position, (x, y) in enumerate(zip(a, b, strict=True))
                for p in _differing_paths(x, y, f"{path}[{position}]")]
    return [] if a == b else [path or "(whole)"]


def request_changes(fmt: str, sent: dict[str, object],
                    forwarded: dict[str, object]) -> dict[str, str]:
    """Category -> one line saying what changed, for one request."""
    member = LIST_MEMBERS[fmt]
    preamble = PREAMBLES.get(fmt)
    found: dict[str, str] = {}
    sent_items, got_items = sent.get(member), forwarded.get(member)
    sent_list = sent_items if isinstance(sent_items, list) else []
    got_list = got_items if isinstance(got_items, list) else []
    if len(sent_list) != len(got_list):
        found["items"] = f"{len(sent_list)} items sent, {len(got_list)} forwarded"
    else:
        for position, (a, b) in enumerate(zip(sent_list, got_list, strict=True)):
            if _shape(a) != _shape(b):
                found["items"] = f"item {position}: role, type or ids changed"
                break
        before = without_breakpoints(_blank_results(fmt, sent_list))
        after = without_breakpoints(_blank_results(fmt, got_list))
        if before != after:
            assert isinstance(before, list) and isinstance(after, list)
            paths = [p for position, (a, b) in enumerate(zip(before, after, strict=True))
                     for p in _differing_paths(a, b, f"{member}[{position}]")]
            if paths:
                found["contents"] = f"{len(paths)} values, first {paths[0]}"
    tools = _tools_change(without_breakpoints(sent.get("tools")),
                          without_breakpoints(forwarded.get("tools")))
    if tools is not None:
        found["tools"] = tools
    if preamble is not None and (without_breakpoints(sent.get(preamble))
                                 != without_breakpoints(forwarded.get(preamble))):
        found["system"] = f"{preamble} changed"
    others = {key for key in (*sent, *forwarded) if key not in (member, preamble, "tools")}
    members = sorted(key for key in others
                     if without_breakpoints(sent.get(key, _ABSENT))
                     != without_breakpoints(forwarded.get(key, _ABSENT)))
    if members:
        found["members"] = f"members {members}"
    client_marks, got_marks = breakpoints(sent), breakpoints(forwarded)
    if client_marks - got_marks:
        found["breakpoints_moved_or_removed"] = f"{len(client_marks - got_marks)} of the client's"
    if got_marks - client_marks:
        found["breakpoints_added"] = f"{len(got_marks - client_marks)} added"
    return found


def answer_changes(sent: object, received: object) -> str | None:
    """One line naming what differs between the upstream's answer and the
    client's (None: the same JSON)."""
    paths = _differing_paths(sent, received)
    return None if not paths else ", ".join(paths[:4])


@dataclass
class ChangeTally:
    """Requests with each category of change, and a few examples."""

    requests: int = 0
    changed_outside_results: int = 0  # any category but the documented additions
    counts: Counter[str] = field(default_factory=lambda: Counter(dict.fromkeys(CATEGORIES, 0)))
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, found: dict[str, str], where: str) -> None:
        self.requests += 1
        if set(found) - set(DOCUMENTED_ADDITIONS):
            self.changed_outside_results += 1
        for category, line in found.items():
            self.counts[category] += 1
            seen = self.examples.setdefault(category, [])
            if len(seen) < _EXAMPLES:
                seen.append(f"{where}: {line}")

    def merge(self, other: ChangeTally) -> None:
        self.requests += other.requests
        self.changed_outside_results += other.changed_outside_results
        self.counts.update(other.counts)
        for category, lines in other.examples.items():
            seen = self.examples.setdefault(category, [])
            seen += lines[: _EXAMPLES - len(seen)]
