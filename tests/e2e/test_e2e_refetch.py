"""End to end: masking must not make the agent work more. A real ``openai``
SDK agent (tests/clients/chat_agent.py) works through a real mitmdump
against a stub model (tests/support/refetching_model.py) that needs a file
in view and reads it again whenever the result of its earlier read was
masked.

With the guard off, every step costs a re-read of the notes, and each
re-read is counted: in the flows (the call ids), and in the proxy's totals.
With ``refetch_guard`` on, the first re-read is kept, so the same task takes
fewer model turns and bills less, both read from the flows the proxy wrote
(the provider's usage in each flow, priced as OpenAI bills cached input).
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.agents import CLIENTS, needs_clients, run_agent
from support.flow_files import read_flows
from support.json_values import as_list, as_object
from support.processes import REPO, running_mitmdump
from support.refetching_model import FINAL_TEXT, refetching_model

pytestmark = [pytest.mark.e2e, needs_clients]

AGENT = CLIENTS / "chat_agent.py"
FILES = 5
MOST_TURNS = 4 * FILES
CACHED_PRICE = 0.1  # OpenAI bills cached input at a tenth


@dataclass(frozen=True)
class Run:
    model_turns: int
    refetch_calls: list[str]
    guarded_results: int
    bill: float
    totals: dict[str, object]


def _run(tmp_path: Path, guard: bool) -> Run:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "obsmask.toml"
    config.write_text("")  # the repository's mitm.toml must not count
    flows_file = tmp_path / "flows.mitm"
    with refetching_model(FILES) as (server, model):
        arguments = [
            "--mode", f"reverse:{server.url}", "-w", str(flows_file),
            "--set", f"obsmask_config={config}",
            "--set", "obsmask_window_turns=1",
            "--set", f"obsmask_refetch_guard={'true' if guard else 'false'}",
        ]
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            report = run_agent(AGENT, f"http://127.0.0.1:{proxy.port}/v1", server.url,
                               MOST_TURNS, (), proxy)
            totals = _totals(proxy.port)
        assert isinstance(report, dict)
        assert report["answers"][-1]["parsed"]["choices"][0]["message"]["content"] == FINAL_TEXT
        assert len(model.bills) == len(server.posts("/chat/completions"))
    flows = [flow for flow in read_flows(flows_file)
             if flow.request.path.endswith("/chat/completions")]
    facts = [as_object(flow.metadata.get("obsmask", {})) for flow in flows]
    refetches = [as_object(fact.get("refetches") or {}) for fact in facts]
    calls = [str(call) for found in refetches for call in as_list(found.get("new_calls", []))]
    usage = [as_object(fact.get("provider_usage") or {}) for fact in facts]
    bill = sum(_int(u["input_tokens"]) - _int(u.get("cached_input_tokens", 0))
               + CACHED_PRICE * _int(u.get("cached_input_tokens", 0)) for u in usage)
    guarded = max((_int(found.get("guarded_results", 0)) for found in refetches), default=0)
    return Run(len(flows), calls, guarded, bill, totals)


def _int(value: object) -> int:
    assert isinstance(value, int), value
    return value


def _totals(port: int) -> dict[str, object]:
    """The proxy's running totals (its own endpoint, as a user reads them)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/obsmask/totals", timeout=10) as answer:
        return as_object(json.loads(answer.read()))


def test_without_the_guard_every_reread_of_a_masked_result_is_counted(tmp_path):
    run = _run(tmp_path, guard=False)
    # The notes are read once, then again before each of the files after
    # the first (the window of one turn masks them each time).
    assert len(run.refetch_calls) == FILES
    assert run.model_turns == 1 + FILES + FILES + 1
    assert run.guarded_results == 0
    requests = as_object(run.totals.get("requests", {}))
    counted = as_object(requests.get("refetches", {}))
    assert counted.get("calls") == FILES
    assert as_object(counted.get("tools", {})) == {"read_file": FILES}
    assert counted.get("extra_turns") == FILES


def test_with_the_guard_the_same_task_takes_fewer_turns_and_bills_less(tmp_path):
    off = _run(tmp_path / "off", guard=False)
    on = _run(tmp_path / "on", guard=True)
    print(f"guard off: {off.model_turns} model turns, bill {off.bill:.0f}; "
          f"guard on: {on.model_turns} model turns, bill {on.bill:.0f}")
    # One re-read, then the notes stay in view.
    assert len(on.refetch_calls) == 1
    assert on.guarded_results == 1
    assert on.model_turns == 1 + FILES + 1 + 1
    assert on.model_turns < off.model_turns
    assert on.bill < off.bill
