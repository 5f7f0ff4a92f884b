"""Adversarial sessions: result sizes chosen to make a cache-aware masking
rule pay more than no masking at some point of a session.

Generated like the synthetic sessions (``benchlib.cache.synthetic``), in Chat
Completions, deterministically: session n of ``ADVERSARIAL_SESSIONS`` is
drawn with ``random.Random(ADVERSARIAL_SEED + n)``. Each starts with the
synthetic sessions' system prompt and a task of 3,000 characters; each tool
turn is one assistant message (80-200 characters of prose) with one call
(read_file or grep, or bash for the tables and checksums below) and its one
result, whose size the family fixes; every session ends with a tool result.
Texts come from ``TextMaker``, so they tokenise like real output (about 4
characters a token) except where a family says otherwise; none reads as an
error, so ``keep_errors`` keeps none of them.

Families:

- uniform: 200 tool turns whose results all have the same size, 2,000,
  8,000 or 32,000 characters (one session each). Masking is a pure function
  of the request, so the first k tool turns of this session are the session
  of k tool turns, request for request: its worst bill so far covers every
  session length from 5 to 200 tool turns at once. The bill so far after
  the request holding turn k's result (the final ratio of the k-turn
  session) is also reported for k in ``UNIFORM_CHECKPOINTS``.
- burst: 30 tool turns of small results (200-400 characters), then 8 of
  30,000 characters, the session ending there ("burst-end"), or followed by
  10 more small turns ("burst-middle").
- all-small: 150 tool turns of 100-300 characters (masking can free little,
  and a result shorter than its placeholder is never masked).
- alternating: 80 tool turns alternating a tiny result (100-200 characters)
  and a huge one (20,000): every move of a masking frontier re-bills huge
  results still in the window, and the results that leave the window are
  half of them tiny.
- dense-sparse: 60 tool turns of 8,000 characters alternating a padded table
  (about 8 characters per token) and ``sha256sum`` output (about 2): a rule
  that weighs what a move frees and re-bills in characters, not tokens,
  overrates what masking the tables frees and underrates what re-billing
  the checksums costs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from benchlib.cache.synthetic import opening_messages
from benchlib.cache.text_maker import TextMaker
from obsmask_core.offline.cache.sessions import Session

ADVERSARIAL_SEED = 1001
TASK_CHARS = 3000
UNIFORM_TURNS = 200
UNIFORM_SIZES = (2_000, 8_000, 32_000)
UNIFORM_CHECKPOINTS = (5, 10, 12, 16, 20, 30, 50, 100, 200)

# One tool result to generate: (shape, characters). Shapes: "code" (a
# read_file or grep output), "table" (padded, sparse), "checksums" (dense).
Result = tuple[str, int]
Draw = Callable[[random.Random], list[Result]]


@dataclass(frozen=True)
class SessionSpec:
    name: str
    family: str
    results: Draw  # the results of its tool turns, in order
    checkpoints: tuple[int, ...] = ()


def _uniform(size: int) -> Draw:
    return lambda rng: [("code", size)] * UNIFORM_TURNS


def _small(rng: random.Random, turns: int, low: int, high: int) -> list[Result]:
    return [("code", rng.randint(low, high)) for _ in range(turns)]


def _burst(small_after: int) -> Draw:
    return lambda rng: (_small(rng, 30, 200, 400) + [("code", 30_000)] * 8
                        + _small(rng, small_after, 200, 400))


def _alternating(rng: random.Random) -> list[Result]:
    return [("code", 20_000) if turn % 2 else ("code", rng.randint(100, 200))
            for turn in range(80)]


def _dense_sparse(rng: random.Random) -> list[Result]:
    return [("checksums" if turn % 2 else "table", 8_000) for turn in range(60)]


ADVERSARIAL_SESSIONS: tuple[SessionSpec, ...] = (
    *(SessionSpec(f"adversarial-uniform-{size}", "uniform", _uniform(size), UNIFORM_CHECKPOINTS)
      for size in UNIFORM_SIZES),
    SessionSpec("adversarial-burst-end", "burst", _burst(0)),
    SessionSpec("adversarial-burst-middle", "burst", _burst(10)),
    SessionSpec("adversarial-all-small", "all-small", lambda rng: _small(rng, 150, 100, 300)),
    SessionSpec("adversarial-alternating", "alternating", _alternating),
    SessionSpec("adversarial-dense-sparse", "dense-sparse", _dense_sparse),
)

ADVERSARIAL_FAMILIES: dict[str, object] = {
    "seed": "random.Random(ADVERSARIAL_SEED + n) for session n, ADVERSARIAL_SEED = 1001",
    "format": "chat (Chat Completions)",
    "every_session": "the synthetic system prompt, a 3,000-character task, then tool turns "
                     "of one assistant message (80-200 characters) with one call and its "
                     "result; ends with a tool result; no result reads as an error",
    "uniform": {"sessions": [f"adversarial-uniform-{size}" for size in UNIFORM_SIZES],
                "tool_turns": UNIFORM_TURNS,
                "result_chars": "all the same: 2,000, 8,000 or 32,000",
                "why": "masking is a pure function of the request: the first k tool turns "
                       "are the k-turn session, so the worst bill so far covers every "
                       "length from 5 to 200 tool turns; the final ratio of the k-turn "
                       "session is in ratio_at_tool_turns",
                "checkpoints": list(UNIFORM_CHECKPOINTS)},
    "burst": {"sessions": ["adversarial-burst-end", "adversarial-burst-middle"],
              "result_chars": "30 turns of 200-400, then 8 of 30,000; burst-middle adds "
                              "10 turns of 200-400",
              "why": "large results just before the end, or a move right after them"},
    "all-small": {"sessions": ["adversarial-all-small"], "tool_turns": 150,
                  "result_chars": "100-300",
                  "why": "little to free, the placeholder hardly shorter than a result"},
    "alternating": {"sessions": ["adversarial-alternating"], "tool_turns": 80,
                    "result_chars": "alternately 100-200 and 20,000",
                    "why": "a move re-bills huge results in the window while half the "
                           "results it masks are tiny"},
    "dense-sparse": {"sessions": ["adversarial-dense-sparse"], "tool_turns": 60,
                     "result_chars": "8,000, alternately a padded table (about 8 characters "
                                     "per token) and sha256sum output (about 2)",
                     "why": "a rule counting characters rather than tokens overrates what "
                            "masking frees and underrates what a move re-bills"},
}

_CODE_TOOLS = ("read_file", "grep")


def _result_text(text: TextMaker, shape: str, size: int) -> tuple[str, str]:
    """(tool name, output) of one result."""
    if shape == "table":
        return "bash", f"<returncode>0</returncode>\n<output>\n{text.padded_table(size)}\n</output>"
    if shape == "checksums":
        return "bash", f"<returncode>0</returncode>\n<output>\n{text.checksums(size)}\n</output>"
    tool = text.rng.choice(_CODE_TOOLS)
    # TextMaker may stop one character short; a newline makes sizes exact.
    return tool, text.tool_output(tool, size).ljust(size, "\n")


def adversarial_session(number: int) -> Session:
    """Session ``number`` of ``ADVERSARIAL_SESSIONS`` (fixed seed)."""
    spec = ADVERSARIAL_SESSIONS[number]
    rng = random.Random(ADVERSARIAL_SEED + number)
    text = TextMaker(rng)
    messages = opening_messages(text, TASK_CHARS)
    for turn, (shape, size) in enumerate(spec.results(rng)):
        tool, output = _result_text(text, shape, size)
        call_id = f"call_{turn:03}_{rng.getrandbits(48):012x}"
        call = {"id": call_id, "type": "function",
                "function": {"name": tool, "arguments": text.arguments(tool, 60)}}
        messages.append({"role": "assistant", "content": text.prose(rng.randint(80, 200)),
                         "tool_calls": [call]})
        messages.append({"role": "tool", "content": output, "tool_call_id": call_id})
    return Session(spec.name, "adversarial", messages, checkpoints=spec.checkpoints)


def adversarial_sessions() -> list[Session]:
    return [adversarial_session(number) for number in range(len(ADVERSARIAL_SESSIONS))]
