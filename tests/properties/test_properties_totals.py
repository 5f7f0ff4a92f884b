"""Whatever flows come, in whatever order their answers end, the totals are
the sums of the flows' facts, and the run's bill is the sum of every
conversation's latest bill."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.totals.totals import Totals

Json = dict[str, object]

counts = st.integers(min_value=0, max_value=10_000)


@st.composite
def request_facts(draw: st.DrawFn) -> Json:
    action = draw(st.sampled_from(["masked", "unchanged", "passed_through"]))
    facts: Json = {"action": action, "format": "chat"}
    if action != "passed_through":
        facts["conversation"] = draw(st.sampled_from(["c-a", "c-b", "c-c"]))
        facts["bill"] = {"price_model": draw(st.sampled_from(["anthropic", "openai"])),
                         "requests": draw(st.integers(1, 50)),
                         "estimated_with_masking": float(draw(counts)),
                         "estimated_without_masking": float(draw(counts))}
    if action == "masked":
        before, after = draw(counts), draw(counts)
        facts.update(masked_tool_results=draw(counts), masked_tokens_before=before + after,
                     masked_tokens_after=after, tool_chars_before=draw(counts),
                     tool_chars_after=0)
    if draw(st.booleans()):
        facts["provider_usage"] = {"input_tokens": draw(counts),
                                   "cached_input_tokens": draw(counts)}
    return facts


@given(st.lists(request_facts(), max_size=40))
def test_the_totals_are_the_sums_of_the_flows_facts(flows: list[Json]) -> None:
    totals = Totals()
    for facts in flows:
        totals.add_flow(facts, None)
    r = totals.requests
    assert r.requests == len(flows)
    assert r.masked == sum(f["action"] == "masked" for f in flows)
    assert r.tokens_saved == sum(int(str(f.get("masked_tokens_before", 0)))
                                 - int(str(f.get("masked_tokens_after", 0))) for f in flows)
    usages = [f["provider_usage"] for f in flows if "provider_usage" in f]
    assert r.provider_reports == len(usages)
    assert r.provider["input_tokens"] == sum(
        u["input_tokens"] for u in usages if isinstance(u, dict))
    # The latest bill of each conversation: the one with the most requests
    # (the first such one seen loses to a later one with as many).
    latest: dict[str, dict[str, object]] = {}
    for facts in flows:
        bill = facts.get("bill")
        name = facts.get("conversation")
        if isinstance(bill, dict) and isinstance(name, str):
            seen = latest.get(name)
            if seen is None or int(str(bill["requests"])) >= int(str(seen["requests"])):
                latest[name] = bill
    expected: dict[str, tuple[int, float, float]] = {}
    for bill in latest.values():
        n, w, wo = expected.get(str(bill["price_model"]), (0, 0.0, 0.0))
        expected[str(bill["price_model"])] = (
            n + 1, w + float(str(bill["estimated_with_masking"])),
            wo + float(str(bill["estimated_without_masking"])))
    assert {t.price_model: (t.conversations, t.with_masking, t.without_masking)
            for t in totals.bill_totals()} == expected
