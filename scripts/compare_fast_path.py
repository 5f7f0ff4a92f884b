#!/usr/bin/env python3
"""The fast path changes no byte: every request of every benchmark session,
masked by one masker that keeps what it learns between requests (the
frontier's checkpoints, the judgements, the previous request's body: what
the proxy runs), is compared with the same request masked by a masker
that has kept nothing (the slow path, read and planned from scratch).
Each request is sent twice to the masker that keeps (the second time a
retry, answered from what it kept): both must go out as the slow path's.

    python3 scripts/compare_fast_path.py            # every session, every setting
    python3 scripts/compare_fast_path.py --quick    # three sessions per shape

Sessions: the real ones of fixtures/sessions/ in all three wire formats
(each request as its client sends it; Anthropic ones as Claude Code sends
them: two marked system blocks, the breakpoint moving to the newest block),
and the Claude Code-shaped copies of the Anthropic ones (its twelve tool
definitions, its reminders as system messages: scripts/benchlib/cache/
claude_code.py). Settings: the shipped mitm.toml and each of its profiles.
No pauses, no shared table: the comparison is of the request alone.

``outputs_digest`` hashes every output of the masker that keeps, each
request's and its retry's, in order (its kind, the body that goes out and
the plan, bill included): run at two commits, the same digest says that a
change left every output as it was. Without pauses or a table of last
sightings, it does not cover cold or doubtful turns, nor the holdout.

Prints one JSON document: requests compared per shape and setting, and
every difference (its session, request and setting); exits 1 on any.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.outputs_digest import Digest, digested, sent_body  # noqa: E402
from benchlib.shaped_sessions import settings, shaped  # noqa: E402
from obsmask_core.conversation.masking.masker import Masker  # noqa: E402
from obsmask_core.conversation.settings.policy import MaskPolicy  # noqa: E402
from obsmask_core.offline.cache.clients import ClientRequests  # noqa: E402
from obsmask_core.offline.cache.sessions import Session  # noqa: E402

SESSIONS = REPO / "fixtures" / "sessions"


def compare(session: Session, policy: MaskPolicy,
            digest: Digest) -> tuple[int, list[int]]:
    """Requests compared, and those whose outputs differ; each output of the
    masker that keeps, the request's and its retry's, goes into ``digest``."""
    client, kept = ClientRequests(session), Masker(policy)
    differ: list[int] = []
    for number, end in enumerate(session.request_ends):
        body = client.request(end).body
        fast = kept.mask(body, session.fmt)
        retry = kept.mask(bytes(body), session.fmt)
        slow = Masker(policy).mask(body, session.fmt)
        expected = (type(slow), sent_body(slow), slow.plan)
        digested(digest, fast)
        digested(digest, retry)
        if (type(fast), sent_body(fast), fast.plan) != expected \
                or (type(retry), sent_body(retry), retry.plan) != expected:
            differ.append(number)
    return len(session.request_ends), differ


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "mitm.toml")
    parser.add_argument("--quick", action="store_true", help="three sessions per shape")
    options = parser.parse_args()
    started = time.monotonic()
    counts: dict[str, dict[str, int]] = {}
    differences: list[dict[str, object]] = []
    digest = hashlib.sha256()
    for name, policy in settings(options.config).items():
        for shape, sessions in shaped(SESSIONS, 3 if options.quick else None).items():
            for session in sessions:
                compared, differ = compare(session, policy, digest)
                counts.setdefault(shape, {}).setdefault(name, 0)
                counts[shape][name] += compared
                differences += [{"shape": shape, "session": session.name, "setting": name,
                                 "request": number} for number in differ]
    print(json.dumps({
        "requests_compared": sum(n for by_name in counts.values() for n in by_name.values()),
        "by_shape_and_setting": counts,
        "differences": differences,
        "outputs_digest": digest.hexdigest(),
        "seconds": round(time.monotonic() - started, 1),
    }, indent=2))
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
