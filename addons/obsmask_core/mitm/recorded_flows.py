"""The HTTP flows of a mitmproxy flow file (.mitm), read with
``mitmproxy.io`` into plain records, for the offline commands (``obsmask
measure`` and ``obsmask report``): the one reader of recorded flows, and
the only place they meet mitmproxy.

A flow that obsmask masked keeps the client's request in its backup
(mitmproxy's ``flow.backup()``, saved with the flow: what mitmweb's Revert
brings back), read by the addon's own reader (``flows.original_request``);
its request is the masked body that was forwarded. A flow without a
backup went out as the client sent it. A flow obsmask masked whose backup
is missing or cannot be read has lost its original (``original_lost``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mitmproxy import exceptions, http, io

from obsmask_core.mitm.flows import CONVERSATION_METADATA, MCP_METADATA, original_request
from obsmask_core.shared.read_back import mapping, word
from obsmask_core.shared.request_record import Action, Key


class UnreadableFlowFile(ValueError):
    """A file that cannot be read as mitmproxy flows (the message says why)."""


@dataclass(frozen=True)
class RecordedFlow:
    """One HTTP flow of a file: its request as the client sent it and as it
    went out, and what obsmask left on it."""

    number: int  # among the file's HTTP flows, from 1
    position: int  # among all its flows, of any kind, from 1
    method: str  # the client's
    path: str  # without the query (clients put keys there)
    host: str  # the Host header or the authority asked for (pretty_host)
    # The client's body decoded from any content-encoding (empty if none);
    # None when it was not recorded (stream_large_bodies) or its encoding
    # cannot be undone.
    client_body: bytes | None
    # The same, kept as recorded where the encoding cannot be undone.
    client_body_as_recorded: bytes
    # The body that went out, decoded where it can be.
    sent_body: bytes
    # The flow has a backup whose request differs from the one that went out.
    from_backup: bool
    # obsmask masked it and its original is not in the flow (no backup, or
    # one that cannot be read): the client's body is unknown.
    original_lost: bool
    # obsmask left a record of the request in the flow (its key is there,
    # whatever it holds): a replay through the proxy keeps that record.
    recorded_through_obsmask: bool = False
    # When the request that went out started (a replay through the proxy,
    # mitmdump -nr, plans it at that time).
    started: float = 0.0
    conversation: Mapping[str, object] = field(default_factory=dict)  # metadata["obsmask"]
    mcp: Mapping[str, object] = field(default_factory=dict)  # metadata["obsmask_mcp"]


class FlowFile:
    """A flow file being read: its HTTP flows as records, and how many flows
    of any kind it held (``flows_read``, once read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.flows_read = 0

    def http_flows(self) -> Iterator[RecordedFlow]:
        """Every HTTP flow of the file, in order; UnreadableFlowFile if the
        file cannot be read as flows."""
        try:
            with open(self.path, "rb") as file:
                number = 0
                for flow in io.FlowReader(file).stream():
                    self.flows_read += 1
                    if isinstance(flow, http.HTTPFlow):
                        number += 1
                        yield _recorded(flow, number, self.flows_read)
        except exceptions.FlowReadException as e:
            raise UnreadableFlowFile(f"{self.path}: not a mitmproxy flow file ({e})") from None
        except OSError as e:
            raise UnreadableFlowFile(f"{self.path}: cannot be read ({e.strerror})") from None


def _recorded(flow: http.HTTPFlow, number: int, position: int) -> RecordedFlow:
    sent = flow.request
    client = original_request(flow) or sent
    try:
        body = (client.get_content(strict=True) or b"") if client.raw_content is not None \
            else None
    except ValueError:  # an encoding that cannot be undone
        body = None
    # Decoded once where the strict decoding worked, and once for both
    # requests where the client's is the one that went out.
    as_recorded = body if body is not None else (client.get_content(strict=False) or b"")
    conversation = dict(mapping(flow.metadata.get(CONVERSATION_METADATA)))
    return RecordedFlow(
        number=number, position=position, method=client.method,
        path=client.path.split("?", 1)[0], host=client.pretty_host,
        client_body=body,
        client_body_as_recorded=as_recorded,
        sent_body=as_recorded if client is sent else (sent.get_content(strict=False) or b""),
        from_backup=client.raw_content != sent.raw_content,
        original_lost=(word(conversation.get(Key.ACTION)) == Action.MASKED
                       and client.raw_content == sent.raw_content),
        recorded_through_obsmask=CONVERSATION_METADATA in flow.metadata,
        started=sent.timestamp_start,
        conversation=conversation,
        mcp=dict(mapping(flow.metadata.get(MCP_METADATA))),
    )
