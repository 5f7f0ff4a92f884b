"""End to end: the stub provider with a prompt cache (tests/support/caching_provider.py,
served by tests/support/scripted_anthropic.py with ``cache=``), driven by the
real ``anthropic`` SDK, directly and through a real mitmdump with obsmask.

The agent (tests/support/anthropic_shell_agent.py, in the clients' virtual
environment) runs one tool-using conversation of 5 tool turns, a breakpoint
on the last block of every request (as Claude Code does) and one more on the
first message in request 2, two answers streamed. Its first message is long
enough (over 1,024 tokens) for the first request to be written.

Checked, with token counts recomputed here from the documented estimate (a
prefix of ``i`` messages is ``chars // 4 + 3 * i``, after ``chars(tools,
system) // 4``; ``cache_control`` not counted):

- directly: request 1 writes its whole prompt; every later request reads the
  whole prompt of the one before (its entry 3 blocks back, within the
  20-block lookback) and writes the rest; nothing is plain input;
- through the proxy (obsmask, window of 1 tool turn, which masks old
  results and so breaks the prefix): each request reads the longest earlier
  prompt that the body the stub received starts with (``cache_control``
  aside, same tools and system, at most 19 blocks before its last block) and
  writes the rest; request 2 reads request 1's entry; each flow carries the
  usage the stub reported (JSON and SSE); the stub saw exactly the client's
  breakpoints, never more than 4.

The two runs' bills (units of the base input price) are printed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from mitmproxy import http

from support.agents import clients_python, needs_clients
from support.anthropic_shell_agent import run_shell_agent
from support.caching_provider import AnthropicBill, AnthropicPromptCache
from support.flow_files import read_flows
from support.json_values import as_list, as_object, as_str
from support.processes import REPO, running_mitmdump
from support.scripted_anthropic import Served, scripted_anthropic

pytestmark = [pytest.mark.e2e, needs_clients]

Json = dict[str, object]

PROMPT_MARKER = "OBSMASK-E2E-CACHING-STUB"
# Over 1,024 tokens on its own: the first request is written to the cache.
PROMPT = f"{PROMPT_MARKER}: run the steps you are given. " + "Keep every log. " * 300
FINAL = "Scripted caching run done."
SIZES = (6_000, 400, 5_000, 300, 7_000)
STREAM_TURNS = (1, 4)
FIRST_BREAKPOINT_TURNS = (2,)
LOOKBACK_BLOCKS = 20
OUTPUT_TOKENS = 25


def _commands() -> list[str]:
    return [f"emit {size} step{number}" for number, size in enumerate(SIZES)]



# The rules, recomputed from the bodies ------------------------------------------------


def _chars(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_chars(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return 0


def _stripped(value: object) -> object:
    if isinstance(value, dict):
        return {k: _stripped(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_stripped(v) for v in value]
    return value


def _tokens(body: Json) -> int:
    messages = as_list(body["messages"])
    return ((_chars(body.get("tools")) + _chars(body.get("system"))) // 4
            + _chars(messages) // 4 + 3 * len(messages))


def _blocks(body: Json) -> int:
    """The blocks in cache order: each tool, the system string, each
    message's content blocks."""
    content = [as_object(m)["content"] for m in as_list(body["messages"])]
    return (len(as_list(body.get("tools", []))) + (1 if isinstance(body.get("system"), str) else 0)
            + sum(len(c) if isinstance(c, list) else 1 for c in content))


def _starts(earlier: Json, later: Json) -> bool:
    """Whether ``later``'s prompt starts with the whole of ``earlier``'s,
    cache_control aside."""
    count = len(as_list(earlier["messages"]))
    return (later["model"] == earlier["model"]
            and _stripped(later.get("tools")) == _stripped(earlier.get("tools"))
            and _stripped(later.get("system")) == _stripped(earlier.get("system"))
            and _stripped(as_list(later["messages"])[:count]) == _stripped(earlier["messages"]))


def _expected_read(bodies: list[Json], k: int) -> int:
    """What request ``k`` reads: every request wrote its whole prompt (its
    breakpoint on its last block, over the minimum), so the longest earlier
    prompt that ``k``'s starts with, within the lookback of ``k``'s last
    block."""
    return max((_tokens(bodies[j]) for j in range(k) if _starts(bodies[j], bodies[k])
                and _blocks(bodies[k]) - _blocks(bodies[j]) < LOOKBACK_BLOCKS), default=0)


def _breakpoints_of(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[object, ...]]:
    """(path, cache_control) of every cache_control of a body, found by walking it."""
    found: list[tuple[object, ...]] = []
    if isinstance(value, dict):
        if "cache_control" in value and path:
            found.append((path, value["cache_control"]))
        for key, inner in value.items():
            found += _breakpoints_of(inner, (*path, key))
    elif isinstance(value, list):
        for number, inner in enumerate(value):
            found += _breakpoints_of(inner, (*path, number))
    return found


def _check_bill(bill: AnthropicBill, body: Json, read: int, where: str) -> None:
    total = _tokens(body)
    assert bill.total_tokens == total, where
    assert (bill.cache_read_input_tokens, bill.cache_creation_input_tokens,
            bill.input_tokens) == (read, total - read, 0), where
    assert bill.units == pytest.approx(0.1 * read + 1.25 * (total - read)), where


# Running the conversation --------------------------------------------------------------


@dataclass
class Run:
    sent: list[bytes]  # what the client sent, in order
    served: list[Served]  # what the stub received, reported and billed, in order
    cache: AnthropicPromptCache
    flows: list[http.HTTPFlow]


def _conversation(base_url: str, log: Callable[[], str] = str) -> list[bytes]:
    """The conversation run against ``base_url``: the bodies the client sent."""
    report = run_shell_agent(clients_python(), base_url, PROMPT, stream_turns=STREAM_TURNS,
                             breakpoint="last", first_breakpoint_turns=FIRST_BREAKPOINT_TURNS,
                             log=log)
    return [as_str(as_object(r)["sent_body"]).encode() for r in as_list(report["requests"])]


def _direct() -> Run:
    cache = AnthropicPromptCache()
    with scripted_anthropic(PROMPT_MARKER, _commands(), FINAL, cache=cache) as scripted:
        sent = _conversation(scripted.url)
        return Run(sent, scripted.task(), cache, [])


def _through_proxy(tmp_path: Path) -> Run:
    cache = AnthropicPromptCache()
    flows_file = tmp_path / "flows.mitm"
    config = tmp_path / "obsmask.toml"
    config.write_text("", encoding="utf-8")  # the repository's mitm.toml must not count
    with scripted_anthropic(PROMPT_MARKER, _commands(), FINAL, cache=cache) as scripted:
        arguments = ["--mode", f"reverse:{scripted.url}", "--set", f"obsmask_config={config}",
                     "--set", "obsmask_window_turns=1", "--set", "obsmask_price_model=none",
                     "-w", str(flows_file)]
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            sent = _conversation(f"http://127.0.0.1:{proxy.port}", proxy.output)
        flows = sorted(read_flows(flows_file), key=lambda f: f.request.timestamp_start)
        return Run(sent, scripted.task(), cache, flows)


def test_the_caching_stub_bills_a_conversation_as_the_documented_cache_rules_say(
    tmp_path: Path,
) -> None:
    direct = _direct()
    proxied = _through_proxy(tmp_path)
    for run in (direct, proxied):
        assert len(run.sent) == len(run.served) == len(SIZES) + 1
        assert [s.kind for s in run.served] == ["task"] * len(run.sent)
        assert [s.stream for s in run.served] == [n in STREAM_TURNS for n in range(len(run.sent))]
        assert [s.bill for s in run.served] == run.cache.bills
        # Premise: every prompt is over the minimum, so every request writes.
        bodies = [as_object(json.loads(s.recorded.body)) for s in run.served]
        assert min(_tokens(b) for b in bodies) >= 1024

    # Directly: each request reads the whole prompt of the one before.
    bodies = [as_object(json.loads(s.recorded.body)) for s in direct.served]
    assert [s.recorded.body for s in direct.served] == direct.sent
    for k, served in enumerate(direct.served):
        read = _tokens(bodies[k - 1]) if k else 0
        assert served.bill is not None
        _check_bill(served.bill, bodies[k], read, f"direct request {k + 1}")
        if k:
            assert served.bill.read is not None
            assert served.bill.read.block == _blocks(bodies[k - 1]) - 1, f"request {k + 1}"
        assert served.usage == served.bill.usage(OUTPUT_TOKENS)

    # Through the proxy: the rules on what the stub received.
    bodies = [as_object(json.loads(s.recorded.body)) for s in proxied.served]
    served_by_id = {s.request_id: s for s in proxied.served}
    messages_flows = [f for f in proxied.flows if f.request.path.startswith("/v1/messages")]
    assert len(messages_flows) == len(proxied.served)
    for k, (served, sent, flow) in enumerate(
            zip(proxied.served, proxied.sent, messages_flows, strict=True)):
        where = f"request {k + 1} through the proxy"
        assert served.bill is not None
        _check_bill(served.bill, bodies[k], _expected_read(bodies, k), where)
        # The breakpoints the stub saw are the client's, none added.
        seen = [(b.path, b.cache_control) for b in served.bill.breakpoints]
        assert seen == _breakpoints_of(json.loads(sent)), where
        assert 1 <= len(seen) <= 4, where
        # The flow carries the usage the stub reported, as obsmask read it.
        assert flow.response is not None and flow.response.status_code == 200, where
        assert served_by_id[flow.response.headers["request-id"]] is served, where
        assert as_object(flow.metadata["obsmask"])["provider_usage"] == {
            "input_tokens": 0,
            "cached_input_tokens": served.bill.cache_read_input_tokens,
            "cache_creation_input_tokens": served.bill.cache_creation_input_tokens,
            "output_tokens": OUTPUT_TOKENS,
        }, where
    second = proxied.served[1].bill
    assert second is not None and second.cache_read_input_tokens == _tokens(bodies[0])
    # Premise: obsmask changed some request's prefix, so some read fell short
    # of the whole request before (the rule above was tested on a miss too).
    short = [k + 1 for k in range(1, len(bodies))
             if _expected_read(bodies, k) < _tokens(bodies[k - 1])]
    assert short, "obsmask masked nothing: no request read less than the one before"
    print(f"\nbill in input-price units: direct {direct.cache.total_units():.1f}, "
          f"through obsmask {proxied.cache.total_units():.1f}; "
          f"requests reading less than the previous prompt through obsmask: {short}")
