"""Sessions shaped as Claude Code sends them to Opus 4.8 and the 5.x models:
the real Anthropic sessions (fixtures/sessions/anthropic/), with

- Claude Code's tool definitions instead of the session's: the twelve it
  sends (``CLAUDE_CODE_TOOLS``: Task, Bash, Glob, Grep, Read, Edit, Write,
  NotebookEdit, WebFetch, TodoWrite, WebSearch, BashOutput), about 48 kB of
  JSON, their descriptions generated text of each tool's usual length from
  a fixed seed (``CLAUDE_CODE_SEED``); the session's ``bash`` calls become
  ``Bash`` calls;
- its reminders as messages of their own, ``{"role": "system", "content":
  [{"type": "text", "text": "<system-reminder>...</system-reminder>"}]}``,
  after the results of every ``REMINDER_EVERY``-th tool turn, which stay
  in the history: the request that ends with one carries Claude Code's
  moving breakpoint on it (``obsmask_core.offline.cache.clients`` marks
  the last block of the last message, whatever its role);
- the two marked system blocks of every Anthropic session
  (``clients.claude_code_system``).

A session is named ``claude_code/<file stem>``, of kind "claude_code".
"""

from __future__ import annotations

import copy
import json
import random

from benchlib.cache.text_maker import TextMaker
from obsmask_core.offline.cache.sessions import Session

CLAUDE_CODE_SEED = 4001
REMINDER_EVERY = 3
# (name, characters of its description, its input schema's properties)
_TOOLS: tuple[tuple[str, int, dict[str, str]], ...] = (
    ("Task", 9000, {"description": "string", "prompt": "string", "subagent_type": "string"}),
    ("Bash", 11000, {"command": "string", "timeout": "number", "description": "string",
                     "run_in_background": "boolean"}),
    ("Glob", 700, {"pattern": "string", "path": "string"}),
    ("Grep", 2500, {"pattern": "string", "path": "string", "glob": "string",
                    "output_mode": "string", "-B": "number", "-A": "number", "-C": "number",
                    "-n": "boolean", "-i": "boolean", "type": "string",
                    "head_limit": "number", "multiline": "boolean"}),
    ("Read", 2100, {"file_path": "string", "offset": "number", "limit": "number"}),
    ("Edit", 1700, {"file_path": "string", "old_string": "string", "new_string": "string",
                    "replace_all": "boolean"}),
    ("Write", 1000, {"file_path": "string", "content": "string"}),
    ("NotebookEdit", 800, {"notebook_path": "string", "cell_id": "string",
                           "new_source": "string", "cell_type": "string",
                           "edit_mode": "string"}),
    ("WebFetch", 1400, {"url": "string", "prompt": "string"}),
    ("TodoWrite", 9600, {"todos": "array"}),
    ("WebSearch", 900, {"query": "string", "allowed_domains": "array",
                        "blocked_domains": "array"}),
    ("BashOutput", 500, {"bash_id": "string", "filter": "string"}),
)
RENAMED_TOOLS = {"bash": "Bash"}
CLAUDE_CODE_FAMILY: dict[str, object] = {
    "from": "the real anthropic sessions, one each",
    "tools": f"{len(_TOOLS)} definitions ({', '.join(name for name, _, _ in _TOOLS)}), "
             "about 48 kB of JSON, generated descriptions (fixed seed "
             f"{CLAUDE_CODE_SEED}); bash calls renamed Bash",
    "reminders": f"a role 'system' message after the results of every {REMINDER_EVERY}rd "
                 "tool turn: one text block '<system-reminder>...</system-reminder>' "
                 "(200-900 characters: a todo list or a note of a changed file); a request "
                 "ending with one carries the moving cache_control on it",
    "system": "two text blocks with cache_control, as every Anthropic session",
}


def claude_code_tools() -> list[object]:
    """Claude Code's twelve tool definitions (fixed seed)."""
    text = TextMaker(random.Random(CLAUDE_CODE_SEED))
    tools: list[object] = []
    for name, size, properties in _TOOLS:
        schema = {
            "type": "object",
            "properties": {key: {"type": kind, "description": text.sentence()}
                           for key, kind in properties.items()},
            "required": [next(iter(properties))],
            "additionalProperties": False,
            "$schema": "http://json-schema.org/draft-07/schema#",
        }
        tools.append({"name": name, "description": text.prose(size), "input_schema": schema})
    return tools


def _reminder(text: TextMaker, turn: int) -> dict[str, object]:
    rng = text.rng
    if rng.random() < 0.5:
        items = [f'{{"content": "{text.sentence()}", "status": '
                 f'"{rng.choice(("pending", "in_progress", "completed"))}"}}'
                 for _ in range(rng.randint(2, 6))]
        body = ("Your todo list has changed. DO NOT mention this explicitly to the user. "
                "Here are the latest contents of your todo list:\n\n[" + ", ".join(items)
                + "]. Continue on with the tasks at hand if applicable.")
    else:
        body = (f"Note: {text.path()} was modified, either by the user or by a linter. "
                "This change was intentional, so make sure to take it into account as you "
                "proceed. Here are the relevant changes:\n" + text.lines(
                    rng.randint(150, 600), text.code_line))
    return {"role": "system", "content": [
        {"type": "text", "text": f"<system-reminder>\n{body}\n</system-reminder>"}]}


def _renamed(item: object) -> object:
    content = item.get("content") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(content, list):
        return item
    return {**item, "content": [
        {**block, "name": RENAMED_TOOLS[block["name"]]}
        if isinstance(block, dict) and block.get("type") == "tool_use"
        and block.get("name") in RENAMED_TOOLS else block for block in content]}


def _has_results(item: object) -> bool:
    content = item.get("content") if isinstance(item, dict) else None
    return (isinstance(item, dict) and item.get("role") == "user" and isinstance(content, list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content))


def claude_code_session(real: Session, number: int) -> Session:
    """``real`` (an Anthropic session) as Claude Code sends it (see the module)."""
    text = TextMaker(random.Random(CLAUDE_CODE_SEED + 1 + number))
    messages: list[object] = []
    turns = 0
    for item in real.messages:
        messages.append(_renamed(copy.deepcopy(item)))
        if _has_results(item):
            turns += 1
            if turns % REMINDER_EVERY == 0:
                messages.append(_reminder(text, turns))
    members = {key: value for key, value in real.members.items() if key != "tools"}
    members["tools"] = claude_code_tools()
    stem = real.name.split("/", 1)[-1]
    return Session(f"claude_code/{stem}", "claude_code", messages, fmt=real.fmt,
                   preamble=real.preamble, members=members)


def claude_code_sessions(real: list[Session], limit: int | None = None) -> list[Session]:
    """The Claude Code-shaped copies of the Anthropic sessions of ``real``
    (the first ``limit`` of them)."""
    anthropic = [session for session in real if session.fmt.name == "anthropic"]
    return [claude_code_session(session, number)
            for number, session in enumerate(anthropic[:limit])]


def tools_bytes() -> int:
    """The JSON size of Claude Code's tool definitions, for the report."""
    return len(json.dumps(claude_code_tools(), separators=(",", ":")))
