"""Synthetic sessions of a documented distribution, from fixed seeds, in
Chat Completions.

Session n is drawn with ``random.Random(SYNTHETIC_SEED + n)``: a system
prompt (about 300 characters) and a task (prose and a code block, lognormal,
median 4000 characters, sigma 0.3); tool turns uniform in [30, 120]; per
turn one assistant message with text (lognormal, median 220 characters,
sigma 0.8, 20 to 4000) and one tool call, two in 10% of the turns (parallel
calls); a call's tool is bash 40%, read_file 20%, grep 15%, edit_file 15%,
run_tests 10%, its arguments lognormal (median 100 characters, sigma 1.0, 20
to 6000); each call has one result, whose size is small (50-400 characters)
with probability 0.50, medium (400-4000) 0.35 or large (4000-20000) 0.15,
log-uniform inside its class; 5% of results are errors (a Python traceback,
at least 300 characters). Texts come from ``TextMaker``, so they tokenise
like real output (about 4 characters a token). Sessions end with a tool
result, as the real ones do. ``SYNTHETIC_DISTRIBUTION`` says the same in the
JSON output.
"""

from __future__ import annotations

import math
import random

from benchlib.cache.text_maker import TextMaker
from obsmask_core.offline.cache.sessions import Session

SYNTHETIC_SEED = 1
SYNTHETIC_DISTRIBUTION: dict[str, object] = {
    "seed": "random.Random(SYNTHETIC_SEED + n) for session n, SYNTHETIC_SEED = 1",
    "tool_turns": "uniform integer in [30, 120]",
    "system_prompt_chars": "about 300 (fixed text)",
    "task_chars": "lognormal, median 4000, sigma 0.3 (prose and a code block)",
    "assistant_text_chars": "lognormal, median 220, sigma 0.8, clamped to [20, 4000]",
    "calls_per_turn": {"1": 0.9, "2 (parallel)": 0.1},
    "tools": {"bash": 0.40, "read_file": 0.20, "grep": 0.15, "edit_file": 0.15,
              "run_tests": 0.10},
    "arguments_chars": "lognormal, median 100, sigma 1.0, clamped to [20, 6000]",
    "result_chars": {"small 50-400": 0.50, "medium 400-4000": 0.35,
                     "large 4000-20000": 0.15, "inside a class": "log-uniform"},
    "error_results": "5%: a Python traceback, at least 300 characters",
    "text": "English words, identifiers, paths and code-like lines shaped like each "
            "tool's output (about 4 characters per cl100k token)",
    "ends_with": "a tool result",
    "format": "chat (Chat Completions)",
}

_TOOLS = (("bash", 0.40), ("read_file", 0.20), ("grep", 0.15), ("edit_file", 0.15),
          ("run_tests", 0.10))
_SIZE_CLASSES = ((0.50, 50, 400), (0.35, 400, 4000), (0.15, 4000, 20000))
# Shared with the adversarial sessions, which are built the same way.
SYSTEM_PROMPT = (
    "You are a careful software engineer working in a checked-out repository. Use the "
    "tools to inspect files, search the code, edit files and run the tests. Make small, "
    "verifiable changes, explain what you are doing in one or two sentences before each "
    "tool call, and stop when the tests pass."
)


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(high, max(low, rng.lognormvariate(math.log(median), sigma))))


def result_size(rng: random.Random) -> int:
    """A result's characters: small, medium or large (``_SIZE_CLASSES``),
    log-uniform inside its class."""
    draw = rng.random()
    for probability, low, high in _SIZE_CLASSES:
        if draw < probability:
            return int(math.exp(rng.uniform(math.log(low), math.log(high))))
        draw -= probability
    return _SIZE_CLASSES[-1][2]


def task_text(text: TextMaker, task_size: int) -> str:
    """A task of about ``task_size`` characters: prose and a code block."""
    return (
        "<pr_description>\n" + text.prose(task_size * 2 // 3) + "\n\n```python\n"
        + text.lines(task_size // 3, text.code_line) + "\n```\n</pr_description>"
    )


def opening_messages(text: TextMaker, task_size: int) -> list[object]:
    """The system prompt and a task of about ``task_size`` characters (prose
    and a code block): what every generated session starts with."""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task_text(text, task_size)}]


def synthetic_session(number: int) -> Session:
    """Session ``number`` of the documented distribution (fixed seed)."""
    seed = SYNTHETIC_SEED + number
    rng = random.Random(seed)
    text = TextMaker(rng)
    tool_names = [name for name, _ in _TOOLS]
    tool_weights = [weight for _, weight in _TOOLS]
    messages = opening_messages(text, _lognormal(rng, 4000, 0.3, 500, 20000))
    turns = rng.randint(30, 120)
    for turn in range(turns):
        calls = []
        results = []
        for call_number in range(2 if rng.random() < 0.10 else 1):
            tool = rng.choices(tool_names, tool_weights)[0]
            call_id = f"call_{turn:03}_{call_number}_{rng.getrandbits(48):012x}"
            arguments = text.arguments(tool, _lognormal(rng, 100, 1.0, 20, 6000))
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": tool, "arguments": arguments}})
            size = result_size(rng)
            output = text.traceback(size) if rng.random() < 0.05 else text.tool_output(tool, size)
            results.append({"role": "tool", "content": output, "tool_call_id": call_id})
        said = text.prose(_lognormal(rng, 220, 0.8, 20, 4000))
        messages.append({"role": "assistant", "content": said, "tool_calls": calls})
        messages.extend(results)
    return Session(f"synthetic-{number:02}-seed{seed}", "synthetic", messages)

