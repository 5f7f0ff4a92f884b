"""Sessions at the edges of Anthropic's prompt cache, in Anthropic Messages,
sent as Claude Code sends them (``obsmask_core.offline.cache.clients``: two marked
system blocks and a breakpoint on the last block), from fixed seeds: session
n of ``CACHE_EDGE_SESSIONS`` is drawn with ``random.Random(CACHE_EDGE_SEED +
n)``.

Every session has a system text (the synthetic sessions'), five tool
definitions (bash, read_file, grep, edit_file, run_tests), a task (prose
and a code block), then tool turns: one assistant message (a text block,
then one ``tool_use`` block per call) and one user message with one
``tool_result`` block per call; it ends with tool results. A call's tool is
drawn like the synthetic sessions' and its result's size from their size
classes (``synthetic.result_size``) unless a family says otherwise; no
result reads as an error. One request every 20 seconds unless a family
says otherwise.

Families:

- parallel: 40 tool turns, of which every 4th ("parallel-every-4th") or
  every 2nd ("parallel-every-2nd") makes 12 parallel calls of 300-1,500
  characters: that turn adds 26 blocks (a text, 12 ``tool_use``, 12
  ``tool_result``), more than the 20 boundaries a breakpoint looks back.
- near-minimum: a short task (1,200 or 1,000 characters) and small turns
  (20-60 characters of text, results of 20-80 characters), so that the
  prompt stays near the 1,024 tokens Anthropic caches at least, crossing
  them around the 8th request ("near-minimum-tiny", 40 tool turns); or the
  same with a result of 1,200-1,600 characters every 4th tool turn
  ("near-minimum-large", 30 tool turns), which takes the prompt past 1,024
  tokens and which masking could take back under them, where nothing is
  cached.
- pauses: 40 tool turns, and a pause of 6 minutes (longer than the
  5-minute lifetime) before every 5th request ("pauses-every-5th") or every
  3rd ("pauses-every-3rd").
- four-breakpoints: the client also marks its last tool definition: with
  the two system blocks and the last block, the four breakpoints the API
  allows are taken, and none is left for obsmask; 40 tool turns.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

from benchlib.cache.synthetic import SYSTEM_PROMPT, result_size, task_text
from benchlib.cache.text_maker import TextMaker
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from obsmask_core.offline.cache.sessions import PACE_SECONDS, Session

CACHE_EDGE_SEED = 2001
MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 32000
PAUSE_SECONDS = 360.0
PARALLEL_CALLS = 12

_TOOL_WEIGHTS = (("bash", 0.40), ("read_file", 0.20), ("grep", 0.15), ("edit_file", 0.15),
                 ("run_tests", 0.10))
_PARALLEL_TOOLS = ("read_file", "grep")


def _tool(name: str, description: str, argument: str, meaning: str) -> dict[str, object]:
    return {"name": name, "description": description,
            "input_schema": {"type": "object",
                             "properties": {argument: {"type": "string", "description": meaning}},
                             "required": [argument]}}


TOOLS: tuple[dict[str, object], ...] = (
    _tool("bash", "Run a shell command in the repository and return its output.",
          "command", "The command to run."),
    _tool("read_file", "Read a file of the repository, with line numbers.",
          "path", "The path of the file, from the repository's root."),
    _tool("grep", "Search the repository for a pattern and list the matching lines.",
          "pattern", "A regular expression."),
    _tool("edit_file", "Replace a piece of text in a file of the repository.",
          "path", "The path of the file, from the repository's root."),
    _tool("run_tests", "Run the test suite, or some of its tests, and report the outcome.",
          "command", "The pytest command line."),
)

# A result's characters, from the session's RNG and its tool turn (from 0).
Sizes = Callable[[random.Random, int], int]


def _synthetic_sizes(rng: random.Random, turn: int) -> int:
    return result_size(rng)


def _tiny(rng: random.Random, turn: int) -> int:
    return rng.randint(20, 80)


def _tiny_with_a_large_one_every_4th(rng: random.Random, turn: int) -> int:
    return rng.randint(1200, 1600) if turn % 5 == 3 else rng.randint(20, 80)


@dataclass(frozen=True)
class EdgeSpec:
    name: str
    family: str
    tool_turns: int
    # Calls of tool turn t (from 0).
    calls: Callable[[int], int] = lambda turn: 1
    result_chars: Sizes = _synthetic_sizes
    parallel_chars: tuple[int, int] = (300, 1500)
    task_chars: int = 3000
    prose_chars: tuple[int, int] = (80, 200)
    arguments_chars: tuple[int, int] = (30, 120)
    pause_every: int = 0  # a pause before every n-th request; 0: none
    mark_last_tool: bool = False


def _every(period: int) -> Callable[[int], int]:
    return lambda turn: PARALLEL_CALLS if turn % period == period - 1 else 1


CACHE_EDGE_SESSIONS: tuple[EdgeSpec, ...] = (
    EdgeSpec("cache-edge-parallel-every-4th", "parallel", 40, _every(4)),
    EdgeSpec("cache-edge-parallel-every-2nd", "parallel", 40, _every(2)),
    EdgeSpec("cache-edge-near-minimum-tiny", "near-minimum", 40, result_chars=_tiny,
             task_chars=1200, prose_chars=(20, 60), arguments_chars=(20, 40)),
    EdgeSpec("cache-edge-near-minimum-large", "near-minimum", 30,
             result_chars=_tiny_with_a_large_one_every_4th, task_chars=1000,
             prose_chars=(20, 60), arguments_chars=(20, 40)),
    EdgeSpec("cache-edge-pauses-every-5th", "pauses", 40, pause_every=5),
    EdgeSpec("cache-edge-pauses-every-3rd", "pauses", 40, pause_every=3),
    EdgeSpec("cache-edge-four-breakpoints", "four-breakpoints", 40, mark_last_tool=True),
)

CACHE_EDGE_FAMILIES: dict[str, object] = {
    "seed": "random.Random(CACHE_EDGE_SEED + n) for session n, CACHE_EDGE_SEED = 2001",
    "format": "anthropic (Anthropic Messages), sent as Claude Code sends them: system as "
              "two text blocks with cache_control, cache_control on the last block",
    "every_session": "the synthetic system prompt, five tool definitions, a task (prose "
                     "and a code block), then tool turns of one assistant message (a text "
                     "block, one tool_use block per call) and one user message (one "
                     "tool_result block per call); ends with tool results; results drawn "
                     "from the synthetic size classes unless said otherwise; no error; "
                     f"one request every {PACE_SECONDS:g} s unless said otherwise",
    "parallel": {"sessions": ["cache-edge-parallel-every-4th", "cache-edge-parallel-every-2nd"],
                 "tool_turns": 40,
                 "parallel_turns": f"every 4th or every 2nd: {PARALLEL_CALLS} calls of "
                                   "read_file or grep, results of 300-1,500 characters",
                 "why": "such a turn adds 26 blocks, more than the 20 boundaries a "
                        "breakpoint looks back"},
    "near-minimum": {"sessions": ["cache-edge-near-minimum-tiny",
                                  "cache-edge-near-minimum-large"],
                     "tool_turns": "40 and 30",
                     "task_chars": "1,200 and 1,000",
                     "result_chars": "20-80; near-minimum-large: 1,200-1,600 in every 4th "
                                     "tool turn (the 2nd, 6th...); text 20-60 characters a "
                                     "turn",
                     "why": "the prompt stays near the 1,024 tokens Anthropic caches at least; "
                            "masking a large result can take it back under them"},
    "pauses": {"sessions": ["cache-edge-pauses-every-5th", "cache-edge-pauses-every-3rd"],
               "tool_turns": 40,
               "pauses": f"{PAUSE_SECONDS:g} s instead of {PACE_SECONDS:g} s before every 5th "
                         "or every 3rd request",
               "why": "longer than the 5-minute lifetime: the cache is cold again"},
    "four-breakpoints": {"sessions": ["cache-edge-four-breakpoints"], "tool_turns": 40,
                         "breakpoints": "the last tool definition marked by the client, "
                                        "the two system blocks, the last block",
                         "why": "no breakpoint slot is left for obsmask"},
}


def _times(spec: EdgeSpec, requests: int) -> list[float]:
    times = [0.0]
    for number in range(1, requests):
        pause = spec.pause_every and number % spec.pause_every == 0
        times.append(times[-1] + (PAUSE_SECONDS if pause else PACE_SECONDS))
    return times


def _tools(spec: EdgeSpec) -> list[object]:
    tools: list[object] = [dict(tool) for tool in TOOLS]
    if spec.mark_last_tool:
        tools[-1] = {**TOOLS[-1], "cache_control": {"type": "ephemeral"}}
    return tools


def cache_edge_session(number: int) -> Session:
    """Session ``number`` of ``CACHE_EDGE_SESSIONS`` (fixed seed)."""
    spec = CACHE_EDGE_SESSIONS[number]
    rng = random.Random(CACHE_EDGE_SEED + number)
    text = TextMaker(rng)
    names = [name for name, _ in _TOOL_WEIGHTS]
    weights = [weight for _, weight in _TOOL_WEIGHTS]
    messages: list[object] = [{"role": "user", "content": task_text(text, spec.task_chars)}]
    for turn in range(spec.tool_turns):
        calls = spec.calls(turn)
        said: list[object] = [{"type": "text", "text": text.prose(rng.randint(*spec.prose_chars))}]
        results: list[object] = []
        for call in range(calls):
            tool = rng.choice(_PARALLEL_TOOLS) if calls > 1 else rng.choices(names, weights)[0]
            size = (rng.randint(*spec.parallel_chars) if calls > 1
                    else spec.result_chars(rng, turn))
            call_id = f"toolu_{turn:03}_{call:02}_{rng.getrandbits(48):012x}"
            arguments = json.loads(text.arguments(tool, rng.randint(*spec.arguments_chars)))
            said.append({"type": "tool_use", "id": call_id, "name": tool, "input": arguments})
            results.append({"type": "tool_result", "tool_use_id": call_id,
                            "content": text.tool_output(tool, size)})
        messages.append({"role": "assistant", "content": said})
        messages.append({"role": "user", "content": results})
    session = Session(spec.name, "cache_edge", messages, fmt=ANTHROPIC, preamble=SYSTEM_PROMPT,
                      members={"model": MODEL, "max_tokens": MAX_TOKENS, "tools": _tools(spec)})
    session.times = _times(spec, len(session.request_ends))
    return session


def cache_edge_sessions() -> list[Session]:
    return [cache_edge_session(number) for number in range(len(CACHE_EDGE_SESSIONS))]
