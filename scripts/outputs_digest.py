#!/usr/bin/env python3
"""Every output of masking as the proxy meets the requests, hashed: run at
two commits, the same digest says that a change left every output (the
body that goes out, the plan, the bill) as it was.

    python3 scripts/outputs_digest.py            # every session
    python3 scripts/outputs_digest.py --quick    # four sessions per shape

``compare_fast_path.py`` compares the fast path with the slow one on the
request alone. This one sends each shape's sessions one after the other
to one masker, with what only a running proxy has: a table of when
conversations were last seen, the requests paced with pauses on both
sides of the caches' lifetimes (so that turns come back cold and
doubtful), a retry of every fifth request, the holdout at 0, 50 and 100%
(the holdout group is billed but never masked), and the same sessions
again under a model the table does not know (billed under each of its
provider's rows: the alternative ledgers). Sessions and settings are
``compare_fast_path.py``'s: the shipped mitm.toml and each profile.

Prints one JSON document: outputs hashed, how many bills name their
history, and the digest.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.outputs_digest import Digest, digested  # noqa: E402
from benchlib.shaped_sessions import settings, shaped  # noqa: E402
from obsmask_core.conversation.billing.last_seen import LastSeen, Visit  # noqa: E402
from obsmask_core.conversation.masking.masker import Masker  # noqa: E402
from obsmask_core.conversation.settings.policy import MaskPolicy  # noqa: E402
from obsmask_core.offline.cache.clients import ClientRequests  # noqa: E402
from obsmask_core.offline.cache.sessions import Session  # noqa: E402

SESSIONS = REPO / "fixtures" / "sessions"
# Seconds before each request, in turn: a pace, a retry's, and pauses
# around five minutes (Anthropic's and OpenAI's shortest lifetime), past
# it, and past an hour.
PAUSES = (20.0, 3.0, 290.0, 20.0, 400.0, 20.0, 3700.0, 20.0, 310.0)
HOLDOUTS = (0, 50, 100)
RETRY_EVERY = 5
_MODEL = re.compile(rb'"model"\s*:\s*"[^"]*"')
UNKNOWN_MODELS = {"anthropic": b'"model": "claude-unknown-9"',
                  "openai": b'"model": "gpt-unknown-9"'}


def as_unknown_model(body: bytes, fmt: str) -> bytes:
    """``body`` naming a model of its provider that the model table does not know."""
    return _MODEL.sub(UNKNOWN_MODELS["anthropic" if fmt == "anthropic" else "openai"],
                      body, count=1)


def paced(sessions: list[Session], policy: MaskPolicy, unknown: bool,
          digest: Digest) -> tuple[int, int]:
    """Mask ``sessions`` in turn, as one proxy meets them; outputs hashed,
    and how many of their bills name their history."""
    masker, table, now = Masker(policy), LastSeen(), 0.0
    pauses = itertools.cycle(PAUSES)
    outputs = named = 0
    for session in sessions:
        client = ClientRequests(session)
        for number, end in enumerate(session.request_ends):
            now += next(pauses)
            body = client.request(end).body
            if unknown:
                body = as_unknown_model(body, session.fmt.name)
            for attempt in range(2 if number % RETRY_EVERY == 0 else 1):
                outcome = masker.mask(bytes(body), session.fmt, visit=Visit(table, now + attempt))
                digested(digest, outcome)
                outputs += 1
                bill = outcome.plan.bill if outcome.plan is not None else None
                named += bill is not None and bill.history is not None
    return outputs, named


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "mitm.toml")
    parser.add_argument("--quick", action="store_true", help="four sessions per shape")
    options = parser.parse_args()
    started = time.monotonic()
    digest = hashlib.sha256()
    outputs = named = 0
    by_shape = shaped(SESSIONS, 4 if options.quick else None)
    for policy in settings(options.config).values():
        for holdout, unknown in itertools.product(HOLDOUTS, (False, True)):
            for sessions in by_shape.values():
                made, with_history = paced(sessions, replace(policy, holdout_percent=holdout),
                                           unknown, digest)
                outputs, named = outputs + made, named + with_history
    print(json.dumps({
        "outputs": outputs,
        "bills_naming_their_history": named,
        "outputs_digest": digest.hexdigest(),
        "seconds": round(time.monotonic() - started, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
