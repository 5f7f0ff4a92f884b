"""Prompt caches as the providers document them, for the stub servers of the
end-to-end tests: what a request reads from the cache, what it writes, and
the usage and bill that follow. Pure logic (no I/O), and nothing of
obsmask's: tests compare obsmask's predictions with a "provider" that shares
no code with it.

Tokens (the stub's own estimate, not a tokenizer)
-------------------------------------------------

The tokens of the prefix made of the first ``i`` messages (or Responses
``input`` items) are ``chars(those i items) // 4 + 3 * i``, where ``chars``
adds the ``len()`` of every string value inside them (dict keys not
counted). The part before the messages (the preamble) counts
``chars(...) // 4`` of ``tools`` and ``system`` (Anthropic), or of
``instructions`` and ``tools`` (OpenAI). A prefix that ends at message
boundary ``i`` has ``preamble + messages(i)`` tokens, and the whole prompt
``preamble + messages(n)``. ``cache_control`` members are not counted (they
are not prompt content): moving a breakpoint changes neither the cached
content nor any count.

An Anthropic cache told ``count`` (a tokenizer of the test's, the tokens of
one string) counts like a provider instead: ``count`` of every string value
in place of ``chars // 4`` (of a tool definition's JSON: a provider reads
the schema), the 3 tokens a message and the rest unchanged.

The stub bills at message boundaries and at the end of the preamble only:
a prefix that ends inside the preamble (a breakpoint on a tool, or on a
system block) counts the whole preamble, and one that ends on a block that is
not the last block of its message counts that whole message. Cache entries
themselves are kept at block boundaries, as the provider keeps them.

Anthropic Messages (``AnthropicPromptCache``)
---------------------------------------------

- Cache order: ``tools`` (each tool one block), ``system`` blocks (a string
  system is one block), then each message's content blocks (a string
  content is one block).
- Breakpoints: every block carrying a ``cache_control`` (on the block, or on
  a block of its ``content`` list: a ``tool_result``'s text, say), plus the
  request's last block when the body has a top-level ``cache_control``
  (automatic caching; nothing more when that block carries one already).
  More than 4 breakpoints, or a ``cache_control`` on a ``thinking`` or
  ``redacted_thinking`` block: the request is refused (``InvalidRequest``,
  HTTP 400 in the API's error shape).
- Read: the longest live entry equal to one of the request's own prefixes
  that ends at a block boundary at most 20 blocks before one of its
  breakpoints (for a breakpoint on block ``b``: the boundaries after blocks
  ``b, b-1, ..., b-19``). An entry is the model's name and the prefix's
  content with every ``cache_control`` member removed, in the order sent
  (JSON key order included).
- Write: an entry at each breakpoint whose prefix has at least the
  model's minimum (``ModelTerms.minimum``, or ``minimum_tokens`` when told).
- Lifetime: 5 minutes after the entry was last written or read, or 1 hour
  when the breakpoint that wrote it said ``"ttl": "1h"``, on an injectable
  clock.
- Usage: ``cache_read_input_tokens`` the tokens of the prefix read,
  ``cache_creation_input_tokens`` the tokens from there to the last
  breakpoint (nothing when that prefix is under the minimum), split in
  ``cache_creation`` by the lifetime of the breakpoint that ends each part,
  ``input_tokens`` the rest. The bill, in units of the base input price:
  the model's read (0.1 for most), written its 5-minute or 1-hour write
  price (1.25, 2.0), the rest 1.0.

OpenAI automatic cache (``OpenAIPromptCache``: Chat Completions, Responses)
----------------------------------------------------------------------------

Before GPT-5.6 (``ModelTerms.breakpoint`` False): the cached tokens are the
longest prefix (whole items: the boundary is an item boundary, the preamble
included) that the request shares with an earlier request to the same
model, nothing under the minimum (1,024), then rounded down to
minimum + k * step (128). Writes are free and not reported. Entries do not
expire.

GPT-5.6 and later (``ModelTerms.breakpoint`` True): one implicit breakpoint
closes the request's latest user or tool message (Chat: ``role`` ``user`` or
``tool``; Responses: a ``user`` message or a ``*_call_output`` item). An
entry is written there when that prefix has at least the minimum; a request
reads the longest earlier entry that is one of its own prefixes ending at or
before its breakpoint, among the latest 80 entries written ("up to the
latest 80 breakpoints in the conversation, without a content-block lookback
limit"; the stub holds one conversation per cache), whole, with no steps.
From the read to the breakpoint is written (reported as ``cache_write_tokens``
in ``prompt_tokens_details`` for Chat, ``input_tokens_details`` for
Responses, billed at the write price, 1.25), the rest is plain input.
Explicit ``prompt_cache_breakpoint``s are not modelled.

Prices and rules per model (``ModelTerms``)
-------------------------------------------

Each request is billed under the terms of its ``model``: the first row of
the cache's table (``ANTHROPIC_MODELS``, ``OPENAI_MODELS``: written here
from the providers' pricing pages and caching guides, apart from obsmask's
own table) one of whose patterns matches it (shell-style, case-insensitive).
A model no row matches gets ``ANTHROPIC_DEFAULT`` / ``OPENAI_DEFAULT``, the
stub's terms from before it had a table (reads 0.1, Anthropic writes 1.25,
OpenAI writes free in 128-token steps, 1,024 tokens), so tests that send
made-up model ids keep the figures they were written for.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Json = dict[str, object]
Clock = Callable[[], float]

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 3
MINIMUM_TOKENS = 1024
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
TTL_SECONDS = {"5m": FIVE_MINUTES, "1h": ONE_HOUR}
# Prices in units of the base input price (the terms of a model no row knows).
READ_PRICE = 0.1
WRITE_PRICES = {FIVE_MINUTES: 1.25, ONE_HOUR: 2.0}
INPUT_PRICE = 1.0
OPENAI_MINIMUM_TOKENS = 1024
OPENAI_STEP_TOKENS = 128
# GPT-5.6 and later: the latest breakpoints a request may read.
OPENAI_BREAKPOINTS_READ = 80
THINKING_TYPES = ("thinking", "redacted_thinking")
CACHE_CONTROL = "cache_control"
OPENAI_TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output",
                       "local_shell_call_output")


# Prices and rules per model ------------------------------------------------------


@dataclass(frozen=True)
class ModelTerms:
    """One family of models as its provider documents its prompt cache:
    prices in units of the base input price, the minimum cacheable prompt,
    and (OpenAI) the rule: 128-token steps with free writes before GPT-5.6,
    an implicit breakpoint with billed, reported writes from GPT-5.6 on."""

    name: str
    patterns: tuple[str, ...]
    read: float
    write: float  # a 5-minute write (Anthropic); an OpenAI write (1.0: free)
    write_1h: float
    minimum: int
    step: int = 1  # OpenAI before GPT-5.6: 128
    breakpoint: bool = False  # OpenAI from GPT-5.6 on (see the module docstring)

    def matches(self, model: str) -> bool:
        lowered = model.lower()
        return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in self.patterns)


def _anthropic(name: str, patterns: tuple[str, ...], read: float, minimum: int) -> ModelTerms:
    # Every Anthropic model: 5-minute writes 1.25x, 1-hour writes 2x.
    return ModelTerms(name, patterns, read, 1.25, 2.0, minimum)


ANTHROPIC_DEFAULT = ModelTerms("anthropic-stub-default", (), READ_PRICE,
                               WRITE_PRICES[FIVE_MINUTES], WRITE_PRICES[ONE_HOUR], MINIMUM_TOKENS)
# Anthropic's pricing page (reads: 0.1x but $0.20 on $4 for Opus 5.5, $0.25 on
# $10 for Fable 5.1 and 5.2, $0.20 on $8 for Mythos 5.1) and prompt caching
# page (minimum cacheable prompt per model), as of late 2026.
ANTHROPIC_MODELS: tuple[ModelTerms, ...] = (
    _anthropic("fable-5.1", ("claude-fable-5-1*", "claude-fable-5-2*", "claude-mythos-5-1*"),
               0.025, 512),
    _anthropic("opus-5.5", ("claude-opus-5-5*",), 0.05, 512),
    _anthropic("opus-5", ("claude-opus-5*",), 0.1, 512),
    _anthropic("sonnet-5", ("claude-sonnet-5*",), 0.1, 1024),
    _anthropic("opus-4.8", ("claude-opus-4-8*",), 0.1, 1024),
    _anthropic("opus-4.7", ("claude-opus-4-7*",), 0.1, 2048),
    _anthropic("opus-4.5", ("claude-opus-4-5*", "claude-opus-4-6*"), 0.1, 4096),
    _anthropic("haiku-4.5", ("claude-haiku-4-5*",), 0.1, 4096),
    _anthropic("sonnet-4", ("claude-sonnet-4*",), 0.1, 1024),
)
OPENAI_DEFAULT = ModelTerms("openai-stub-default", (), READ_PRICE, 1.0, 1.0,
                            OPENAI_MINIMUM_TOKENS, OPENAI_STEP_TOKENS)
# OpenAI's pricing page and prompt caching guide, as of late 2026.
OPENAI_MODELS: tuple[ModelTerms, ...] = (
    ModelTerms("gpt-5.6", ("gpt-5.6*", "gpt-5.7*", "gpt-5.8*", "gpt-5.9*", "gpt-6*"),
               0.1, 1.25, 1.25, 1024, 1, True),
    ModelTerms("gpt-5", ("gpt-5*",), 0.1, 1.0, 1.0, 1024, OPENAI_STEP_TOKENS),
    ModelTerms("gpt-4.1", ("gpt-4.1*",), 0.25, 1.0, 1.0, 1024, OPENAI_STEP_TOKENS),
    ModelTerms("gpt-4o", ("gpt-4o*",), 0.5, 1.0, 1.0, 1024, OPENAI_STEP_TOKENS),
)


def terms_for(models: Sequence[ModelTerms], default: ModelTerms, model: str) -> ModelTerms:
    """The terms ``model`` is billed under: its first matching row, else ``default``."""
    return next((terms for terms in models if terms.matches(model)), default)


# Token counts ----------------------------------------------------------------------


def without_cache_control(value: object) -> object:
    """``value`` with every ``cache_control`` member removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != CACHE_CONTROL}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def string_chars(value: object) -> int:
    """The ``len()`` of every string value inside ``value`` (keys not counted),
    ``cache_control`` members left out."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(string_chars(v) for k, v in value.items() if k != CACHE_CONTROL)
    if isinstance(value, list):
        return sum(string_chars(v) for v in value)
    return 0


# A tokenizer of the stub's own (an "honest" count, as a real provider's,
# for tests that compare obsmask's estimates with what a provider counts):
# the tokens of one string. None: the stub's estimate, characters / 4.
StringTokens = Callable[[str], int] | None


def string_tokens(value: object, count: Callable[[str], int]) -> int:
    """``count`` of every string value inside ``value`` (keys not counted),
    ``cache_control`` members left out."""
    if isinstance(value, str):
        return count(value)
    if isinstance(value, dict):
        return sum(string_tokens(v, count) for k, v in value.items() if k != CACHE_CONTROL)
    if isinstance(value, list):
        return sum(string_tokens(v, count) for v in value)
    return 0


def items_tokens(items: Sequence[object], count: StringTokens = None) -> list[int]:
    """The tokens of the first ``i`` items (messages), for ``i`` from 0 to
    ``len(items)``: ``chars // 4 + 3 * i`` (with ``count``: its tokens
    of the strings, + 3 * i)."""
    out = [0]
    chars = 0
    for number, item in enumerate(items, start=1):
        if count is None:
            chars += string_chars(item)
            out.append(chars // CHARS_PER_TOKEN + TOKENS_PER_MESSAGE * number)
        else:
            chars += string_tokens(item, count)
            out.append(chars + TOKENS_PER_MESSAGE * number)
    return out


def preamble_tokens(*parts: object) -> int:
    """``chars(parts) // 4``: the tokens before the first message."""
    return sum(string_chars(part) for part in parts) // CHARS_PER_TOKEN


def anthropic_preamble_tokens(tools: object, system: object, count: StringTokens) -> int:
    """The tokens before the first message: ``preamble_tokens``, or with
    ``count`` its tokens of each tool definition's JSON (a provider reads a
    tool's schema, not only its strings) and of the system's strings."""
    if count is None:
        return preamble_tokens(tools, system)
    definitions = tools if isinstance(tools, list) else []
    return (sum(count(json.dumps(without_cache_control(tool), ensure_ascii=False))
                for tool in definitions)
            + string_tokens(system, count))


def _object(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _canonical(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _chained(previous: bytes, value: object) -> bytes:
    return hashlib.sha256(previous + _canonical(value)).digest()


# Anthropic Messages ----------------------------------------------------------------


class InvalidRequest(Exception):
    """A request the API refuses with HTTP 400 (``invalid_request_error``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> Json:
        """The error as the API writes it."""
        return {"type": "error",
                "error": {"type": "invalid_request_error", "message": self.message}}


@dataclass(frozen=True)
class Breakpoint:
    """One ``cache_control`` of a request, where the cache sees it."""

    block: int  # the block's number in cache order (tools first), from 0
    part: str  # "tools", "system" or "messages"
    message: int | None  # the message's index, for "messages"
    position: int  # the tool's, system block's or content block's index in its list
    # Where the ``cache_control`` member is: the JSON path of the object that
    # holds it (``()``: the body, a top-level cache_control).
    path: tuple[str | int, ...]
    cache_control: Json
    automatic: bool = False  # placed on the last block by a top-level cache_control

    @property
    def ttl(self) -> float:
        """The lifetime of what it writes, in seconds."""
        return TTL_SECONDS.get(str(self.cache_control.get("ttl", "5m")), FIVE_MINUTES)


@dataclass(frozen=True)
class Boundary:
    """A prefix of a request, ending after block ``block`` (cache order)."""

    block: int
    part: str
    message: int | None
    position: int
    tokens: int  # billed: through the whole preamble, or the whole message


@dataclass(frozen=True)
class AnthropicBill:
    """What one request read from and wrote to the cache, and its cost."""

    model: str
    total_tokens: int
    breakpoints: tuple[Breakpoint, ...]
    read: Boundary | None  # the prefix read from the cache, if any
    written: tuple[Boundary, ...]  # the entries written (breakpoints past the read)
    cache_read_input_tokens: int
    cache_creation_5m_tokens: int
    cache_creation_1h_tokens: int
    input_tokens: int
    terms: ModelTerms = field(default=ANTHROPIC_DEFAULT, compare=False)  # the prices billed

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.cache_creation_5m_tokens + self.cache_creation_1h_tokens

    @property
    def units(self) -> float:
        """The bill, in units of the base input price, at the model's prices."""
        return (self.cache_read_input_tokens * self.terms.read
                + self.cache_creation_5m_tokens * self.terms.write
                + self.cache_creation_1h_tokens * self.terms.write_1h
                + self.input_tokens * INPUT_PRICE)

    def usage(self, output_tokens: int) -> Json:
        """The ``usage`` object of the answer, as the API writes it."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_5m_tokens,
                "ephemeral_1h_input_tokens": self.cache_creation_1h_tokens,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


@dataclass(frozen=True)
class _Block:
    part: str
    message: int | None
    position: int
    key: object  # what the cache compares: the block, cache_control removed, and where it is
    tokens: int  # billed for a prefix that ends after it


@dataclass
class _Entry:
    expires: float
    ttl: float


def _as_blocks(value: object) -> list[object]:
    """A ``system`` or message ``content``: a string is one text block."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, list):
        return list(value)
    return []


def _blocks(request: Json, count: StringTokens = None) -> list[_Block]:
    """Every block of ``request``, in cache order."""
    tools, system = request.get("tools"), request.get("system")
    messages = _list(request.get("messages"))
    preamble = anthropic_preamble_tokens(tools, system, count)
    out = [_Block("tools", None, n, ["tools", without_cache_control(tool)], preamble)
           for n, tool in enumerate(tools if isinstance(tools, list) else [])]
    out += [_Block("system", None, n, ["system", without_cache_control(block)], preamble)
            for n, block in enumerate(_as_blocks(system))]
    through = items_tokens(messages, count)
    for m, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        for n, block in enumerate(_as_blocks(content)):
            key = ["messages", m, role, without_cache_control(block)]
            out.append(_Block("messages", m, n, key, preamble + through[m + 1]))
    return out


def _has_cache_control(value: object) -> bool:
    return isinstance(value, dict) and value.get(CACHE_CONTROL) is not None


def breakpoints(request: Json) -> tuple[Breakpoint, ...]:
    """The breakpoints of ``request``, in cache order; ``InvalidRequest`` for
    more than 4, or for one on a thinking block."""
    found: list[Breakpoint] = []
    block = 0

    def look(value: object, part: str, message: int | None, position: int,
             path: tuple[str | int, ...]) -> None:
        if not isinstance(value, dict):
            return
        if _has_cache_control(value) and value.get("type") in THINKING_TYPES:
            where = ".".join(map(str, path))
            raise InvalidRequest(
                f"{where}.{value.get('type')}.cache_control: Extra inputs are not permitted")
        if _has_cache_control(value):
            found.append(Breakpoint(block, part, message, position, path,
                                    _object(value[CACHE_CONTROL])))
        inner = value.get("content")
        for n, nested in enumerate(inner if isinstance(inner, list) else []):
            if isinstance(nested, dict) and _has_cache_control(nested):
                found.append(Breakpoint(block, part, message, position,
                                        (*path, "content", n), _object(nested[CACHE_CONTROL])))

    tools, system = request.get("tools"), request.get("system")
    messages = _list(request.get("messages"))
    for n, tool in enumerate(tools if isinstance(tools, list) else []):
        look(tool, "tools", None, n, ("tools", n))
        block += 1
    for n, system_block in enumerate(_as_blocks(system)):
        look(system_block, "system", None, n, ("system", n))
        block += 1
    last: tuple[int, int, int] | None = None  # block, message, position
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for n, content_block in enumerate(_as_blocks(content)):
            look(content_block, "messages", m, n, ("messages", m, "content", n))
            if not (isinstance(content_block, dict)
                    and content_block.get("type") in THINKING_TYPES):
                last = (block, m, n)
            block += 1
    automatic = request.get(CACHE_CONTROL)
    if automatic is not None and last is not None and last[0] not in {b.block for b in found}:
        found.append(Breakpoint(last[0], "messages", last[1], last[2], (),
                                _object(automatic), True))
    if len(found) > MAX_BREAKPOINTS:
        raise InvalidRequest(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may "
                             f"be provided. Found {len(found)}.")
    return tuple(sorted(found, key=lambda b: b.block))


class AnthropicPromptCache:
    """An Anthropic prompt cache (see the module docstring); ``bill`` reads
    and writes it for one request and records the bill in ``bills``."""

    def __init__(self, *, models: Sequence[ModelTerms] = ANTHROPIC_MODELS,
                 minimum_tokens: int | None = None, clock: Clock = time.monotonic,
                 count: StringTokens = None) -> None:
        self.models = tuple(models)
        self.count = count
        # When told, every model's minimum; else each model's own.
        self.minimum_tokens = minimum_tokens
        self.clock = clock
        self.bills: list[AnthropicBill] = []
        self._entries: dict[bytes, _Entry] = {}
        self._lock = threading.Lock()

    def total_units(self) -> float:
        """The bill of every request so far, in units of the base input price."""
        with self._lock:
            return sum(b.units for b in self.bills)

    def live_entries(self) -> int:
        now = self.clock()
        with self._lock:
            return sum(e.expires > now for e in self._entries.values())

    def bill(self, request: Json) -> AnthropicBill:
        """Serve ``request`` from the cache: its bill (also appended to
        ``bills``); ``InvalidRequest`` when the API would refuse it."""
        if not isinstance(request.get("messages"), list):
            raise InvalidRequest("messages: Field required")
        marks = breakpoints(request)
        blocks = _blocks(request, self.count)
        model = str(request.get("model", ""))
        terms = self.terms(model)
        minimum = terms.minimum if self.minimum_tokens is None else self.minimum_tokens
        keys: list[bytes] = []
        key = hashlib.sha256(_canonical(model)).digest()
        for block in blocks:
            key = _chained(key, block.key)
            keys.append(key)
        total = (anthropic_preamble_tokens(request.get("tools"), request.get("system"),
                                           self.count)
                 + items_tokens(_list(request.get("messages")), self.count)[-1])
        with self._lock:
            now = self.clock()
            read_at = self._read(marks, keys, now)
            billed_read = blocks[read_at].tokens if read_at is not None else 0
            writes: list[tuple[Breakpoint, int]] = []
            for mark in marks:
                tokens = blocks[mark.block].tokens
                if tokens < minimum:
                    continue
                entry = self._entries.get(keys[mark.block])
                if entry is not None and entry.expires > now:
                    entry.ttl = max(entry.ttl, mark.ttl)
                    entry.expires = max(entry.expires, now + mark.ttl)
                else:
                    self._entries[keys[mark.block]] = _Entry(now + mark.ttl, mark.ttl)
                if read_at is None or mark.block > read_at:
                    writes.append((mark, tokens))
            created = {FIVE_MINUTES: 0, ONE_HOUR: 0}
            before = billed_read
            for mark, tokens in writes:
                created[mark.ttl] += tokens - before
                before = tokens
            # Two cache_control on one block write one entry.
            written = tuple(self._boundary(blocks, k)
                            for k in sorted({mark.block for mark, _ in writes}))
            bill = AnthropicBill(
                model=model,
                total_tokens=total,
                breakpoints=marks,
                read=None if read_at is None else self._boundary(blocks, read_at),
                written=written,
                cache_read_input_tokens=billed_read,
                cache_creation_5m_tokens=created[FIVE_MINUTES],
                cache_creation_1h_tokens=created[ONE_HOUR],
                input_tokens=total - before,
                terms=terms,
            )
            self.bills.append(bill)
            return bill

    def terms(self, model: str) -> ModelTerms:
        """The terms a request to ``model`` is billed under."""
        return terms_for(self.models, ANTHROPIC_DEFAULT, model)

    def _read(self, marks: Sequence[Breakpoint], keys: Sequence[bytes],
              now: float) -> int | None:
        """The last block of the longest live prefix within the lookback of a
        breakpoint, its entry refreshed; None when there is none."""
        candidates = {k for mark in marks
                      for k in range(mark.block, max(-1, mark.block - LOOKBACK_BLOCKS), -1)}
        for k in sorted(candidates, reverse=True):
            entry = self._entries.get(keys[k])
            if entry is not None and entry.expires > now:
                entry.expires = max(entry.expires, now + entry.ttl)
                return k
        return None

    @staticmethod
    def _boundary(blocks: Sequence[_Block], k: int) -> Boundary:
        block = blocks[k]
        return Boundary(k, block.part, block.message, block.position, block.tokens)


# OpenAI (Chat Completions, Responses) ----------------------------------------------


@dataclass(frozen=True)
class OpenAIBill:
    """What one request shared with earlier ones, what was cached and what
    written."""

    model: str
    prompt_tokens: int
    shared_items: int | None  # items of the prefix read (None: not even the preamble)
    shared_tokens: int
    cached_tokens: int
    # GPT-5.6 and later: written at the implicit breakpoint (billed, reported).
    cache_write_tokens: int = 0
    terms: ModelTerms = field(default=OPENAI_DEFAULT, compare=False)

    def units(self, cached_price: float | None = None) -> float:
        """The bill in units of the base input price at the model's prices
        (``cached_price``, when given: cached tokens at that price, every
        other token at 1.0)."""
        if cached_price is not None:
            return (self.prompt_tokens - self.cached_tokens) + self.cached_tokens * cached_price
        plain = self.prompt_tokens - self.cached_tokens - self.cache_write_tokens
        return (plain * INPUT_PRICE + self.cached_tokens * self.terms.read
                + self.cache_write_tokens * self.terms.write)

    def _details(self) -> Json:
        details: Json = {"cached_tokens": self.cached_tokens}
        if self.terms.breakpoint:
            details["cache_write_tokens"] = self.cache_write_tokens
        return details

    def chat_usage(self, completion_tokens: int) -> Json:
        """The Chat Completions ``usage`` object."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
            "prompt_tokens_details": {**self._details(), "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def responses_usage(self, output_tokens: int) -> Json:
        """The Responses ``usage`` object."""
        return {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": self._details(),
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.prompt_tokens + output_tokens,
        }


def openai_cached_tokens(shared: int, minimum: int = OPENAI_MINIMUM_TOKENS,
                         step: int = OPENAI_STEP_TOKENS) -> int:
    """``shared`` tokens as OpenAI bills them cached: nothing under
    ``minimum``, else rounded down to ``minimum + k * step``."""
    if shared < minimum:
        return 0
    return minimum + (shared - minimum) // step * step


def implicit_breakpoint(items: Sequence[object]) -> int | None:
    """GPT-5.6's implicit breakpoint: the number of items through the latest
    user or tool message (Chat ``role`` ``user``/``tool``; Responses a
    ``user`` message or a ``*_call_output``), None without one."""
    for number in range(len(items), 0, -1):
        item = items[number - 1]
        if isinstance(item, dict) and (item.get("role") in ("user", "tool")
                                       or item.get("type") in OPENAI_TOOL_OUTPUTS):
            return number
    return None


class OpenAIPromptCache:
    """OpenAI's prompt cache over the list ``items_member`` of the body
    (``"messages"`` for Chat Completions, ``"input"`` for Responses), each
    request under its model's terms (``models``; the module docstring);
    ``bill`` serves one request and records its bill in ``bills``.
    ``minimum_tokens`` and ``step_tokens``, when told, replace every model's."""

    def __init__(self, items_member: str, *, models: Sequence[ModelTerms] = OPENAI_MODELS,
                 minimum_tokens: int | None = None, step_tokens: int | None = None) -> None:
        self.items_member = items_member
        self.models = tuple(models)
        self.minimum_tokens = minimum_tokens
        self.step_tokens = step_tokens
        self.bills: list[OpenAIBill] = []
        self._seen: set[bytes] = set()
        self._entries: list[bytes] = []  # GPT-5.6 on: written at breakpoints, oldest first
        self._lock = threading.Lock()

    def terms(self, model: str) -> ModelTerms:
        """The terms a request to ``model`` is billed under."""
        return terms_for(self.models, OPENAI_DEFAULT, model)

    def total_units(self) -> float:
        """The bill of every request so far, in units of the base input price."""
        with self._lock:
            return sum(b.units() for b in self.bills)

    def bill(self, request: Json) -> OpenAIBill:
        value = request.get(self.items_member)
        items: list[object] = [value] if isinstance(value, str) else _list(value)
        model = str(request.get("model", ""))
        terms = self.terms(model)
        minimum = terms.minimum if self.minimum_tokens is None else self.minimum_tokens
        step = terms.step if self.step_tokens is None else self.step_tokens
        preamble = preamble_tokens(request.get("instructions"), request.get("tools"))
        through = [preamble + tokens for tokens in items_tokens(items)]
        key = _chained(_canonical(model), [request.get("instructions"), request.get("tools")])
        keys = [key]
        for item in items:
            key = _chained(key, item)
            keys.append(key)
        with self._lock:
            if terms.breakpoint:
                shared, cached, written = self._breakpoint(keys, through, items, minimum)
            else:
                shared = next((i for i in range(len(keys) - 1, -1, -1) if keys[i] in self._seen),
                              None)
                self._seen.update(keys)
                cached = openai_cached_tokens(0 if shared is None else through[shared],
                                              minimum, step)
                written = 0
            bill = OpenAIBill(
                model=model,
                prompt_tokens=through[-1],
                shared_items=shared,
                shared_tokens=0 if shared is None else through[shared],
                cached_tokens=cached,
                cache_write_tokens=written,
                terms=terms,
            )
            self.bills.append(bill)
            return bill

    def _breakpoint(self, keys: Sequence[bytes], through: Sequence[int],
                    items: Sequence[object], minimum: int) -> tuple[int | None, int, int]:
        """GPT-5.6 and later: (items read, tokens read, tokens written)."""
        mark = implicit_breakpoint(items)
        if mark is None:
            return None, 0, 0
        live = set(self._entries[-OPENAI_BREAKPOINTS_READ:])
        shared = next((i for i in range(mark, -1, -1) if keys[i] in live), None)
        cached = 0 if shared is None else through[shared]
        written = 0
        if through[mark] >= minimum:
            written = through[mark] - cached
            if keys[mark] in self._entries:
                self._entries.remove(keys[mark])
            self._entries.append(keys[mark])
        return shared, cached, written
