"""The recorded requests grouped by conversation, each body read as its
wire format reads it.

A conversation is named by a hash of its first user message
(``obsmask_core.conversation.planning.holdout.conversation_id``): obsmask writes that
name into the metadata of every request it planned; for a request recorded
without it (obsmask off, an older obsmask, a plain mitmdump) the name is
computed here from the body the client sent, the same way. A request whose
body cannot be read as its format (not JSON, no list) belongs to no
conversation and goes to the group "other". Two sessions of different wire
formats that begin with the same task are two conversations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from obsmask_core.conversation.body.request_text import UnsupportedBody, parse_request
from obsmask_core.conversation.planning.holdout import conversation_id
from obsmask_core.conversation.settings.routes import FORMAT_TITLES
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.offline.cache.formats import conversation, other_members
from obsmask_core.offline.report.flow_file import RecordedRequest
from obsmask_core.shared.read_back import word
from obsmask_core.shared.request_record import Key

OTHER = "other"


@dataclass(frozen=True)
class ParsedBody:
    """A request body's conversation list (``messages``, ``input``), what
    is sent in front of it (Anthropic's ``system``, Responses'
    ``instructions``; None: nothing), and its other top-level members (the
    model, the tool definitions...), which the provider counts too."""

    items: list[object]
    preamble: object
    members: dict[str, object] = field(default_factory=dict)


def parse_body(body: bytes, fmt: WireFormat) -> ParsedBody | None:
    """The body read as the proxy reads it; None when it is no request of
    ``fmt`` (not UTF-8, not JSON, no list)."""
    try:
        parsed = parse_request(body.decode("utf-8"), fmt.list_member)
        items, preamble = conversation(parsed.members, fmt)
    except (UnicodeDecodeError, UnsupportedBody, ValueError):
        return None
    return ParsedBody(items, preamble, other_members(parsed.members, fmt))


@dataclass(frozen=True)
class ConversationRequest:
    number: int  # 1-based, in the conversation's order
    recorded: RecordedRequest
    original: ParsedBody | None  # as the client sent it
    sent: ParsedBody | None  # as it went out


@dataclass
class Conversation:
    name: str  # the conversation's id, or OTHER
    fmt: WireFormat | None  # None for OTHER, which mixes formats
    requests: list[ConversationRequest] = field(default_factory=list)

    @property
    def title(self) -> str:
        if self.fmt is None:
            return "Requests of no conversation"
        return f"Conversation {self.name} ({FORMAT_TITLES[self.fmt.name]})"


def conversation_name(recorded: RecordedRequest, original: ParsedBody | None) -> str | None:
    """The name obsmask recorded, else the one the body gives; None for none."""
    named = word(recorded.masking.get(Key.CONVERSATION))
    if named:
        return named
    return conversation_id(original.items) if original is not None else None


def group_conversations(requests: Iterable[RecordedRequest]) -> list[Conversation]:
    """The conversations in the order of their first request, each with its
    requests in the files' order; the group "other" last, if any."""
    groups: dict[tuple[str, str], Conversation] = {}
    other = Conversation(OTHER, None)
    for recorded in requests:
        original = parse_body(recorded.original, recorded.fmt)
        sent = parse_body(recorded.sent, recorded.fmt)
        name = conversation_name(recorded, original)
        if name is None:
            group = other
        else:
            group = groups.setdefault((name, recorded.fmt.name),
                                      Conversation(name, recorded.fmt))
        group.requests.append(ConversationRequest(len(group.requests) + 1, recorded,
                                                  original, sent))
    return [*groups.values(), *([other] if other.requests else [])]
