"""A digest of masking's outputs, to compare two commits: the same digest
says that a change left every output as it was
(``scripts/compare_fast_path.py``, ``scripts/outputs_digest.py``)."""

from __future__ import annotations

from typing import Protocol

from obsmask_core.conversation.masking.outcomes import RewriteOutcome


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def sent_body(outcome: RewriteOutcome) -> bytes | None:
    """What goes out: the masked body, or None for the client's own."""
    body = getattr(outcome, "body", None)
    return body if isinstance(body, bytes) else None


def digested(digest: Digest, outcome: RewriteOutcome) -> None:
    """``outcome`` into ``digest``: its kind, the body that goes out (none:
    the client's own) and its plan, bill included, each after its length,
    so that no two outputs digest alike by where their parts meet."""
    body = sent_body(outcome)
    for part in (type(outcome).__name__.encode(), b"" if body is None else b"b" + body,
                 repr(outcome.plan).encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
