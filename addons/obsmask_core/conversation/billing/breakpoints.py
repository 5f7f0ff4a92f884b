"""What an Anthropic Messages request says about its prompt cache, and where
obsmask may add a breakpoint of its own.

Anthropic writes a cache entry only at a block that carries ``cache_control``
(a breakpoint; at most four a request, counted over tools, system and
messages, and a top-level ``cache_control`` puts one on the request's last
block), and a later request reads an entry only if it equals one of its own
prefixes ending at most ``LOOKBACK_BLOCKS`` block boundaries before one of
its breakpoints. Masking changes the history in the middle, so without an
entry just before the first newly masked result the next request writes
everything after the system again.

The frontier breakpoint: the block that closes the part of the history the
frontier has decided (the last block of the assistant message of the
frontier's turn) carries one, so the next move reads up to there. It is
decided from the request alone, and only where it adds no write the client's
own breakpoints would not make: the client marks the end of its request (as
Claude Code and the SDKs' caching recipes do), so the prefix up to the
frontier is written anyway, and one of the four slots is free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from obsmask_core.conversation.billing.price_models import PriceModel

CACHE_CONTROL = "cache_control"
MAX_BREAKPOINTS = 4
# Anthropic documents that a breakpoint finds earlier entries "up to
# approximately 20 blocks" back. The strict reading: an entry at its own
# boundary or at one of the 19 before it (20 boundaries); the lenient one
# also reads the entry 20 blocks before it. The ledger takes whichever is
# less favourable to masking (``breakpoint_billing``).
LOOKBACK_BLOCKS = 20
LENIENT_LOOKBACK_BLOCKS = LOOKBACK_BLOCKS + 1
# Blocks the API refuses a breakpoint on.
NO_BREAKPOINT_TYPES = frozenset({"thinking", "redacted_thinking"})
# What the tools and system weigh in the estimate the ledger makes of every
# prefix (characters / 4): they come before the messages in the cache.
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class CacheLayout:
    """An Anthropic request's breakpoints, as far as the ledger and the
    frontier breakpoint need them.

    ``marks_end``: the client's last breakpoint closes its request (in its
    last message, or a top-level ``cache_control``), so every earlier
    request of the conversation is taken to have closed with one too (the
    client moves it as the conversation grows). Claude Code with the 5.x
    models puts it on the first of the two blocks of a trailing system
    message, whose second block is gone from the next request: the entry
    ends with that message as the next request holds it, so the ledger
    bills it at the message's end, as a breakpoint on its last block.
    ``control``: the ``cache_control`` of the client's last breakpoint,
    copied onto the frontier's (the same lifetime, so the order of lifetimes
    the API requires holds). ``minimum_tokens``: the model's smallest
    cacheable prompt; ``preamble_tokens``: the estimated tokens of the tools
    and system, which come before the messages in the cache."""

    outside_messages: int
    in_messages: int
    marks_end: bool
    control: Mapping[str, object] | None
    preamble_tokens: int
    minimum_tokens: int = 1024
    # A top-level cache_control (automatic caching), if any.
    top_level: Mapping[str, object] | None = None
    # How many breakpoints among the messages (and the top-level one) ask
    # for the 1-hour lifetime: an entry there outlives a 5-minute pause.
    hours_in_messages: int = 0

    @property
    def breakpoints(self) -> int:
        return self.outside_messages + self.in_messages

    @property
    def free_slot(self) -> bool:
        return self.breakpoints < MAX_BREAKPOINTS

    @property
    def long_lived(self) -> bool:
        """Do the client's entries live an hour (written at a higher price)?"""
        return self.control is not None and self.control.get("ttl") == "1h"

    @property
    def outlives_five_minutes(self) -> bool:
        """Does any entry of the client's among the messages live an hour?
        A move behind it is not free after a shorter pause."""
        return self.long_lived or self.hours_in_messages > 0

    def key(self) -> tuple[object, ...]:
        """What a replay under this layout depends on (checkpoints compare it)."""
        control = tuple(sorted((k, repr(v)) for k, v in self.control.items())) \
            if self.control is not None else None
        return (self.outside_messages, self.in_messages, self.marks_end, control,
                self.preamble_tokens, self.minimum_tokens)


# The smallest prompt a model caches when nothing says which model it is
# (the model table has each model's: ``model_table``).
DEFAULT_MINIMUM_TOKENS = 1024


def preamble_tokens(members: Mapping[str, object], *names: str) -> int:
    """The estimated tokens of the members ``names`` of a request body,
    which come before its messages in the cache."""
    return sum(prompt_chars(members.get(name)) for name in names) // _CHARS_PER_TOKEN


def implicit_breakpoint(model: PriceModel, preamble: int = 0) -> CacheLayout:
    """OpenAI's cache from GPT-5.6 on, as a layout: one implicit breakpoint
    near the latest user or tool message, read as the end of the request
    (agents end every request with one), and nothing cached before the
    messages on its own. A client's explicit breakpoints
    (``prompt_cache_breakpoint``) are not read: the implicit one at the end
    still writes everything the request adds."""
    return CacheLayout(outside_messages=0, in_messages=1, marks_end=True, control=None,
                       preamble_tokens=preamble, minimum_tokens=model.minimum_cached)


def _controls(value: object) -> list[Mapping[str, object]]:
    """The ``cache_control`` objects of a list of blocks (or one block), in
    order, those of the blocks inside a block's ``content`` (a
    ``tool_result``'s text) included: the API counts them all."""
    blocks = value if isinstance(value, list) else [value]
    found: list[Mapping[str, object]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        inner = block.get("content")
        if isinstance(inner, list):
            found += _controls(inner)
        if isinstance(block.get(CACHE_CONTROL), dict):
            found.append(block[CACHE_CONTROL])
    return found


def next_control(items: Sequence[object], after: int,
                 top_level: Mapping[str, object] | None) -> Mapping[str, object] | None:
    """The ``cache_control`` of the client's first breakpoint after item
    ``after`` (the top-level one when none): a breakpoint added at the end
    of that item with the same lifetime keeps the order of lifetimes the
    API requires (longer ones first)."""
    for item in items[after + 1:]:
        content = item.get("content") if isinstance(item, dict) else None
        found = _controls(content) if isinstance(content, list) else []
        if found:
            return found[0]
    return top_level


def prompt_chars(value: object) -> int:
    """The characters of every string value in ``value`` (what
    ``message_strings`` lists, summed), without building the list: every
    item of every request is measured, so this is on the hot path. A
    ``cache_control`` is not prompt text (clients move it from request to
    request): it is not counted."""
    total = 0
    pending: list[object] = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, str):
            total += len(current)
        elif isinstance(current, dict):
            if CACHE_CONTROL in current:
                pending.extend(v for k, v in current.items() if k != CACHE_CONTROL)
            else:
                pending.extend(current.values())
        elif isinstance(current, list):
            pending.extend(current)
    return total


def read_layout(members: Mapping[str, object], items: Sequence[object],
                minimum_tokens: int = DEFAULT_MINIMUM_TOKENS) -> CacheLayout:
    """The breakpoints of an Anthropic request body (``members``, whose
    ``messages`` are ``items``), for a model that caches prompts of
    ``minimum_tokens`` or more."""
    outside = _controls(members.get("tools")) + _controls(members.get("system"))
    top_level = members.get(CACHE_CONTROL)
    inside: list[Mapping[str, object]] = []
    last_marked = False
    for position, item in enumerate(items):
        content = item.get("content") if isinstance(item, dict) else None
        if not isinstance(content, list):
            continue
        found = _controls(content)
        inside.extend(found)
        if position == len(items) - 1 and found:
            last_marked = True
    automatic = isinstance(top_level, dict)
    control: Mapping[str, object] | None = inside[-1] if inside else None
    if automatic and isinstance(top_level, dict):
        control = top_level
    preamble = preamble_tokens(members, "tools", "system")
    return CacheLayout(
        outside_messages=len(outside),
        in_messages=len(inside) + (1 if automatic else 0),
        marks_end=last_marked or automatic,
        control=control,
        preamble_tokens=preamble,
        minimum_tokens=minimum_tokens,
        top_level=top_level if isinstance(top_level, dict) else None,
        hours_in_messages=sum(map(_hour, inside)) + _hour(top_level),
    )


def _hour(control: object) -> bool:
    return isinstance(control, Mapping) and control.get("ttl") == "1h"


def grown_layout(previous: CacheLayout, added: Sequence[object],
                 dropped_closing: bool) -> CacheLayout | None:
    """The layout of a request that is ``previous``'s with ``added`` items
    after its own, every byte before and after its list the same (its
    tools, system and top-level ``cache_control``: the fast path proved
    it), without the breakpoint that closed it when ``dropped_closing``
    (a client that moved it on). None when it cannot be told without
    reading every item: a breakpoint dropped and none added, whose control
    would be an earlier one's."""
    found = [control for item in added
             for control in _controls(item.get("content") if isinstance(item, dict)
                                      and isinstance(item.get("content"), list) else [])]
    automatic = previous.top_level is not None
    if dropped_closing and (automatic or not found):
        return None  # the dropped one's own control is not kept
    inside = previous.in_messages - automatic - dropped_closing + len(found)
    last = added[-1] if added else None
    last_content = last.get("content") if isinstance(last, dict) else None
    last_marked = bool(_controls(last_content)) if isinstance(last_content, list) else False
    if not added:
        last_marked = previous.marks_end and not automatic and not dropped_closing
    control = previous.top_level if automatic else (found[-1] if found else previous.control)
    hours = previous.hours_in_messages - (dropped_closing and _hour(previous.control)) \
        + sum(map(_hour, found))
    return replace(previous, in_messages=inside + automatic,
                   marks_end=last_marked or automatic, control=control,
                   hours_in_messages=hours)


def blocks_of(item: object) -> int:
    """How many blocks an item counts for in the cache's lookback: each
    block of a list content, one for a string content."""
    content = item.get("content") if isinstance(item, dict) else None
    return len(content) if isinstance(content, list) else 1


def closing_block(item: object) -> int | None:
    """The block a breakpoint closing ``item`` goes on: its last block,
    when the API accepts one there (a typed block, not a thinking one)."""
    content = item.get("content") if isinstance(item, dict) else None
    if not isinstance(content, list) or not content:
        return None
    last = content[-1]
    if not isinstance(last, dict) or not isinstance(last.get("type"), str) \
            or last["type"] in NO_BREAKPOINT_TYPES:
        return None
    return len(content) - 1


def marked(item: object, block: int) -> bool:
    """Does block ``block`` of ``item`` carry a breakpoint already?"""
    content = item.get("content") if isinstance(item, dict) else None
    return isinstance(content, list) and isinstance(content[block], dict) \
        and CACHE_CONTROL in content[block]


@dataclass(frozen=True)
class AddedBreakpoint:
    """The frontier breakpoint a request goes out with: ``cache_control``
    (the client's own object, ``control``) added as the last member of
    block ``block`` of item ``item``."""

    item: int
    block: int
    control: Mapping[str, object]

    def as_metadata(self) -> dict[str, object]:
        return {"message": self.item, "block": self.block, CACHE_CONTROL: dict(self.control)}
