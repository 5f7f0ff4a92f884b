"""The load benchmark's mix with fresh bodies: every conversation request is
one obsmask has not seen, and still the same request."""

from __future__ import annotations

import gzip
import json

from benchlib.load.bodies import build_bodies
from benchlib.load.mix import MIX, Mix
from support.processes import REPO

CONVERSATION_KINDS = [kind for kind in MIX if not kind.startswith(("mcp", "bad"))]


def decoded(body: bytes, headers: dict[str, str]) -> bytes:
    return gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body


def test_fresh_bodies_are_never_sent_twice_and_hold_the_same_request():
    bodies = build_bodies(REPO / "fixtures" / "sessions")
    repeated, fresh = Mix(bodies, cuts=True), Mix(bodies, cuts=True, fresh=True)
    seen: set[bytes] = set()
    for n in range(3 * len(MIX)):
        for kind in CONVERSATION_KINDS:
            old, new = repeated.of_kind(kind, n), fresh.of_kind(kind, n)
            old_body, new_body = decoded(old.body, old.headers), decoded(new.body, new.headers)
            assert new_body not in seen
            seen.add(new_body)
            document = json.loads(new_body)
            assert isinstance(document.pop("bench_request"), int)
            assert document == json.loads(old_body)
            assert (new.path, new.headers, new.expected) == (old.path, old.headers, old.expected)


def test_without_fresh_the_bodies_repeat():
    bodies = build_bodies(REPO / "fixtures" / "sessions")
    mix = Mix(bodies, cuts=True)
    assert mix.of_kind("anthropic", 0).body == mix.of_kind("anthropic", len(bodies.anthropic)).body
