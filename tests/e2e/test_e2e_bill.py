"""End to end: the ledger's bill and the holdout group, through a real mitmdump.

The real ``anthropic`` SDK (tests/support/anthropic_shell_agent.py, in the
clients' virtual environment) runs a tool-using conversation one request at
a time through ``mitmdump --mode reverse:...`` with obsmask, its flows written
with ``-w`` and read back. The "provider" is the scripted Anthropic server
(tests/support/scripted_anthropic.py): it asks for one ``Bash`` command per
turn, ``emit N``, whose result is exactly N characters (so the test decides
every result's size), and answers with the usage a prompt cache would report
(``cache_read_input_tokens``, ``cache_creation_input_tokens``), as JSON or
as a stream.

Checked:

- with ``price_model = "anthropic"`` (allowance 2%, window 1, min_free 80%),
  every flow carries the ledger's ``bill`` next to the provider's own
  figures (``provider_usage``): its request count is the flow's place in the
  conversation, its bill with masking stays within 2% of the bill without,
  both grow from request to request, and it is exactly what the pure
  ``plan_masking`` gives for the body the client sent, priced by the
  request's model as the proxy prices it (``price_for_request``; the agent's
  made-up ``claude-stub-1`` is a model the table does not know);
- with ``price_model = "none"`` no flow has a ``bill``;
- with ``holdout_percent = 50`` a conversation whose first message hashes
  below 50 goes upstream byte for byte, its flows saying ``holdout``, while
  one that hashes above is masked; a ``cache_control`` breakpoint that moves
  on and off the first message does not move the conversation out of the
  holdout group.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from mitmproxy import http

from obsmask_core.conversation.billing.breakpoints import read_layout
from obsmask_core.conversation.billing.request_price import price_for_request
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.body.request_body import ExactBody
from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.masking.rewrite import HELD_OUT, mask_read_body
from obsmask_core.conversation.planning.holdout import conversation_bucket
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.agents import clients_python, needs_clients
from support.anthropic_shell_agent import run_shell_agent
from support.flow_files import read_flows
from support.json_values import as_list, as_object, as_str
from support.processes import REPO, MitmdumpProcess, running_mitmdump
from support.scripted_anthropic import ScriptedAnthropic, Served, scripted_anthropic

pytestmark = [pytest.mark.e2e, needs_clients]

Json = dict[str, object]

PROMPT_MARKER = "OBSMASK-E2E-BILL"
PROMPT = f"{PROMPT_MARKER}: the build fails; run the steps you are given and report."
FINAL = "Scripted build done."
# The size of each tool result, in characters: 18 tool turns, a 20,000
# character log every few turns, small and middling ones in between.
SIZES = (20_000, 400, 6_000, 20_000, 1_500, 300, 20_000, 8_000, 600,
         20_000, 2_500, 20_000, 900, 12_000, 20_000, 700, 4_000, 20_000)
# 0-based requests sent with stream=True (the usage then comes in SSE events).
STREAM_TURNS = (2, 7, 12, 18)
LEDGER = MaskPolicy(price_model="anthropic", allowance_percent=2, window_turns=1,
                    min_free_percent=80)
LEDGER_OPTIONS = ("--set", "obsmask_price_model=anthropic", "--set", "obsmask_allowance_percent=2",
                  "--set", "obsmask_window_turns=1", "--set", "obsmask_min_free_percent=80")
# The bill's two figures are rounded to 0.1 each: the bound, rounded, may
# be off by 0.05 * 1.02 + 0.05.
ROUNDING = 0.102
HOLDOUT_PERCENT = 50
HOLDOUT = MaskPolicy(window_turns=1, holdout_percent=HOLDOUT_PERCENT)
HOLDOUT_OPTIONS = ("--set", "obsmask_price_model=none", "--set", "obsmask_window_turns=1",
                   "--set", f"obsmask_holdout_percent={HOLDOUT_PERCENT}")
HOLDOUT_SIZES = (3_000, 5_000, 3_000, 8_000, 3_000)


def commands(sizes: tuple[int, ...]) -> list[str]:
    return [f"emit {size} step{number}" for number, size in enumerate(sizes)]


# Running one conversation ----------------------------------------------------------


@dataclass
class Exchange:
    """One request of the conversation: what the client sent, what the
    provider received and answered, and the flow mitmdump wrote."""

    number: int  # 1-based, in the conversation
    sent: bytes  # the body the SDK wrote
    served: Served  # what the scripted server received and the usage it reported
    flow: http.HTTPFlow

    @property
    def items(self) -> list[object]:
        return as_list(as_object(json.loads(self.sent))["messages"])

    @property
    def meta(self) -> Json:
        return as_object(self.flow.metadata["obsmask"])

    @property
    def received(self) -> bytes:
        return self.served.recorded.body



def _proxy_arguments(server_url: str, tmp_path: Path, flows: Path, *options: str) -> list[str]:
    """Reverse mode to the scripted server, an empty settings file (the
    repository's mitm.toml must not count), the flows written to ``flows``."""
    config = tmp_path / "obsmask.toml"
    config.write_text("", encoding="utf-8")
    return ["--mode", f"reverse:{server_url}", "--set", f"obsmask_config={config}",
            "-w", str(flows), *options]


def _run(proxy: MitmdumpProcess, prompt: str, stream_turns: tuple[int, ...],
         breakpoint: str = "none", first_breakpoint_turns: tuple[int, ...] = ()) -> list[str]:
    """One conversation of the agent through ``proxy``: the bodies it sent."""
    report = run_shell_agent(clients_python(), f"http://127.0.0.1:{proxy.port}", prompt,
                             stream_turns=stream_turns, breakpoint=breakpoint,
                             first_breakpoint_turns=first_breakpoint_turns, log=proxy.output)
    return [as_str(as_object(r)["sent_body"]) for r in as_list(report["requests"])]


def _read_flows(path: Path) -> list[http.HTTPFlow]:
    return sorted(read_flows(path), key=lambda f: f.request.timestamp_start)


def _exchanges(scripted: ScriptedAnthropic, flows: list[http.HTTPFlow], prompt: str,
               sent: list[str]) -> list[Exchange]:
    """The conversation started with ``prompt``, request by request: each
    body the client sent, matched with its flow (by the answer's
    ``request-id``) and with what the server received."""
    served = {s.request_id: s for s in scripted.task()}
    mine = [f for f in flows if _first_text(json.loads(_original(f))) == prompt]
    assert len(mine) == len(sent), "one flow per request of the conversation"
    out = []
    for number, (flow, body) in enumerate(zip(mine, sent, strict=True), start=1):
        assert flow.response is not None and flow.response.status_code == 200
        answered = served[flow.response.headers["request-id"]]
        # The flow's original request is what the client sent, byte for byte.
        assert _original(flow) == body.encode("utf-8"), f"request {number}"
        assert flow.request.content == answered.recorded.body, f"request {number}"
        out.append(Exchange(number, body.encode("utf-8"), answered, flow))
    return out


def _original(flow: http.HTTPFlow) -> bytes:
    """The request as the client sent it: the flow's backup, when obsmask
    changed it."""
    if not flow.modified():
        return flow.request.content or b""
    copy = flow.copy()
    copy.revert()
    return copy.request.content or b""


def _first_text(body: object) -> str:
    first = as_object(as_list(as_object(body)["messages"])[0])
    return "".join(as_str(as_object(b)["text"]) for b in as_list(first["content"]))


def _expected_usage(served: Served) -> Json:
    """The provider's figures, as the stub reported them, under obsmask's names."""
    usage = as_object(served.usage)
    return {
        "input_tokens": usage["input_tokens"],
        "cached_input_tokens": usage["cache_read_input_tokens"],
        "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
        "output_tokens": usage["output_tokens"],
    }


def _masked_as_the_model_says(exchange: Exchange, policy: MaskPolicy) -> None:
    """What the provider received is the client's body with ``mask_items``
    applied (the addon's own model), everything else as sent."""
    sent = as_object(json.loads(exchange.sent))
    received = as_object(json.loads(exchange.received))
    expected = mask_items(exchange.items, policy, ANTHROPIC, read_layout(sent, exchange.items))
    assert received == {**sent, "messages": expected}, f"request {exchange.number}"
    assert (exchange.meta["action"] == "masked") == (expected != exchange.items)


def _number(value: object) -> float:
    assert isinstance(value, int | float) and not isinstance(value, bool), value
    return float(value)


def _bucket(first_message: Json) -> int:
    bucket = conversation_bucket([first_message])
    assert bucket is not None
    return bucket


def _first_message(prompt: str, breakpoint_key: str | None = None) -> Json:
    """The first message as the agent sends it; with a breakpoint under
    ``breakpoint_key`` (``cache_control``, or another name for a hash that
    would count it)."""
    block: Json = {"type": "text", "text": prompt}
    if breakpoint_key is not None:
        block[breakpoint_key] = {"type": "ephemeral"}
    return {"role": "user", "content": [block]}


def _pick_prompt(accept: Callable[[str], bool]) -> str:
    """The first prompt of a fixed series that ``accept`` takes."""
    for variant in range(1000):
        prompt = f"{PROMPT_MARKER}: the build fails (variant {variant}); run the steps."
        if accept(prompt):
            return prompt
    raise AssertionError("no prompt of the series fits")


# The bill ------------------------------------------------------------------------


def test_every_flow_carries_the_bill_so_far_within_the_allowance_next_to_the_provider_usage(
    tmp_path: Path,
) -> None:
    """price_model "anthropic", allowance 2%, window 1, min_free 80%: 19
    requests of one conversation (18 tool turns, results up to 20,000
    characters, four answers streamed). Every flow, masked or unchanged,
    has a ``bill``: ``requests`` is its number in the conversation, the
    estimate with masking is at most 2% above the one without, both grow
    from flow to flow, it equals the pure ``plan_masking`` bill of the body
    the client sent priced by its model (made up: not in the table), and the
    provider's figures from the same answer sit next to it. At least one request is masked."""
    flows_file = tmp_path / "flows.mitm"
    with scripted_anthropic(PROMPT_MARKER, commands(SIZES), FINAL) as scripted:
        arguments = _proxy_arguments(scripted.url, tmp_path, flows_file, *LEDGER_OPTIONS)
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            line = proxy.wait_for(r"obsmask: conversation masking on").string
            assert "price_model=anthropic" in line and "allowance_percent=2" in line
            sent = _run(proxy, PROMPT, stream_turns=STREAM_TURNS, breakpoint="last")
            output = proxy.output()
        exchanges = _exchanges(scripted, _read_flows(flows_file), PROMPT, sent)
    assert "Traceback" not in output and "forwarded unchanged" not in output, output
    assert len(exchanges) == len(SIZES) + 1
    # Premise: the results are the sizes asked for.
    last_results = [as_object(b) for m in exchanges[-1].items[2::2]
                    for b in as_list(as_object(m)["content"])]
    assert [len(as_str(b["content"])) for b in last_results] == list(SIZES)
    assert [e.served.stream for e in exchanges] == [n in STREAM_TURNS for n in range(len(sent))]

    previous: Json | None = None
    for exchange in exchanges:
        meta, where = exchange.meta, f"request {exchange.number}"
        assert meta["action"] in ("masked", "unchanged"), where
        bill = as_object(meta["bill"])
        assert bill["price_model"] == "anthropic" and bill["allowance_percent"] == 2, where
        assert bill["requests"] == exchange.number, where
        with_masking = _number(bill["estimated_with_masking"])
        without = _number(bill["estimated_without_masking"])
        assert with_masking <= without * 1.02 + ROUNDING, (where, bill)
        assert bill["allowance_used"] == pytest.approx(max(0.0, with_masking - without),
                                                       abs=0.11), (where, bill)
        if previous is not None:
            assert with_masking > _number(previous["estimated_with_masking"]), where
            assert without > _number(previous["estimated_without_masking"]), where
        previous = bill
        # The same bill, from the pure function, on the body the client sent,
        # priced as the proxy prices it: by the request's model (the agent's
        # made-up "claude-stub-1", which the table does not know: the flow
        # names the provider's cautious row).
        items = exchange.items
        sent_body = as_object(json.loads(exchange.sent))
        price = price_for_request(LEDGER.price_model, LEDGER.models, anthropic=True,
                                  model=sent_body.get("model"))
        assert price is not None, where
        layout = read_layout(sent_body, items, minimum_tokens=price.minimum_tokens)
        plan = plan_masking(ANTHROPIC.index(items), LEDGER, items,
                            terms=BillingTerms(layout=layout, price=price))
        assert plan.bill is not None and plan.bill.as_metadata() == bill, where
        assert as_object(bill["model_row"])["known"] is False, where
        # The provider's own figures, from the same answer, next to it.
        assert meta["provider_usage"] == _expected_usage(exchange.served), where
        _masked_as_the_model_says(exchange, LEDGER)

    actions = [e.meta["action"] for e in exchanges]
    assert "masked" in actions and "unchanged" in actions, actions
    figures = [
        (e.number, e.meta["action"], as_object(e.meta["bill"])["ratio"],
         as_object(e.meta["provider_usage"])["cached_input_tokens"]) for e in exchanges
    ]
    print("\nrequest, action, bill ratio, provider's cached tokens:", figures)


def test_without_a_price_model_no_flow_has_a_bill(tmp_path: Path) -> None:
    """price_model "none" (the ledger off): the flows of a masked
    conversation carry the action and the provider's figures, and no
    ``bill``."""
    flows_file = tmp_path / "flows.mitm"
    sizes = SIZES[:6]
    options = ("--set", "obsmask_price_model=none", "--set", "obsmask_window_turns=1",
               "--set", "obsmask_min_free_percent=80")
    with scripted_anthropic(PROMPT_MARKER, commands(sizes), FINAL) as scripted:
        arguments = _proxy_arguments(scripted.url, tmp_path, flows_file, *options)
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            sent = _run(proxy, PROMPT, stream_turns=(3,), breakpoint="last")
        exchanges = _exchanges(scripted, _read_flows(flows_file), PROMPT, sent)
    assert len(exchanges) == len(sizes) + 1
    policy = MaskPolicy(window_turns=1, min_free_percent=80)
    for exchange in exchanges:
        assert exchange.meta["provider_usage"] == _expected_usage(exchange.served)
        _masked_as_the_model_says(exchange, policy)
    actions = [e.meta["action"] for e in exchanges]
    assert "masked" in actions and "unchanged" in actions, actions
    with_a_bill = [(e.number, e.meta["action"], e.meta["bill"])
                   for e in exchanges if "bill" in e.meta]
    assert with_a_bill == [], "(request, action, bill) of the flows with a 'bill' key"


# The holdout group -------------------------------------------------------------------


def _assert_held_out(exchanges: list[Exchange]) -> None:
    """Every request went upstream byte for byte, its flow saying why."""
    for exchange in exchanges:
        where = f"request {exchange.number}"
        assert exchange.received == exchange.sent, where
        assert not exchange.flow.modified() and not exchange.flow.marked, where
        meta = exchange.meta
        assert meta["action"] == "unchanged" and meta["reason"] == HELD_OUT, (where, meta)
        assert meta["holdout"] is True, where
        assert meta["provider_usage"] == _expected_usage(exchange.served), where
    # It was worth holding out: without the holdout the last request would
    # have been masked.
    items = exchanges[-1].items
    assert mask_items(items, MaskPolicy(window_turns=1), ANTHROPIC) != items


def test_a_conversation_in_the_holdout_group_goes_upstream_unchanged_and_the_other_is_masked(
    tmp_path: Path,
) -> None:
    """holdout_percent 50, window 1, no price model: of two conversations
    through the same mitmdump, the one whose first message hashes below 50
    reaches the provider byte for byte, every flow saying ``holdout``; the
    one whose first message hashes at 50 or above is masked."""
    held = _pick_prompt(lambda p: _bucket(_first_message(p)) < HOLDOUT_PERCENT)
    other = _pick_prompt(lambda p: _bucket(_first_message(p)) >= HOLDOUT_PERCENT)
    flows_file = tmp_path / "flows.mitm"
    with scripted_anthropic(PROMPT_MARKER, commands(HOLDOUT_SIZES), FINAL) as scripted:
        arguments = _proxy_arguments(scripted.url, tmp_path, flows_file, *HOLDOUT_OPTIONS)
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            line = proxy.wait_for(r"obsmask: conversation masking on").string
            assert f"holdout_percent={HOLDOUT_PERCENT}" in line
            sent_held = _run(proxy, held, stream_turns=(2,))
            sent_other = _run(proxy, other, stream_turns=(2,))
        flows = _read_flows(flows_file)
        held_out = _exchanges(scripted, flows, held, sent_held)
        masked = _exchanges(scripted, flows, other, sent_other)
    assert len(held_out) == len(masked) == len(HOLDOUT_SIZES) + 1
    # Premise: the first messages are the ones whose buckets were computed.
    assert held_out[0].items[0] == _first_message(held)
    assert masked[0].items[0] == _first_message(other)

    _assert_held_out(held_out)
    for exchange in masked:
        assert "holdout" not in exchange.meta, exchange.meta
        _masked_as_the_model_says(exchange, HOLDOUT)
    assert sum(e.meta["action"] == "masked" for e in masked) == len(HOLDOUT_SIZES) - 1


def test_a_moving_cache_control_breakpoint_keeps_a_conversation_in_the_holdout_group(
    tmp_path: Path,
) -> None:
    """The same conversation sends its first message with a
    ``cache_control`` block on some requests and without on the others (a
    breakpoint on the last block of every request, and on the first message
    in requests 0, 2 and 4): it stays in the holdout group on every
    request. The prompt is one whose first message would hash to the other
    group if the breakpoint counted."""
    first_breakpoints = (0, 2, 4)

    def fits(prompt: str) -> bool:
        clean = _bucket(_first_message(prompt))
        counted = _bucket(_first_message(prompt, breakpoint_key="counted_breakpoint"))
        return clean < HOLDOUT_PERCENT <= counted

    held = _pick_prompt(fits)
    assert _bucket(_first_message(held, breakpoint_key="cache_control")) < HOLDOUT_PERCENT
    flows_file = tmp_path / "flows.mitm"
    with scripted_anthropic(PROMPT_MARKER, commands(HOLDOUT_SIZES), FINAL) as scripted:
        arguments = _proxy_arguments(scripted.url, tmp_path, flows_file, *HOLDOUT_OPTIONS)
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            sent = _run(proxy, held, stream_turns=(3,), breakpoint="last",
                        first_breakpoint_turns=first_breakpoints)
        exchanges = _exchanges(scripted, _read_flows(flows_file), held, sent)
    assert len(exchanges) == len(HOLDOUT_SIZES) + 1
    # Premise: the breakpoint moved on and off the first message.
    for number, exchange in enumerate(exchanges):
        on_first = number == 0 or number in first_breakpoints
        expected = _first_message(held, "cache_control" if on_first else None)
        assert exchange.items[0] == expected, f"request {number}"
        last_block = as_object(as_list(as_object(exchange.items[-1])["content"])[-1])
        assert last_block["cache_control"] == {"type": "ephemeral"}
    _assert_held_out(exchanges)


def test_requests_that_only_add_items_reuse_the_previous_masked_body_byte_for_byte(
    tmp_path: Path,
) -> None:
    """The same conversation, the agent appending to its history and
    moving no cache breakpoint: a request for which masking plans what it
    planned for the one before goes out made from that one's masked body,
    and its flow says so. Every request, reused or not, reaches the
    provider byte for byte as the exact reader, which keeps no request,
    masks the client's body in this test's process."""
    flows_file = tmp_path / "flows.mitm"
    with scripted_anthropic(PROMPT_MARKER, commands(SIZES), FINAL) as scripted:
        arguments = _proxy_arguments(scripted.url, tmp_path, flows_file, *LEDGER_OPTIONS)
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            sent = _run(proxy, PROMPT, stream_turns=STREAM_TURNS, breakpoint="none")
            output = proxy.output()
        exchanges = _exchanges(scripted, _read_flows(flows_file), PROMPT, sent)
    assert "Traceback" not in output and "forwarded unchanged" not in output, output
    reused = []
    for exchange in exchanges:
        anew = mask_read_body(ExactBody.read(exchange.sent, "messages"), LEDGER, ANTHROPIC)
        assert exchange.received == (anew.body or exchange.sent), f"request {exchange.number}"
        if exchange.meta.get("reused_previous_body") is True:
            assert exchange.meta["action"] == "masked"
            reused.append(exchange.number)
    masked = [e.number for e in exchanges if e.meta["action"] == "masked"]
    # The frontier moves now and then: some masked requests are made anew,
    # and the others from the request before.
    assert reused and set(reused) < set(masked), (reused, masked)
    print("\nmasked requests:", masked, "made from the previous masked body:", reused)
