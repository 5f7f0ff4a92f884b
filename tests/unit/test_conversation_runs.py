"""Two runs of one task: they share the conversation's name (the hash of
its first user message), and each has a run of its own (the hash of the
model's first answer), so the totals add up both runs' bills instead of
keeping the longer one."""

from __future__ import annotations

from obsmask_core.conversation.planning.holdout import conversation_id, session_id
from obsmask_core.totals.totals import Totals
from support.chat import tool_result, tool_turn

TASK = [{"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the failing test."}]


def run(first_command: str, turns: int) -> list[object]:
    """A run of the task whose first answer calls ``first_command``."""
    items: list[object] = list(TASK)
    for number in range(turns):
        call = f"{first_command}-{number}"
        items += [tool_turn(call), tool_result(call, f"output {number}")]
    return items


def record(items: list[object], with_masking: float, without: float) -> dict[str, object]:
    """A request's record as the proxy writes it (the fields the bill needs)."""
    facts: dict[str, object] = {
        "action": "unchanged", "format": "chat", "reason": "nothing to mask",
        "conversation": conversation_id(items),
        "bill": {"price_model": "openai", "requests": len(items),
                 "estimated_with_masking": with_masking,
                 "estimated_without_masking": without}}
    if (session := session_id(items)) is not None:
        facts["session"] = session
    return facts


def test_a_runs_requests_share_its_run_and_two_runs_differ() -> None:
    first, second = run("ls", 3), run("pytest", 3)
    assert conversation_id(first) == conversation_id(second)
    assert session_id(TASK) is None  # no answer yet
    assert session_id(first[:3]) == session_id(first) != session_id(second)
    # Read from the first answer on: a grown request need not read the rest.
    assert session_id(first, start=2) == session_id(first)


def test_the_totals_add_up_the_bill_of_each_run_of_one_task() -> None:
    totals = Totals()
    first, second = run("ls", 3), run("pytest", 2)
    totals.add_flow(record(TASK, 100.0, 100.0), None)  # each run's first request
    totals.add_flow(record(first, 800.0, 1000.0), None)
    totals.add_flow(record(TASK, 100.0, 100.0), None)
    totals.add_flow(record(second, 450.0, 500.0), None)
    [bill] = totals.bill_totals()
    # Each run's bill so far holds its first request: counted once each.
    assert (bill.conversations, bill.with_masking, bill.without_masking) == (2, 1250.0, 1500.0)


def test_a_run_that_never_got_an_answer_keeps_its_own_bill() -> None:
    totals = Totals()
    totals.add_flow(record(run("ls", 2), 400.0, 500.0), None)
    totals.add_flow(record(TASK, 100.0, 100.0), None)  # another run, stopped at once
    [bill] = totals.bill_totals()
    assert (bill.conversations, bill.with_masking, bill.without_masking) == (2, 500.0, 600.0)
