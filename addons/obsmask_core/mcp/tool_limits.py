"""Limits a user aims at some servers and tools, and the ceilings servers
declare for their own tools.

``max_chars_for`` (``[mcp_gateway.masking]``) holds rules
``SERVER_GLOB/TOOL_GLOB -> N``: a tools/call answer of a matching tool on a
matching server is cut at N characters instead of ``max_chars`` (the first
rule that matches wins; 0 never cuts). The server is the gateway's name for
it, or the host of a server reached otherwise; the tool is the ``name`` of
the tools/call request the response answers. A response with no tool (to
another method, or to a request obsmask did not see) has the empty name,
which only a tool glob such as ``*`` matches. The head and tail kept keep
the proportions that ``head_chars`` and ``tail_chars`` have to
``max_chars``.

A server may declare, per tool, ``_meta["anthropic/maxResultSizeChars"]`` in
its tools/list answer: the size of result it means the client to take
whole. When that is larger than the limit in force, the tool's answers are
cut at it instead, at most 500,000 characters (Claude Code's own cap).

Pure: the flows are read in ``obsmask_core.mitm``.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from obsmask_core.mcp.json_tokens import SkipRuns
from obsmask_core.mcp.jsonrpc_message import JsonRpcMessage
from obsmask_core.mcp.jsonrpc_scan import skip_runs_for
from obsmask_core.mcp.scope import canonical_id
from obsmask_core.shared.errors import SettingError

CEILING_KEY = "anthropic/maxResultSizeChars"
# Claude Code takes at most this many characters whatever a server declares.
CEILING_CAP = 500_000
# Ceilings remembered, per (server, tool); the oldest are forgotten.
REMEMBERED_CEILINGS = 4096
# What a pattern may not hold: no server or tool name has whitespace.
_BLANK = re.compile(r"\s")
_NUMBER = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class Limit:
    """How one response's strings are cut: those longer than ``max_chars``
    (0: none) keep their first ``head_chars`` and last ``tail_chars``."""

    max_chars: int
    head_chars: int
    tail_chars: int


@dataclass(frozen=True)
class LimitRule:
    """One ``SERVER_GLOB/TOOL_GLOB -> max_chars`` rule."""

    server: str
    tool: str
    max_chars: int

    def matches(self, server: str, tool: str) -> bool:
        return fnmatchcase(server, self.server) and fnmatchcase(tool, self.tool)


def parse_rule(key: str, pattern: str, number: str) -> LimitRule:
    """One pair of ``max_chars_for``; SettingError naming ``key`` when the
    pattern or the number is not one."""
    if not pattern or _BLANK.search(pattern):
        raise SettingError(key, f"{pattern!r} is not a SERVER/TOOL pattern (no spaces; "
                                "e.g. 'fast-filesystem/read_*' or '*/search')")
    server, slash, tool = pattern.partition("/")
    if not slash:
        server, tool = "*", pattern  # a tool on any server
    if not server or not tool:
        raise SettingError(key, f"{pattern!r}: the server and the tool pattern around '/' "
                                "must not be empty (use * for any)")
    if _NUMBER.fullmatch(number) is None:
        raise SettingError(key, f"{pattern!r}: {number!r} is not a number of characters "
                                "(a whole number, 0 or more; 0 never cuts)")
    return LimitRule(server, tool, int(number))


def parse_rules(key: str, pairs: Iterable[tuple[str, str]]) -> tuple[LimitRule, ...]:
    return tuple(parse_rule(key, pattern, number) for pattern, number in pairs)


def check_limit_rules(key: str, value: object) -> None:
    """The check of the ``max_chars_for`` setting (raises SettingError)."""
    if isinstance(value, tuple):
        parse_rules(key, value)


class ToolLimits:
    """The limits in force: ``max_chars`` with its head and tail, and the
    rules that replace it for some servers and tools."""

    def __init__(self, max_chars: int, head_chars: int, tail_chars: int,
                 rules: tuple[LimitRule, ...] = ()) -> None:
        self.default = Limit(max_chars, head_chars, tail_chars)
        self.rules = rules
        # The skip runs of a scan at each limit that cuts, compiled once
        # here, where the limits are known, for every answer to use.
        self._skip_runs = {limit: skip_runs_for(limit)
                           for limit in (max_chars, *(rule.max_chars for rule in rules))
                           if limit > 0}

    def skip_runs(self, scan_chars: int | None) -> SkipRuns:
        """The skip runs of a scan for the strings over ``scan_chars``
        (``smallest``: one of these limits, or None)."""
        if scan_chars is None:
            return skip_runs_for(None)
        return self._skip_runs.get(scan_chars) or skip_runs_for(scan_chars)

    def scaled(self, max_chars: int) -> Limit:
        """The limit of ``max_chars`` characters, its head and tail in the
        default's proportions."""
        default = self.default
        if max_chars == default.max_chars:
            return default
        return Limit(max_chars, max_chars * default.head_chars // default.max_chars,
                     max_chars * default.tail_chars // default.max_chars)

    def limit(self, server: str, tool: str | None, ceiling: int | None = None) -> Limit:
        """The limit of a response of ``server`` to a call of ``tool`` (None:
        no tool), raised to the tool's declared ``ceiling`` when that is
        larger (CEILING_CAP at most; a tool that is never cut stays so)."""
        max_chars = self.default.max_chars
        for rule in self.rules:
            if rule.matches(server, tool or ""):
                max_chars = rule.max_chars
                break
        if max_chars and tool is not None and ceiling is not None:
            max_chars = max(max_chars, min(ceiling, CEILING_CAP))
        return self.scaled(max_chars)

    def smallest(self, server: str) -> int | None:
        """The smallest limit a response of ``server`` may get (a scan finds
        the strings over it; each response then keeps those over its own
        limit); None when none of them cuts."""
        limits = [self.default.max_chars, *(rule.max_chars for rule in self.rules
                                            if fnmatchcase(server, rule.server))]
        cutting = [limit for limit in limits if limit > 0]
        return min(cutting) if cutting else None


class AnswerLimits:
    """The limit of each response of one answer (a body, or a stream): by
    the server, the tool its id called (``tool_of``, given canonical_id)
    and that tool's declared ceiling (``ceiling_of``). ``scan_chars``: the
    smallest of them, None when nothing is cut; ``skip_runs``: the scan's
    at that limit."""

    def __init__(
        self,
        limits: ToolLimits,
        server: str = "",
        tool_of: Callable[[str], str | None] | None = None,
        ceiling_of: Callable[[str], int | None] | None = None,
    ) -> None:
        self.limits = limits
        self.server = server
        self.tool_of = tool_of
        self.ceiling_of = ceiling_of
        self.scan_chars = limits.smallest(server)
        self.skip_runs = limits.skip_runs(self.scan_chars)

    def of(self, message: JsonRpcMessage) -> Limit:
        tool = None
        if self.tool_of is not None and message.id_text is not None:
            tool = self.tool_of(canonical_id(message.id_text))
        ceiling = None
        if tool is not None and self.ceiling_of is not None:
            ceiling = self.ceiling_of(tool)
        return self.limits.limit(self.server, tool, ceiling)


def lists_tools(data: bytes) -> bool:
    """Whether an answer may hold a tools/list result (a ``tools`` array,
    each tool with its ``inputSchema``): a cheap test on the bytes, so that
    only those answers are parsed for ceilings."""
    # The longer word first: bytes.find skips faster with a longer needle,
    # and most answers have neither.
    return b'"inputSchema"' in data and b'"tools"' in data


def declared_ceilings(data: bytes) -> dict[str, int | None]:
    """What the tools/list results in ``data`` (a JSON-RPC message or batch)
    declare: tool name -> ``_meta[CEILING_KEY]`` capped at CEILING_CAP, or
    None for a tool listed without one (a server that dropped its ceiling).
    A result is read as a tools/list result when it holds a ``tools`` array
    of objects with a ``name``."""
    if not lists_tools(data):
        return {}
    try:
        value: object = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    found: dict[str, int | None] = {}
    for message in value if isinstance(value, list) else [value]:
        result = message.get("result") if isinstance(message, dict) else None
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            meta = tool.get("_meta")
            ceiling = meta.get(CEILING_KEY) if isinstance(meta, dict) else None
            found[tool["name"]] = None
            if (isinstance(ceiling, (int, float)) and not isinstance(ceiling, bool)
                    and math.isfinite(ceiling) and ceiling >= 1):
                found[tool["name"]] = min(int(ceiling), CEILING_CAP)
    return found


class ToolCeilings:
    """The ceilings declared so far, per (server, tool); at most ``size``
    of them, the oldest forgotten first. Safe to share between threads (a
    big answer is read on a worker thread)."""

    def __init__(self, size: int = REMEMBERED_CEILINGS) -> None:
        self.size = size
        self._ceilings: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, server: str, ceilings: dict[str, int | None]) -> None:
        """What one tools/list answer of ``server`` says: a tool listed with
        a ceiling has it, one listed without has none any more."""
        if not ceilings:
            return
        with self._lock:
            for tool, ceiling in ceilings.items():
                if ceiling is None:
                    self._ceilings.pop((server, tool), None)
                    continue
                self._ceilings[(server, tool)] = ceiling
                self._ceilings.move_to_end((server, tool))
            while len(self._ceilings) > self.size:
                self._ceilings.popitem(last=False)

    def get(self, server: str, tool: str) -> int | None:
        return self._ceilings.get((server, tool))

    def __len__(self) -> int:
        return len(self._ceilings)
