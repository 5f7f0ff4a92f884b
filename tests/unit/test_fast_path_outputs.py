"""The fast path changes no byte (``conversation/reuse``, the frontier's
checkpoints, the kept judgements): every request of a real session, masked
by one masker that keeps what it learns between requests (as the proxy
does), goes out exactly as when masked by a masker that kept nothing, in
every wire format and in Claude Code's shape (its breakpoint moving to the
newest block on every request). scripts/compare_fast_path.py does the same
over every benchmark session and setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import load_real_sessions
from obsmask_core.shared.config_file import load_config
from obsmask_core.shared.settings import build

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("fmt", ["chat", "anthropic", "responses"])
def test_every_request_goes_out_as_a_masker_that_kept_nothing_sends_it(fmt):
    policy = build(MaskPolicy, policy_values(load_config(str(REPO / "mitm.toml")), ""))
    session = load_real_sessions(REPO / "fixtures" / "sessions", (fmt,))[0]
    client, kept = ClientRequests(session), Masker(policy)
    masked = 0
    for end in session.request_ends[:40]:  # a session's first 40 requests (time)
        body = client.request(end).body
        fast, slow = kept.mask(body, session.fmt), Masker(policy).mask(body, session.fmt)
        assert type(fast) is type(slow) and fast.plan == slow.plan, end
        assert getattr(fast, "body", None) == getattr(slow, "body", None), end
        masked += hasattr(fast, "body")
    assert masked > 0
