"""The requests of the inputs grouped into conversations, each a session
the cache benchmark's replay bills.

The rule is the cache benchmark's (``obsmask_core.offline.cache.sessions.last_bodies``): a
request whose list another request of the same format continues belongs
to that request's conversation, and the requests no other one continues
end a conversation each (a flow file holding two conversations gives two).
A conversation is replayed from its last request's list, request by
request (every prefix that ends just before an answer of the model), so
the requests the client really sent are among the replayed ones; each
recorded request is paired with the replayed request of the same length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from obsmask_core.conversation.planning.holdout import conversation_id
from obsmask_core.offline.cache.sessions import Session, continues, last_bodies
from obsmask_core.offline.measure.inputs import SentRequest

SESSION_KIND = "input"


@dataclass
class Conversation:
    number: int  # from 1, in the order of the inputs
    session: Session
    last: SentRequest  # the request whose list is the whole conversation
    requests: list[SentRequest] = field(default_factory=list)  # every one recorded, in order

    @property
    def name(self) -> str:
        """The proxy's name for it (a hash of its first user message, the
        one flow metadata and totals use)."""
        return conversation_id(self.session.messages) or f"#{self.number}"

    def replay_index(self, request: SentRequest) -> int | None:
        """The replayed request (from 0) that is ``request``: the prefix of
        the same length; None if the replay has no such prefix."""
        length = len(request.body[0])
        ends = self.session.request_ends
        return ends.index(length) if length in ends else None


def group_conversations(requests: Sequence[SentRequest]) -> list[Conversation]:
    """The conversations of ``requests``, in the order of their last requests."""
    bodies = [request.body for request in requests]
    conversations = []
    for number, position in enumerate(last_bodies(bodies), start=1):
        last = requests[position]
        items, preamble, fmt = last.body
        session = Session(f"#{number}", SESSION_KIND, items, fmt=fmt, preamble=preamble,
                          members=last.members)
        conversations.append(Conversation(number, session, last))
    for request in requests:
        # A request's list may start two conversations (the same system
        # prompt and task, then different turns): the first one takes it.
        home = next(c for c in conversations if continues(request.body, c.last.body))
        home.requests.append(request)
    return conversations
