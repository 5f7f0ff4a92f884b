"""Property-based tests of ``price_model = "auto"`` over the model table
(``conversation/billing/model_prices.toml``): random conversations sent
with a random ``model``, either one a row of the shipped table matches or
one no row of its provider matches, masked by the package's own rewrite
(``Masker``) and billed by providers written apart from it
(``support.caching_provider``) at the row's prices.

- the bill so far of the requests as forwarded stays within
  allowance_percent of the bill of the requests as sent, at every request,
  under the row the model matched, and, for a model no row knows, under
  every row of its provider (the cautious row must keep the promise
  whichever of them the model really is);
- the flow's bill names the row the model was priced under
  (``bill.model_row``): the first row of its provider whose patterns match
  it, as matched here with ``fnmatch`` apart from the package, or
  ``<provider>-unknown``.

The policies leave out two rules whose bills are known to be optimistic
under every price model (``test_properties_ledger.py``, the xfail tests):
keep_last_k_per_tool and the clipping stage.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from dataclasses import dataclass
from typing import cast

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.billing.model_table import ModelRow, shipped_rows
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, Refused, Unreadable
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.caching_provider import AnthropicPromptCache, ModelTerms, OpenAIPromptCache
from support.chat import LONG_OUTPUT
from support.conversation_strategies import growing_conversations, requests_of
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert

ROWS = shipped_rows()
# The table's prices are thousandths of the base input price.
UNIT = 1000
FLOAT_EPSILON = 1e-6
OPENAI_STEP = 128
# Every id a pattern's "*" may stand for is drawn from these characters, so
# that drawn ids look like real ones and sometimes reach into another row.
ID_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789-._"


def rows_of(provider: str) -> list[ModelRow]:
    return [row for row in ROWS if row.provider == provider]


def matched_row(provider: str, model: str) -> ModelRow | None:
    """The first row of ``provider`` one of whose patterns matches ``model``
    (shell-style, case-insensitive), matched here apart from the package."""
    for row in rows_of(provider):
        if any(fnmatch.fnmatchcase(model.lower(), p.lower()) for p in row.patterns):
            return row
    return None


@st.composite
def known_models(draw: st.DrawFn, provider: str) -> str:
    """An id one of ``provider``'s rows' patterns matches: a pattern with
    each ``*`` (and ``?``, and ``[a-b]`` class) filled in, in a random case."""
    row = draw(st.sampled_from(rows_of(provider)))
    pattern = draw(st.sampled_from(row.patterns))
    out = []
    position = 0
    while position < len(pattern):
        character = pattern[position]
        if character == "*":
            out.append(draw(st.text(ID_CHARACTERS, max_size=12)))
        elif character == "?":
            out.append(draw(st.sampled_from(ID_CHARACTERS)))
        elif character == "[":
            close = pattern.index("]", position)
            low, _, high = pattern[position + 1:close].partition("-")
            letters = [chr(c) for c in range(ord(low), ord(high or low) + 1)]
            out.append(draw(st.sampled_from(letters)))
            position = close
        else:
            out.append(character)
        position += 1
    model = "".join(out)
    if draw(st.booleans()):
        model = "".join(c.upper() if draw(st.booleans()) else c for c in model)
    assert matched_row(provider, model) is not None
    return model


def unknown_models(provider: str) -> st.SearchStrategy[str]:
    """Ids no row of ``provider`` matches: random text, the other provider's
    names, and near misses of this provider's."""
    other = "openai" if provider == "anthropic" else "anthropic"
    return st.one_of(
        st.text(ID_CHARACTERS + "/:ABC", max_size=30),
        known_models(other),
        st.sampled_from(["claude-unknown-9", "claude-", "gpt-4", "gpt-3.5-turbo",
                         "my-fine-tune", "o2-mini"]),
    ).filter(lambda model: matched_row(provider, model) is None)


@dataclass(frozen=True)
class Drawn:
    """A model id, and the row the test expects the package to choose."""

    provider: str
    model: str
    row: ModelRow | None  # None: unknown, the provider's cautious row

    @property
    def row_name(self) -> str:
        return self.row.name if self.row is not None else f"{self.provider}-unknown"


def drawn(provider: str, model: str) -> Drawn:
    return Drawn(provider, model, matched_row(provider, model))




@st.composite
def priced_conversations(draw: st.DrawFn) -> list[Event]:
    """The growing conversations of the frontier's tests, with a first
    message under every minimum of the table ("go"), between them, or over
    them all (~2,250 and ~5,000 tokens)."""
    events = draw(growing_conversations())
    prompt = draw(st.sampled_from(["go", "Fix it. " * 300, "Context: " * 1000,
                                   "Context: " * 2200]))
    return [Say("user", prompt), *events[1:]]


policies = st.builds(
    MaskPolicy,
    price_model=st.just("auto"),
    refetch_guard=st.booleans(),
    window_turns=st.integers(1, 4),
    batch_turns=st.integers(1, 3),
    keep_errors=st.booleans(),
    trigger_tokens=st.sampled_from([0, 500, 3000]),
    min_chars=st.sampled_from([0, 300]),
    min_free_percent=st.sampled_from([0, 20, 80]),
    allowance_percent=st.sampled_from([0, 2, 10]),
    frontier_breakpoint=st.booleans(),
)


# The oracles: a provider written apart from the package, billed at a row's
# prices (in units of the base input price).


class Oracle:
    """One conversation's requests as sent and as forwarded, each billed by
    its own provider cache (``support.caching_provider``: its rules, written
    apart from the package) under one row's prices and minimum."""

    def __init__(self, row: ModelRow, fmt: WireFormat) -> None:
        self.row = row
        self.requests = 0
        terms = ModelTerms(row.name, ("*",), row.read / UNIT, row.write / UNIT,
                           row.write_1h / UNIT, row.minimum,
                           step=OPENAI_STEP if row.cache == "openai_prefix_steps" else 1,
                           breakpoint=row.cache == "openai_prefix")
        self._caches: tuple[AnthropicPromptCache, AnthropicPromptCache] \
            | tuple[OpenAIPromptCache, OpenAIPromptCache]
        if fmt is ANTHROPIC:
            self._caches = (AnthropicPromptCache(models=(terms,), clock=lambda: 0.0),
                            AnthropicPromptCache(models=(terms,), clock=lambda: 0.0))
        else:
            self._caches = (OpenAIPromptCache(fmt.list_member, models=(terms,)),
                            OpenAIPromptCache(fmt.list_member, models=(terms,)))

    @property
    def sent(self) -> float:
        return self._caches[0].total_units()

    @property
    def forwarded(self) -> float:
        return self._caches[1].total_units()

    def bill(self, sent: dict[str, object], forwarded: dict[str, object]) -> None:
        self._caches[0].bill(sent)
        self._caches[1].bill(forwarded)
        self.requests += 1

    def tolerance(self) -> float:
        """What rounding may add per request, and nothing else: the floor of
        characters / 4 (one uncached token) and, under OpenAI's 128-token
        steps, one step less read (``test_properties_ledger.py``, (d))."""
        if self.row.cache == "anthropic_breakpoints":
            return 0.0
        per_request = self.row.write / UNIT
        if self.row.cache == "openai_prefix_steps":
            per_request += (OPENAI_STEP - 1) * (self.row.write - self.row.read) / UNIT
        return self.requests * per_request


def oracle_rows(drawn: Drawn) -> list[ModelRow]:
    """The rows the model may really be billed under: its own, or for a
    model no row knows, any of its provider's (one per distinct terms)."""
    if drawn.row is not None:
        return [drawn.row]
    distinct: dict[tuple[object, ...], ModelRow] = {}
    for row in rows_of(drawn.provider):
        distinct.setdefault((row.read, row.write, row.write_1h, row.minimum, row.cache), row)
    return list(distinct.values())


def body_of(fmt: WireFormat, items: list[object], model: str) -> dict[str, object]:
    """The request body: an Anthropic one as Claude Code sends it."""
    if fmt is ANTHROPIC:
        return claude_code_body(items, model=model)
    return {"model": model, fmt.list_member: items}


def replay_and_check(events: list[Event], policy: MaskPolicy, fmt: WireFormat,
                     drawn: Drawn) -> None:
    masker = Masker(policy)
    oracles = [Oracle(row, fmt) for row in oracle_rows(drawn)]
    for number, request in enumerate(requests_of(events), 1):
        body = body_of(fmt, convert(fmt, request), drawn.model)
        outcome = masker.mask(json.dumps(body).encode(), fmt)
        assert not isinstance(outcome, Refused | Unreadable), outcome
        forwarded = cast(dict[str, object], json.loads(outcome.body)) \
            if isinstance(outcome, Masked) else body

        # The flow's bill names the row the model matched.
        bill = outcome.plan.bill if outcome.plan is not None else None
        assert bill is not None, f"request {number}: no bill under price_model auto"
        row = bill.as_metadata()["model_row"]
        assert isinstance(row, dict)
        assert row["row"] == drawn.row_name, (drawn.model, row)
        assert row["known"] is (drawn.row is not None)
        assert row["model"] == (drawn.model or None)

        # The promise, billed apart under each row the model may be.
        for oracle in oracles:
            oracle.bill(body, forwarded)
            limit = oracle.sent * (1 + policy.allowance_percent / 100) + oracle.tolerance()
            assert oracle.forwarded <= limit + FLOAT_EPSILON * max(1.0, limit), (
                f"request {number}, model {drawn.model!r} billed as {oracle.row.name}: "
                f"forwarded {oracle.forwarded:.3f} > {limit:.3f} "
                f"(sent {oracle.sent:.3f}, ledger {bill})")


FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def shipped_like(**keys: object) -> MaskPolicy:
    base = MaskPolicy(price_model="auto", window_turns=1, min_free_percent=20,
                      allowance_percent=2, frontier_breakpoint=True, refetch_guard=True)
    return dataclasses.replace(base, **keys)


# Found by these tests (hypothesis's shrunk examples), kept as examples
# of what once failed. Under GPT-5.6's rule
# the ledger estimates the masked request of request 4 at 1,059 tokens
# (placeholders counted heavier, freed text at 90%), over the 1,024-token
# minimum, and bills the next requests as reading it; the provider counts
# 887 tokens, under the minimum: nothing is written or read, and from
# request 5 on every forwarded request is billed whole. Request 6: 4,584
# billed against 4,174.9 sent, allowance 0. (The floor a move keeps is now
# held against what masking really frees.)
UNDER_THE_MINIMUM: list[Event] = [
    Say("user", "go"), Turn([Call("c0_0", "bash", {"c": 1})], text="t"),
    Result("c0_0", LONG_OUTPUT),
    Turn([Call("c1_0", "bash", {"c": 1})], text="t"), Result("c1_0", "x" * 4000),
    Turn([Call("c2_0", "bash", {"c": 1}), Call("c2_1", "bash", {"c": 1})], text="t"),
    Result("c2_0", "Traceback (most recent call last):\n  x\nKeyError: 1\n" * 20),
    Result("c2_1", LONG_OUTPUT),
    Turn([Call("c3_0", "bash", {"c": 1})], text="t"), Result("c3_0", "ok"),
    Turn([Call("c4_0", "bash", {"c": 1})], text="t"), Result("c4_0", "ok")]
# An unknown Anthropic model is priced under the cautious row's 512-token
# minimum; a model with a 1,024-token minimum (claude-sonnet-5) does not
# cache the masked request 3, which the ledger counted as read at 0.025:
# 3,264.5 billed against 2,655.55 sent, allowance 10%. (A move for an
# unknown model must now pay under each row of its provider.)
SMALLER_MINIMUM: list[Event] = [
    Say("user", "go"), Turn([Call("c0_0", "bash", {"c": 1})], text="t"),
    Result("c0_0", LONG_OUTPUT),
    Turn([Call("c1_0", "bash", {"c": 1})], text="t"), Result("c1_0", LONG_OUTPUT)]
ALLOWANCE_0 = dict(window_turns=1, batch_turns=1, keep_errors=False, trigger_tokens=0,
                   min_chars=0, min_free_percent=0, allowance_percent=0,
                   frontier_breakpoint=False, refetch_guard=False)

LONG_SESSION: list[Event] = [
    Say("user", "Context: " * 1000),
    *[e for t in range(8) for e in (Turn([Call(f"c{t}", "bash")], text="t"),
                                    Result(f"c{t}", "y" * 9000))]]


def known(provider: str) -> st.SearchStrategy[Drawn]:
    return known_models(provider).map(lambda model: drawn(provider, model))


def unknown(provider: str) -> st.SearchStrategy[Drawn]:
    return unknown_models(provider).map(lambda model: drawn(provider, model))


@FAST
@example(events=LONG_SESSION, policy=shipped_like(), model=drawn("anthropic", "claude-fable-5-1"))
@given(events=priced_conversations(), policy=policies, model=known("anthropic"))
def test_a_known_anthropic_model_keeps_the_bill_within_the_allowance_and_is_named(
        events, policy, model):
    """Anthropic Messages sent as Claude Code sends them, with a model a
    row of the table matches: billed at that row's prices."""
    replay_and_check(events, policy, ANTHROPIC, model)


@FAST
@example(events=SMALLER_MINIMUM, model=drawn("anthropic", ""),
         policy=shipped_like(**{**ALLOWANCE_0, "allowance_percent": 10}))
@example(events=LONG_SESSION, policy=shipped_like(), model=drawn("anthropic", "claude-next-7"))
@given(events=priced_conversations(), policy=policies, model=unknown("anthropic"))
def test_an_unknown_anthropic_model_keeps_the_bill_within_the_allowance_under_every_row(
        events, policy, model):
    """Anthropic Messages with a model no row matches: priced under the
    cautious row, billed at every Anthropic row's prices."""
    replay_and_check(events, policy, ANTHROPIC, model)


@FAST
@example(events=UNDER_THE_MINIMUM, fmt=CHAT, model=drawn("openai", "gpt-5.6"),
         policy=shipped_like(**ALLOWANCE_0))
@example(events=LONG_SESSION, policy=shipped_like(), fmt=CHAT,
         model=drawn("openai", "gpt-5.6-mini"))
@given(events=priced_conversations(), policy=policies,
       fmt=st.sampled_from([CHAT, RESPONSES]), model=known("openai"))
def test_a_known_openai_model_keeps_the_bill_within_the_allowance_and_is_named(
        events, policy, fmt, model):
    """Chat Completions and Responses with a model a row matches."""
    replay_and_check(events, policy, fmt, model)


@FAST
@example(events=UNDER_THE_MINIMUM, fmt=CHAT, model=drawn("openai", ""),
         policy=shipped_like(**ALLOWANCE_0))
@example(events=LONG_SESSION, policy=shipped_like(), fmt=RESPONSES,
         model=drawn("openai", "gpt-7-preview"))
@given(events=priced_conversations(), policy=policies,
       fmt=st.sampled_from([CHAT, RESPONSES]), model=unknown("openai"))
def test_an_unknown_openai_model_keeps_the_bill_within_the_allowance_under_every_row(
        events, policy, fmt, model):
    """Chat Completions and Responses with a model no row matches: priced
    under the cautious row, billed at every OpenAI row's prices."""
    replay_and_check(events, policy, fmt, model)
