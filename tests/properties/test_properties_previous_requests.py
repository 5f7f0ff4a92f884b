"""Property-based tests of reusing the previous request's masked body
(``previous_requests``): whatever the encoder, the place of the list among
the other members, retries, edits and the order requests come in, every
request goes out exactly as masking it anew would send it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.body.request_body import ExactBody
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.rewrite import mask_read_body
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.conversation_strategies import growing_conversations, requests_of
from support.conversation_strategies import priced_policies as policies
from support.encoders import ENCODERS
from support.formats import convert
from support.resumed_replays import edited

# A member after the list that holds the next member's name, brackets and
# a list of its own: where the list closes must not be taken from it.
TRICKY = {"tools": [{"name": "model", "enum": ["model", "]", '"model":']}], "model": "m"}


def document(fmt: WireFormat, items: list[object], layout: str) -> dict[str, object]:
    match layout:
        case "list_last":
            return {"model": "m", "stream": True, fmt.list_member: items}
        case "list_first":
            return {fmt.list_member: items, "model": "m", "stream": True}
        case "list_then_tricky":
            return {"max_tokens": 10, fmt.list_member: items, **TRICKY}
    raise ValueError(layout)


def masked_anew(body: bytes, policy: object, fmt: WireFormat,
                recall: bool) -> tuple[str, bytes, MaskPlan | None]:
    """The outcome the exact reader gives, with the frontier replayed in
    full: it neither uses nor keeps a previous request or a checkpoint."""
    outcome = mask_read_body(ExactBody.read(body, fmt.list_member), policy, fmt, recall)
    return type(outcome).__name__, outcome.body or body, outcome.plan


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=growing_conversations(), policy=policies,
       fmt=st.sampled_from([CHAT, ANTHROPIC, RESPONSES]),
       encoder=st.sampled_from(sorted(ENCODERS)),
       layout=st.sampled_from(["list_last", "list_first", "list_then_tricky"]),
       recall=st.booleans(), data=st.data())
def test_a_request_grown_from_the_previous_one_goes_out_as_masking_it_anew_would_send_it(
        events, policy, fmt, encoder, layout, recall, data):
    """Requests of a conversation in order, with retries, requests sent
    again out of order and edited histories in between: each masked body
    (reused from the previous request or not) is byte for byte the one the
    exact reader makes of it alone, from the same plan (what the flow's
    metadata reports)."""
    masker = Masker(policy)
    requests = [convert(fmt, request) for request in requests_of(events)]
    for number, items in enumerate(requests):
        sent = [items]
        match data.draw(st.integers(0, 5)):
            case 0:
                sent.append(items)  # a retry
            case 1 if number:
                sent.append(requests[data.draw(st.integers(0, number - 1))])  # an old one
            case 2 if len(items) > 1:
                sent.append(edited(items, data.draw(st.integers(0, len(items) - 1))))
        for each in sent:
            body = ENCODERS[encoder](document(fmt, each, layout))
            outcome = masker.mask(body, fmt, recall=recall)
            assert (type(outcome).__name__, outcome.body or body, outcome.plan) \
                == masked_anew(body, policy, fmt, recall)
