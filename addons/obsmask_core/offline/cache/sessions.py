"""The conversations the cache benchmark replays: real sessions from a folder, and
``--input`` files (a request body, or the conversations of a .mitm file, read
as the client sent them), in any of the three wire formats
(``obsmask_core.offline.cache.formats``).

A session keeps what its requests are made of (``obsmask_core.offline.cache.clients``
makes them): its conversation list, where each request ends, what is sent
in front of the list (Anthropic's ``system``, Responses' ``instructions``),
the body's other members (the model, the tool definitions...), sent as they
are with every request, and the time of each request: one every
``PACE_SECONDS`` unless the session says otherwise."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from obsmask_core.conversation.planning.holdout import IGNORED_KEYS
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from obsmask_core.offline.cache.formats import (
    FORMAT_NAMES,
    body_format,
    conversation,
    other_members,
    request_ends,
)
from obsmask_core.offline.errors import OfflineError
from obsmask_core.offline.recorded_requests import post_bodies

# Seconds between two requests of a session: an agent's turn (the model's
# answer and the tool's run) well inside Anthropic's 5-minute lifetime.
PACE_SECONDS = 20.0
# The addon's default routes, to tell the format of a flow in a .mitm file.
ROUTE_SUFFIXES = (("/chat/completions", CHAT), ("/v1/messages", ANTHROPIC),
                  ("/v1/responses", RESPONSES))


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
    # The body's other top-level members (model, tools, max_tokens...), sent
    # as they are with every request.
    members: dict[str, object] = field(default_factory=dict)
    # When each request is sent, in seconds (one per request end); empty:
    # one every PACE_SECONDS.
    times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.request_ends:
            self.request_ends = request_ends(self.messages, self.fmt)
        if not self.times:
            self.times = [PACE_SECONDS * number for number in range(len(self.request_ends))]
        if len(self.times) != len(self.request_ends):
            raise OfflineError(f"{self.name}: {len(self.times)} times for "
                             f"{len(self.request_ends)} requests")


Body = tuple[list[object], object, WireFormat]  # (list, preamble, format)


def _read_document(path: Path) -> tuple[object, WireFormat]:
    try:
        document = json.loads(path.read_bytes())
    except OSError as e:
        raise OfflineError(f"{path}: cannot be read ({e.strerror})") from e
    except ValueError as e:
        raise OfflineError(f"{path}: not JSON ({e})") from e
    fmt = body_format(document)
    if fmt is None:
        raise OfflineError(f"{path}: not a Chat Completions, Anthropic Messages or "
                         "Responses request body")
    return document, fmt


def read_body(path: Path) -> tuple[Body, dict[str, object]]:
    """The conversation of a request body file, in the format its shape
    says, and the body's other members (model, tools...)."""
    document, fmt = _read_document(path)
    items, preamble = conversation(document, fmt)
    return (items, preamble, fmt), other_members(document, fmt)


def body_session(path: Path, name: str, kind: str) -> Session:
    """The session of a request body file: its conversation, replayed by its
    prefixes, with the body's other members (model, tools...)."""
    document, fmt = _read_document(path)
    items, preamble = conversation(document, fmt)
    return Session(name, kind, items, fmt=fmt, preamble=preamble,
                   members=other_members(document, fmt))


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
        session = body_session(path, "", "real")
        fmt = session.fmt
        if by_format and fmt.name != path.parent.name:
            raise OfflineError(f"{path}: a {fmt.name} body in the {path.parent.name} folder")
        if fmt.name in formats:
            session.name = f"{fmt.name}/{path.stem}"
            sessions.append(session)
    if not sessions:
        raise OfflineError(f"{folder}: no *.json session of the formats {', '.join(formats)}")
    return sessions


def same_item(a: object, b: object) -> bool:
    """Equal, but for cache breakpoints (``cache_control``, holdout's
    IGNORED_KEYS): clients move them from request to request (Claude Code
    marks the last message of each), so an item of a later request may
    carry one where the same item had none, or lose it."""
    if a == b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        keys = a.keys() - IGNORED_KEYS
        return keys == b.keys() - IGNORED_KEYS and all(same_item(a[k], b[k]) for k in keys)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_item, a, b))
    return False


def continues(short: Body, long: Body) -> bool:
    """Does ``long`` carry on ``short``'s conversation: the same format, and
    ``short``'s list the start of ``long``'s (or all of it), cache
    breakpoints aside (``same_item``)?"""
    (short_items, _, short_format), (long_items, _, long_format) = short, long
    if short_format is not long_format or len(short_items) > len(long_items):
        return False
    end = len(short_items)
    # The last item first: most bodies that are no prefix differ there. Then
    # the whole prefix at C speed, item by item only when that fails.
    return not end or (same_item(short_items[-1], long_items[end - 1])
                       and (long_items[:end] == short_items
                            or all(map(same_item, short_items, long_items))))


def last_bodies(bodies: Sequence[Body]) -> list[int]:
    """The positions of the bodies that end a conversation: every body but
    those another body of the same format continues (a longer one, or an
    equal one later in the list: a retry). The order of the bodies only
    decides between equal ones, so flows written out of order still give
    one conversation each."""
    return [
        position for position, body in enumerate(bodies)
        if not any(
            continues(body, other)
            and (len(other[0]) > len(body[0]) or other_position > position)
            for other_position, other in enumerate(bodies) if other_position != position
        )
    ]


def _flow_bodies(path: Path) -> list[tuple[Body, dict[str, object]]]:
    """The conversations of the POSTs of a .mitm file to the addon's default
    routes, each of the format of its route, with the body's other members;
    each body is the client's (the flow's backup when obsmask masked it)."""
    bodies: list[tuple[Body, dict[str, object]]] = []
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
            bodies.append(((items, preamble, route_format), other_members(document, route_format)))
    return bodies


def load_input(path: Path) -> list[Session]:
    """A request body, or the conversations of a .mitm file: its POST bodies
    to the addon's default routes (``.../chat/completions``, ``.../v1/messages``,
    ``.../v1/responses``, which give the format), each the client's own
    (the flow's backup when obsmask masked it), where a body whose list
    continues in another body of the same format is one of that body's
    prefixes and is dropped (``last_bodies``). Each keeps its body's other
    members (model, tools): the last request's, for a flow file's."""
    if path.suffix != ".mitm":
        return [body_session(path, path.name, "input")]
    read = _flow_bodies(path)
    ends = [read[position] for position in last_bodies([body for body, _ in read])]
    if not ends:
        raise OfflineError(f"{path}: no POST to a chat, messages or responses route "
                         "with a JSON body")
    return [
        Session(f"{path.name}#{number}", "input", items, fmt=fmt, preamble=preamble,
                members=members)
        for number, ((items, preamble, fmt), members) in enumerate(ends, start=1)
    ]
