"""End to end: the real ``openai`` SDK agent (tests/clients/chat_agent.py,
Chat Completions) asking for ``gpt-5.6``, against a stub whose usage comes
from the caching OpenAI stub (tests/support/caching_provider.py, its own
model table: GPT-5.6 and later write at the implicit breakpoint closing the
latest user or tool message, billed at 1.25 and reported as
``prompt_tokens_details.cache_write_tokens``, read whole at 0.1 among the
latest 80 entries, no 128-token steps, minimum 1,024), directly and through
a real mitmdump with the shipped mitm.toml (``price_model = "auto"``: the
request priced by obsmask's row for its model) with ``min_free_percent=0``.

The scripted model calls ``read_file`` and ``run_tests`` in turn (results
of 2,000 to 4,000 characters), ``TOOL_TURNS`` times, then answers with
text; both runs get the same answers. Checked:

- every flow obsmask billed names its row for ``gpt-5.6`` and predicts what
  the stub reported for it: ``input_tokens`` its ``prompt_tokens``,
  ``cache_read_tokens`` its ``cached_tokens``, ``cache_write_tokens`` its
  ``cache_write_tokens``;
- the stub's bill of the run through obsmask (plain 1.0, read 0.1, written
  1.25) is at most the direct run's, with results masked.

The figures are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from dataclasses import dataclass

import pytest
from mitmproxy import http

from support.agents import CLIENTS, CLIENTS_PYTHON, client_env, needs_clients
from support.caching_provider import OpenAIBill, OpenAIPromptCache
from support.flow_files import read_flows
from support.json_values import as_object
from support.processes import REPO, recording_arguments, running_mitmdump
from support.recording_server import Answer, Recorded, RecordingServer

pytestmark = [pytest.mark.e2e, needs_clients]

Json = dict[str, object]

AGENT = CLIENTS / "chat_agent.py"
MODEL = "gpt-5.6"
TOOL_TURNS = 14
COMPLETION_TOKENS = 20
FINAL = "Scripted GPT-5.6 run done."
SETTINGS = {"window_turns": "1", "allowance_percent": "2", "min_free_percent": "0"}


@dataclass(frozen=True)
class Served:
    request_id: str
    body: Json
    bill: OpenAIBill


class ScriptedCachingChat:
    """A Chat Completions "model" that calls the agent's two tools in turn,
    then answers with text, its usage from ``cache``."""

    def __init__(self) -> None:
        self.cache = OpenAIPromptCache("messages")
        self.served: list[Served] = []
        self._lock = threading.Lock()

    def __call__(self, recorded: Recorded) -> Answer:
        if recorded.method != "POST" or not recorded.path.endswith("/chat/completions"):
            return Answer(status=404, body=b'{"error": {"message": "not found"}}')
        request = as_object(json.loads(recorded.body))
        messages = request["messages"]
        assert isinstance(messages, list)
        turn = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        with self._lock:
            bill = self.cache.bill(request)
            request_id = f"req_scripted_{len(self.served):04d}"
            self.served.append(Served(request_id, request, bill))
        message: Json = {"role": "assistant", "refusal": None}
        if turn < TOOL_TURNS:
            name, arguments = (("read_file", {"path": f"src/stage_{turn}.py"}) if turn % 2 == 0
                               else ("run_tests", {"selector": f"tests/test_{turn}.py"}))
            message["content"] = None
            message["tool_calls"] = [{"id": f"call_{turn}", "type": "function",
                                      "function": {"name": name,
                                                   "arguments": json.dumps(arguments)}}]
            finish = "tool_calls"
        else:
            message["content"] = FINAL
            finish = "stop"
        answer = {"id": f"chatcmpl-{request_id}", "object": "chat.completion",
                  "created": 1_700_000_000, "model": request.get("model"),
                  "choices": [{"index": 0, "message": message, "logprobs": None,
                               "finish_reason": finish}],
                  "usage": bill.chat_usage(COMPLETION_TOKENS)}
        return Answer(headers={"content-type": "application/json", "x-request-id": request_id},
                      body=json.dumps(answer).encode())


@dataclass
class Run:
    model: ScriptedCachingChat
    flows: list[http.HTTPFlow]


def _agent(base_url: str, stub_url: str) -> None:
    assert CLIENTS_PYTHON is not None
    done = subprocess.run(
        [CLIENTS_PYTHON, str(AGENT), "--base-url", base_url, "--stub-url", stub_url,
         "--turns", str(TOOL_TURNS + 1)],
        cwd=REPO, env={**client_env(), "OBSMASK_CHAT_AGENT_MODEL": MODEL},
        capture_output=True, text=True, encoding="utf-8", timeout=120, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    base = tmp_path_factory.mktemp("gpt56_cache")
    direct = ScriptedCachingChat()
    server = RecordingServer(direct)
    server.start()
    try:
        _agent(f"{server.url}/v1", server.url)
    finally:
        server.stop()

    config = base / "mitm.toml"
    shutil.copyfile(REPO / "mitm.toml", config)  # the shipped settings; --set wins
    flows_file = base / "flows.mitm"
    proxied = ScriptedCachingChat()
    server = RecordingServer(proxied)
    server.start()
    try:
        arguments = recording_arguments(server.url, config, flows_file, SETTINGS)
        with running_mitmdump(arguments, REPO, base / "confdir") as proxy:
            proxy.wait_for(r"conversation masking on")
            _agent(f"http://127.0.0.1:{proxy.port}/v1", server.url)
    finally:
        server.stop()
    return Run(direct, []), Run(proxied, read_flows(flows_file))


def _figures(bill: OpenAIBill) -> dict[str, int]:
    return {"input_tokens": bill.prompt_tokens, "cache_read_tokens": bill.cached_tokens,
            "cache_write_tokens": bill.cache_write_tokens}


def _row(figures: object) -> str:
    f = as_object(figures)
    return (f"read {f['cache_read_tokens']:>6,} write {f['cache_write_tokens']:>6,} "
            f"input {f['input_tokens']:>6,}")


def test_the_stub_bills_both_runs_under_gpt_5_6_terms(runs: tuple[Run, Run]) -> None:
    """Premise: both runs did the whole task, every request billed by the
    stub's GPT-5.6 row (implicit breakpoint, writes reported): the first
    requests, under 1,024 tokens, write nothing; the first over it writes
    all of it."""
    for run in runs:
        served = run.model.served
        assert len(served) == TOOL_TURNS + 1
        assert all(s.bill.terms.name == "gpt-5.6" and s.bill.terms.breakpoint for s in served)
        small = [s.bill for s in served if s.bill.prompt_tokens < 1024]
        assert small and all(b.cache_write_tokens == 0 for b in small)
        first = next(s.bill for s in served if s.bill.prompt_tokens >= 1024)
        assert first.cache_write_tokens == first.prompt_tokens


def test_every_flow_predicts_what_the_gpt_5_6_stub_read_and_wrote(runs: tuple[Run, Run]) -> None:
    """On every flow, the ledger's ``predicted`` equals the stub's
    cached_tokens, cache_write_tokens and prompt_tokens, priced under the
    row of obsmask's table for gpt-5.6."""
    _, proxied = runs
    by_id = {s.request_id: (n, s) for n, s in enumerate(proxied.model.served)}
    lines = ["request: action, masked results, cache | predicted | stub"]
    differences = []
    flows = [f for f in proxied.flows if f.request.path.endswith("/chat/completions")]
    assert len(flows) == len(proxied.model.served)
    for flow in flows:
        assert flow.response is not None
        number, served = by_id[str(flow.response.headers["x-request-id"])]
        summary = as_object(flow.metadata.get("obsmask", {}))
        bill = as_object(summary["bill"])
        row = as_object(bill["model_row"])
        assert (row["row"], row["known"]) == ("gpt-5.6", True), row
        predicted, reported = as_object(bill["predicted"]), _figures(served.bill)
        lines.append(f"  {number:2d}: {summary.get('action')!s:9} "
                     f"{summary.get('masked_tool_results', 0)!s:>2} {bill['cache']!s:18} | "
                     f"{_row(predicted)} | {_row(reported)}")
        if predicted != reported:
            differences.append(f"request {number}: predicted {predicted}, "
                               f"stub reported {reported}")
    print("\n" + "\n".join(lines))
    assert differences == [], "\n".join(differences)


def test_gpt_5_6_bills_no_more_through_obsmask_than_directly(runs: tuple[Run, Run]) -> None:
    """The stub's bill of the run through obsmask (plain 1.0, read 0.1,
    written 1.25) is at most the direct run's, and results were masked."""
    direct, proxied = runs
    through, straight = proxied.model.cache.total_units(), direct.model.cache.total_units()
    masked = [as_object(f.metadata.get("obsmask", {})).get("masked_tool_results", 0)
              for f in proxied.flows]
    print(f"\ngpt-5.6: stub's bill in input-price units: direct {straight:,.1f}, "
          f"through obsmask {through:,.1f} ({through / straight:.3f}x); "
          f"results masked per request: {' '.join(map(str, masked))}")
    for number, (d, p) in enumerate(zip(direct.model.served, proxied.model.served,
                                        strict=True)):
        print(f"  {number:2d}: direct {_row(_figures(d.bill))} = {d.bill.units():>8,.1f} | "
              f"through obsmask {_row(_figures(p.bill))} = {p.bill.units():>8,.1f}")
    assert any(isinstance(n, int) and n > 0 for n in masked), "obsmask masked nothing"
    assert through <= straight
