"""What the page says of a conversation's re-fetches: the calls the model
made again once masking took their result, as the flows recorded them
(``flow.metadata["obsmask"]["refetches"]``, read back by
``obsmask_core.shared.refetch_facts``), and what they cost. Each re-fetch
is counted in the request whose newest answer made it: once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from obsmask_core.offline.report.request_numbers import RequestNumbers


def refetch_paragraph(requests: Sequence[RequestNumbers]) -> str | None:
    """None when no request of the conversation recorded a re-fetch or a
    result the guard kept."""
    found = [(r.number, r.refetches) for r in requests if r.refetches]
    if not found:
        return None
    calls = sum(facts.new for _, facts in found)
    tools: Counter[str] = Counter()
    for _, facts in found:
        tools.update(dict(facts.new_tools))
    where = "; ".join(f"request {number}: {', '.join(facts.new_calls) or facts.new}"
                      for number, facts in found if facts.new)
    guarded = sum(facts.guarded_results for _, facts in found)
    return (
        f"Re-fetches: {calls} call(s) the model made again after obsmask had masked the "
        "result of the same earlier call"
        + (" (" + ", ".join(f"{tool} {n}" for tool, n in sorted(tools.items())) + ")"
           if tools else "")
        + (f", in {where}" if where else "")
        + f". They cost {sum(facts.result_tokens for _, facts in found):,} tokens of "
        f"results fetched again and {sum(facts.extra_turns for _, facts in found)} extra "
        "model turn(s) (answers that made nothing else)"
        + (f"; the re-fetch guard kept {guarded} result(s), summed over the requests"
           if guarded else "")
        + ".")
