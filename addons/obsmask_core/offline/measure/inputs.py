"""The requests measure.py replays, read from its inputs as the client sent
them, with what the recording says of each.

An input is a mitmproxy flow file (``mitmdump -w``, or saved from mitmweb)
or a request body (a JSON file; its format told by its shape, see
``obsmask_core.offline.cache.formats.body_format``). In a flow file, a request is a
conversation request when the proxy would read it as one: the routes in
force (``obsmask_*_route``, ``obsmask_hosts``) match it and give its
format. Its body is the client's: the flow's backup when obsmask masked it
(``obsmask_core.offline.recorded_requests``), so a session recorded through obsmask measures like
one recorded without it. A flow masked by obsmask whose original was not
saved (or cannot be read) cannot be measured honestly and is skipped, and
said so; so is a flow obsmask recorded as a conversation request (its
metadata names the format) on a route the settings in force do not read as
one: the proxy recorded it, and the replay would leave it out without a word.
What obsmask recorded is read with ``obsmask_core.shared.read_back``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from obsmask_core.conversation.settings.routes import FORMAT_TITLES, Routes
from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from obsmask_core.offline.cache.formats import conversation, other_members
from obsmask_core.offline.cache.sessions import Body, read_body
from obsmask_core.offline.errors import OfflineError
from obsmask_core.offline.measure.usage import usage_from_metadata
from obsmask_core.offline.recorded_requests import (
    ORIGINAL_LOST,
    RecordedRequest,
    is_request_body_file,
    recorded_requests,
)
from obsmask_core.shared.read_back import word
from obsmask_core.shared.request_record import Action, Key

FLOWS = "flows"
REQUEST_BODY = "request body"


def off_route_reason(fmt_name: str) -> str:
    """Why a flow obsmask recorded as a request of ``fmt_name`` is skipped
    when no route in force matches it."""
    return (f"recorded by obsmask as an {FORMAT_TITLES[fmt_name]} request, on a route "
            "the settings in force do not read as one (obsmask_*_route, obsmask_hosts)")


@dataclass(frozen=True)
class SentRequest:
    """One conversation request as the client sent it."""

    file: str  # the input it comes from, as named on the command line
    flow: int | None  # its number among the file's HTTP flows; None: a body file
    body: Body  # (the conversation list, what is sent in front of it, the format)
    # Read from the flow's backup: what went to the provider was another body.
    from_backup: bool = False
    # What obsmask did to it when it was recorded (flow.metadata["obsmask"]
    # ["action"]: masked, unchanged, passed_through); None: not recorded
    # through obsmask, or a body file.
    action: str | None = None
    usage: ProviderUsage | None = None  # the provider's own figures, if the flow has them
    # The body's other top-level members (the model, the tool definitions):
    # sent with every request, and counted by the provider.
    members: dict[str, object] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return self.file if self.flow is None else f"{self.file} flow {self.flow}"


@dataclass
class InputSummary:
    """What one input held."""

    file: str
    kind: str  # FLOWS or REQUEST_BODY
    http_requests: int = 0
    conversation_requests: int = 0  # read, and replayed
    from_backup: int = 0
    masked_when_recorded: int = 0
    with_provider_usage: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _body_of(recorded: RecordedRequest, routes: Routes,
             summary: InputSummary) -> tuple[Body, dict[str, object]] | None:
    """The conversation of a recorded request the proxy reads as one, and
    the body's other members; None (and the reason counted in ``summary``)
    when it cannot be measured."""
    fmt = routes.format_of(recorded.method, recorded.path, recorded.host)
    if fmt is None:
        recorded_format = word(recorded.obsmask.get(Key.FORMAT))
        if recorded_format is not None and recorded_format in FORMAT_TITLES:
            summary.skip(off_route_reason(recorded_format))
        return None
    if recorded.body is None:
        summary.skip("body not recorded (streamed) or its encoding cannot be undone")
        return None
    if recorded.original_lost:
        summary.skip(ORIGINAL_LOST)
        return None
    try:
        document = json.loads(recorded.body)
        items, preamble = conversation(document, fmt)
    except ValueError:  # not JSON, or no list of the format
        summary.skip(f"not a JSON {FORMAT_TITLES[fmt.name]} request")
        return None
    if not items:
        summary.skip("an empty conversation")
        return None
    return (items, preamble, fmt), other_members(document, fmt)


def read_flows(path: Path, routes: Routes) -> tuple[list[SentRequest], InputSummary]:
    summary = InputSummary(str(path), FLOWS)
    requests = []
    for recorded in recorded_requests(path):
        summary.http_requests += 1
        read = _body_of(recorded, routes, summary)
        if read is None:
            continue
        body, members = read
        action = word(recorded.obsmask.get(Key.ACTION))
        usage = usage_from_metadata(recorded.obsmask.get(Key.PROVIDER_USAGE))
        requests.append(SentRequest(str(path), recorded.number, body, recorded.from_backup,
                                    action, usage, members))
        summary.conversation_requests += 1
        summary.from_backup += recorded.from_backup
        summary.masked_when_recorded += action == Action.MASKED
        summary.with_provider_usage += usage is not None
    return requests, summary


def read_inputs(paths: Sequence[Path],
                routes: Routes) -> tuple[list[SentRequest], list[InputSummary]]:
    """Every conversation request of the inputs, in the order given, and
    what each input held."""
    requests: list[SentRequest] = []
    summaries: list[InputSummary] = []
    for path in paths:
        if is_request_body_file(path):
            body, members = read_body(path)
            if not body[0]:
                raise OfflineError(f"{path}: an empty conversation")
            requests.append(SentRequest(str(path), None, body, members=members))
            summaries.append(InputSummary(str(path), REQUEST_BODY, 1, 1))
            continue
        found, summary = read_flows(path, routes)
        requests += found
        summaries.append(summary)
    if not requests:
        raise OfflineError("no conversation request in " + ", ".join(map(str, paths)) + ": "
                         "no POST to a chat, messages or responses route with a JSON body")
    return requests, summaries
