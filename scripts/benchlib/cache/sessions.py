"""The conversations bench_cache replays: real sessions from a folder, and
``--input`` files (a request body, or the conversations of a .mitm file), in
any of the three wire formats (``benchlib.cache.formats``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.cache.formats import FORMAT_NAMES, body_format, conversation, request_ends
from benchlib.errors import BenchError
from benchlib.flows import post_bodies
from benchlib.one_request.inputs import ROUTE_SUFFIXES
from obsmask_core.conversation.wire_formats import CHAT, WireFormat


@dataclass
class Session:
    """One conversation, replayed as the requests ``messages[:end]``."""

    name: str
    kind: str  # real, synthetic, adversarial or input
    messages: list[object]  # the format's conversation list (``messages``, ``input``)
    request_ends: list[int] = field(default_factory=list)
    fmt: WireFormat = CHAT
    # Sent in front of the list with every request (Anthropic's ``system``,
    # Responses' ``instructions``), never masked; None: nothing.
    preamble: object = None
    # Tool-turn counts after which the bill so far is also reported (the
    # final bill of the session cut there); empty for most sessions.
    checkpoints: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.request_ends:
            self.request_ends = request_ends(self.messages, self.fmt)


Body = tuple[list[object], object, WireFormat]  # (list, preamble, format)


def _read_body(path: Path) -> Body:
    try:
        document = json.loads(path.read_bytes())
    except ValueError as e:
        raise BenchError(f"{path}: not JSON ({e})") from e
    fmt = body_format(document)
    if fmt is None:
        raise BenchError(f"{path}: not a Chat Completions, Anthropic Messages or "
                         "Responses request body")
    items, preamble = conversation(document, fmt)
    return items, preamble, fmt


def load_real_sessions(folder: Path, formats: Sequence[str] = FORMAT_NAMES) -> list[Session]:
    """The last request bodies of real sessions, one per ``*.json``: from
    ``folder/<format>/`` for each of ``formats`` when ``folder`` has such
    subfolders (fixtures/sessions/ has chat/, anthropic/, responses/), else
    from ``folder`` itself, keeping the files of ``formats``. A session is
    named ``<format>/<file stem>``."""
    by_format = [folder / name for name in formats if (folder / name).is_dir()]
    paths = ([path for sub in by_format for path in sorted(sub.glob("*.json"))]
             if by_format else sorted(folder.glob("*.json")))
    sessions = []
    for path in paths:
        items, preamble, fmt = _read_body(path)
        if by_format and fmt.name != path.parent.name:
            raise BenchError(f"{path}: a {fmt.name} body in the {path.parent.name} folder")
        if fmt.name in formats:
            sessions.append(Session(f"{fmt.name}/{path.stem}", "real", items, fmt=fmt,
                                    preamble=preamble))
    if not sessions:
        raise BenchError(f"{folder}: no *.json session of the formats {', '.join(formats)}")
    return sessions


def _is_prefix(short: list[object], long: list[object]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def _flow_bodies(path: Path) -> list[Body]:
    """The conversations of the POSTs of a .mitm file to the addon's default
    routes, each of the format of its route."""
    bodies: list[Body] = []
    for route, content in post_bodies(path):
        route_format = next((f for suffix, f in ROUTE_SUFFIXES if route.endswith(suffix)), None)
        if route_format is None:
            continue
        try:
            document = json.loads(content)
            items, preamble = conversation(document, route_format)
        except ValueError:
            continue  # not JSON, or not a request body of the format
        if items:
            bodies.append((items, preamble, route_format))
    return bodies


def load_input(path: Path) -> list[Session]:
    """A request body, or the conversations of a .mitm file: its POST bodies
    to the addon's default routes (``.../chat/completions``, ``.../v1/messages``,
    ``.../v1/responses``, which give the format), where a body whose list
    continues in a later body of the same format is one of that body's
    prefixes and is dropped."""
    if path.suffix != ".mitm":
        items, preamble, fmt = _read_body(path)
        return [Session(path.name, "input", items, fmt=fmt, preamble=preamble)]
    bodies = _flow_bodies(path)
    last_bodies = [
        (items, preamble, fmt)
        for number, (items, preamble, fmt) in enumerate(bodies)
        if not any(later_fmt is fmt and _is_prefix(items, later)
                   for later, _, later_fmt in bodies[number + 1:])
    ]
    if not last_bodies:
        raise BenchError(f"{path}: no POST to a chat, messages or responses route "
                         "with a JSON body")
    return [
        Session(f"{path.name}#{number}", "input", items, fmt=fmt, preamble=preamble)
        for number, (items, preamble, fmt) in enumerate(last_bodies, start=1)
    ]
