"""The proxy's end-of-run bill for recorded flows (``offline/proxy_bill.py``):
a flow obsmask left a record in is counted by that record, as a replay
through the proxy counts it; one without is planned anew; request body
files are no flows."""

from __future__ import annotations

from pathlib import Path

from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.offline.proxy_bill import proxy_bill_lines, proxy_totals
from support.flow_files import read_flows, write_flows
from support.processes import REPO

SESSION = REPO / "fixtures" / "flows" / "anthropic_session.mitm"
POLICY = MaskPolicy(window_turns=1)
ROUTES = Routes()


def _with_record(tmp_path: Path, record: dict[str, object]) -> Path:
    """The saved session with ``record`` left in every flow as obsmask's."""
    flows = read_flows(SESSION)
    for flow in flows:
        flow.metadata["obsmask"] = dict(record)
    return write_flows(tmp_path / "recorded.mitm", flows)


def test_flows_recorded_without_obsmask_are_planned_and_masked_as_a_replay_would() -> None:
    totals = proxy_totals([SESSION], ROUTES, POLICY)
    assert totals.requests.masked > 0
    assert totals.requests.tokens_saved > 0


def test_a_record_holding_only_the_answers_usage_is_a_request_passed_through(
        tmp_path: Path) -> None:
    """The proxy wrote usage but no action (its rewrite failed): the body
    went out as it came, and is not masked again here."""
    path = _with_record(tmp_path, {"provider_usage": {"input_tokens": 10}})
    totals = proxy_totals([path], ROUTES, POLICY)
    assert totals.requests.masked == 0
    assert totals.requests.passed_through == totals.requests.requests > 0
    assert totals.requests.tokens_saved == 0


def test_an_empty_record_is_left_as_the_proxy_left_it(tmp_path: Path) -> None:
    """An answer without usage leaves an empty record: no request to
    count, none to mask again, and so no net line."""
    path = _with_record(tmp_path, {})
    assert proxy_totals([path], ROUTES, POLICY).requests.requests == 0
    assert proxy_bill_lines([path], ROUTES, POLICY) == ()


def test_a_request_body_file_is_no_flow_file(tmp_path: Path) -> None:
    body = tmp_path / "body.json"
    body.write_text('{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
                    encoding="utf-8")
    assert proxy_totals([body], ROUTES, POLICY).requests.requests == 0
