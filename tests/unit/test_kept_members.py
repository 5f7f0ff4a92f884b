"""A body grown from a kept request shares its other members, byte for
byte: its prices and the digest of its history go on from that request's,
so with the table of when conversations were last seen on (the shipped
settings) such a body is keyed exactly as writing its history whole keys
it, and is not read whole for it."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import orjson
import pytest

from obsmask_core.conversation.billing.history_key import HistoryKey, history_key
from obsmask_core.conversation.billing.last_seen import LastSeen, Sighting, Visit
from obsmask_core.conversation.body import quick_body
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import load_real_sessions
from obsmask_core.shared.config_file import load_config
from obsmask_core.shared.settings import build

REPO = Path(__file__).resolve().parents[2]


class KeysSeen(LastSeen):
    """The table, noting every key it is visited with."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[HistoryKey] = []

    def visit(self, key: HistoryKey, now: float, end: int, lifetime: float,
              doubtful_after: float | None = None) -> Sighting:
        self.keys.append(key)
        return super().visit(key, now, end, lifetime, doubtful_after)


def shipped() -> MaskPolicy:
    return build(MaskPolicy, policy_values(load_config(str(REPO / "mitm.toml")), ""))


def answer_starts(items: list[object]) -> list[int]:
    return [number for number, item in enumerate(items)
            if isinstance(item, dict) and item.get("role") == "assistant"]


def parses_while(action):
    with mock.patch.object(quick_body.orjson, "loads", wraps=orjson.loads) as loads:
        outcome = action()
    return outcome, [len(call.args[0]) for call in loads.call_args_list]


@pytest.mark.parametrize("fmt", ["anthropic", "chat"])
def test_every_request_of_a_session_keys_as_its_history_written_whole(fmt):
    """Claude Code's moving breakpoint included (Anthropic): each request's
    key, made from the kept request's digest and its added items, is the
    one its whole history gives; and visiting the table makes no request
    parse more than masking it without the table does (the key, the prices
    and, under OpenAI's rule, the cache's lifetime do not read a grown
    body's other members)."""
    [session] = [s for s in load_real_sessions(REPO / "fixtures" / "sessions", (fmt,))
                 if len(s.request_ends) > 20][:1]
    client, table = ClientRequests(session), KeysSeen()
    visiting, alone = Masker(shipped()), Masker(shipped())
    for number, end in enumerate(session.request_ends):
        body = client.request(end).body
        outcome, parsed = parses_while(
            lambda b=body, n=number: visiting.mask(b, session.fmt, visit=Visit(table, 20.0 * n)))
        plain, parsed_alone = parses_while(lambda b=body: alone.mask(b, session.fmt))
        assert outcome.body == plain.body, number
        assert parsed == parsed_alone, number
        document = orjson.loads(body)
        items = document.pop("messages")
        assert table.keys[-1] == history_key(document, items, answer_starts(items)), number
    assert len(table.keys) == len(session.request_ends)

