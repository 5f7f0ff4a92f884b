"""The digest two commits' outputs are compared by
(``scripts/benchlib/outputs_digest.py``): an output that differs in its
kind, in the body that goes out or in its plan digests differently, and
the parts cannot stand in for one another (no body is not an empty one,
and a body's end is not the plan's start)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from benchlib.outputs_digest import digested


@dataclass
class Masked:
    body: bytes | None
    plan: object


@dataclass
class Unchanged:
    plan: object


def digest_of(*outcomes) -> str:
    digest = hashlib.sha256()
    for outcome in outcomes:
        digested(digest, outcome)
    return digest.hexdigest()


def test_the_same_outputs_digest_alike_and_any_change_digests_apart():
    first = Masked(b'{"messages": []}', ("plan", 1))
    assert digest_of(first) == digest_of(Masked(b'{"messages": []}', ("plan", 1)))
    assert digest_of(first) != digest_of(Masked(b'{"messages": [1]}', ("plan", 1)))
    assert digest_of(first) != digest_of(Masked(b'{"messages": []}', ("plan", 2)))
    assert digest_of(Unchanged(("plan", 1))) != digest_of(Masked(None, ("plan", 1)))


def test_no_body_and_an_empty_one_digest_apart():
    assert digest_of(Masked(None, "p")) != digest_of(Masked(b"", "p"))
    assert digest_of(Masked(None, "p")) != digest_of(Masked(b"-", "p"))


class Written:
    """A plan whose repr is the text given."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def test_where_the_body_ends_and_the_plan_begins_counts():
    assert digest_of(Masked(b"ab", Written("c"))) != digest_of(Masked(b"a", Written("bc")))
