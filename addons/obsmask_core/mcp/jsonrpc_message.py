"""What a scan of a JSON-RPC 2.0 text reports: each message's envelope and
kind, and where the strings to cut are.

A message is a request (``method`` and ``id``), a notification (``method``
without ``id``) or a response (``id`` and exactly one of ``result`` and
``error``, no ``method``), and says ``"jsonrpc": "2.0"``; anything else is
invalid.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JsonRpcMessage:
    """One JSON-RPC message of a body, as far as the scan needs to know it."""

    jsonrpc_ok: bool = False
    has_id: bool = False
    id_text: str | None = None  # the id as it is written in the text
    has_method: bool = False
    method: str | None = None  # the method's name, when it is a string
    # params.name, when it is a string (the tool a tools/call request calls)
    params_name: str | None = None
    has_result: bool = False
    has_error: bool = False

    @property
    def kind(self) -> str:
        """``request``, ``notification``, ``response`` or ``invalid``."""
        if not self.jsonrpc_ok:
            return "invalid"
        if self.has_method and not (self.has_result or self.has_error):
            return "request" if self.has_id else "notification"
        if self.has_id and self.has_result != self.has_error and not self.has_method:
            return "response"
        return "invalid"


@dataclass
class JsonRpcScan:
    """What a text holds: its messages (one, or a batch) and the strings to cut.

    ``problem`` says why the text is not JSON-RPC (then nothing is cut).
    """

    messages: list[JsonRpcMessage] = field(default_factory=list)
    batch: bool = False
    problem: str | None = None
    # (start, end, message index) of the string tokens to cut
    spans: list[tuple[int, int, int]] = field(default_factory=list)
    # The values of the spans the scan decoded already (by their start): the
    # long strings, which the cut need not decode again.
    values: dict[int, str] = field(default_factory=dict)

    def kinds(self) -> set[str]:
        return {message.kind for message in self.messages}
