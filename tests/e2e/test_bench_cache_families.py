"""bench_cache per model family (``offline/cache/families.py``,
``family_replay.py``): the replay's caches with the family's lookback,
minimum and step, its prices, the runs it shares between families, the
Claude Code-shaped sessions (reminders as ``role: "system"`` messages, a
moving breakpoint on the newest one, twelve tools) and, on a --quick run,
every family and reading reported with its targets checked."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from benchlib.cache.claude_code import claude_code_session, claude_code_tools
from benchlib.cache.policies import compared_policies
from benchlib.cache.synthetic import synthetic_session
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.families import (
    FAMILIES,
    LINE_NAMES,
    Line,
    choose_families,
    table_agreement,
)
from obsmask_core.offline.cache.family_replay import run_key
from obsmask_core.offline.cache.model import AnthropicCache, OpenAICache
from obsmask_core.offline.cache.prompt_blocks import Breakpoint, make_prompt
from obsmask_core.offline.cache.sessions import Session, load_real_sessions
from support.processes import REPO

FAMILY = {family.name: family for family in FAMILIES}


def _blocks(count: int, tokens: int = 100) -> list[tuple[bytes, tuple[int, ...]]]:
    return [(b"k%d" % n, tuple(range(n * tokens, (n + 1) * tokens))) for n in range(count)]


def _policies() -> dict[str, object]:
    return {name: choice.policy for name, choice in
            compared_policies(REPO / "mitm.toml").items()}


@pytest.mark.parametrize(("lookback", "hit"), [(20, False), (21, True)])
def test_the_lenient_lookback_reads_one_boundary_further_back(lookback, hit):
    """An entry at the boundary after block b-20 of a breakpoint on block b: the strict
    reading (b..b-19) misses it, the lenient one (down to b-20) reads it."""
    blocks = _blocks(40)
    cache = AnthropicCache(1024, lookback)
    cache.request(make_prompt("m", blocks[:15], (Breakpoint(14),), 0.0))
    spent = cache.request(make_prompt("m", blocks[:35], (Breakpoint(34),), 10.0))
    assert (spent.read == 1500) is hit


def test_the_minimum_is_the_familys():
    blocks = _blocks(8)
    for minimum, written in ((1024, 0), (512, 600)):
        cache = AnthropicCache(minimum)
        assert cache.request(make_prompt("m", blocks[:6], (Breakpoint(5),))).written == written


def test_gpt_5_6_reads_the_whole_shared_prefix_and_bills_every_other_token_a_write():
    steps, whole = OpenAICache(), OpenAICache(minimum=1024, step=1)
    first, second = _blocks(13), _blocks(20)
    for cache in (steps, whole):
        cache.request(make_prompt("m", first))
    assert steps.request(make_prompt("m", second, time=1.0)) == 1280
    assert whole.request(make_prompt("m", second, time=1.0)) == 1300
    line = Line(FAMILY["gpt_5_6"], "").cache()
    line.cost(make_prompt("m", first))
    cost, read = line.cost(make_prompt("m", second, time=1.0))
    assert read == 1300 and cost == pytest.approx(0.1 * 1300 + 1.25 * 700)
    gpt_5 = Line(FAMILY["gpt_5"], "").cache()
    gpt_5.cost(make_prompt("m", first))
    assert gpt_5.cost(make_prompt("m", second, time=1.0)) == (pytest.approx(128 + 720), 1280)


def test_anthropic_families_bill_at_their_own_prices():
    blocks = _blocks(12)
    for name, read in (("sonnet", 0.1), ("opus_5_5", 0.05), ("fable_5_1", 0.025)):
        for reading in ("strict", "lenient"):
            line = Line(FAMILY[name], reading).cache()
            assert line.cost(make_prompt("m", blocks[:11], (Breakpoint(10),)))[0] == 1.25 * 1100
            cost, got = line.cost(make_prompt("m", blocks, (Breakpoint(11),), 5.0))
            assert got == 1100 and cost == pytest.approx(read * 1100 + 1.25 * 100)


def test_obsmask_s_table_gives_each_family_s_model_the_replay_s_terms():
    """The replay's prices are written apart from obsmask's table; the
    table must bill each family's model under the same terms."""
    agreement = table_agreement()
    assert set(agreement) == {f.name for f in FAMILIES if f.model is not None}
    for name, row in agreement.items():
        assert row["known"] and row["same_terms"], (name, row)


def test_a_family_filter_keeps_the_order_and_refuses_unknown_names():
    assert [f.name for f in choose_families(("gpt_5", "sonnet"))] == ["sonnet", "gpt_5"]
    with pytest.raises(ValueError, match="unknown"):
        choose_families(("claude-9",))


def _forwarded(session: Session, policy, model: str | None, requests: int) -> list[bytes]:
    client = ClientRequests(session, model)
    masker = Masker(policy)
    out = []
    for end in session.request_ends[:requests]:
        sent = client.request(end)
        outcome = masker.mask(sent.body, session.fmt)
        body = outcome.body if isinstance(outcome, Masked) else sent.body
        document = json.loads(body)
        document.pop("model", None)
        out.append(json.dumps(document))
    return out


def test_runs_that_share_a_key_forward_the_same_bodies():
    """What lets the replay share runs between families: a policy without a
    cache forwards the same bodies whatever the model; the shipped one
    forwards the same under two models its table gives the same row
    (gpt-5.6 and gpt-5.7) and shares nothing for a model the table does
    not know; frontier_breakpoint changes nothing in Chat Completions."""
    session = synthetic_session(0)
    policies = _policies()
    spec, shipped = policies["spec"], policies["recommended"]
    keys = {f.name: run_key("recommended", shipped, session.fmt, f, None) for f in FAMILIES}
    assert len(set(keys.values())) == len(keys), "every family its own run"
    assert run_key("r", shipped, session.fmt, replace(FAMILY["gpt_5_6"], model="gpt-5.7"),
                   None) == keys["gpt_5_6"]
    assert run_key("x", shipped, session.fmt, FAMILY["gpt_5"], None) == run_key(
        "y", replace(shipped, frontier_breakpoint=False), session.fmt, FAMILY["gpt_5"], None)
    assert run_key("spec", spec, session.fmt, FAMILY["gpt_5"], None) == run_key(
        "spec", spec, session.fmt, FAMILY["gpt_4o"], None)
    requests = 45
    assert _forwarded(session, spec, "gpt-5", requests) == _forwarded(
        session, spec, "gpt-4o", requests)
    assert _forwarded(session, shipped, "gpt-5.7", requests) == _forwarded(
        session, shipped, "gpt-5.6", requests)
    assert _forwarded(session, shipped, "gpt-5", requests) == _forwarded(
        session, replace(shipped, frontier_breakpoint=False), "gpt-5", requests)


@functools.cache
def _claude_code_session() -> Session:
    real = load_real_sessions(REPO / "fixtures/sessions", ("anthropic",))
    return claude_code_session(real[0], 0)


def test_claude_code_sends_twelve_tools_and_its_reminders_as_system_messages():
    tools = claude_code_tools()
    assert len(tools) == 12
    assert 44_000 < len(json.dumps(tools, separators=(",", ":"))) < 52_000
    session = _claude_code_session()
    reminders = [m for m in session.messages if m["role"] == "system"]
    assert reminders and all(
        m["content"][0]["text"].startswith("<system-reminder>") for m in reminders)
    client = ClientRequests(session, "claude-opus-5-5")
    ends = [end for end in session.request_ends if session.messages[end - 1]["role"] == "system"]
    assert ends
    body = json.loads(client.request(ends[0]).body)
    assert body["model"] == "claude-opus-5-5"
    assert body["messages"][-1]["role"] == "system"
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_the_shipped_settings_mask_a_claude_code_body_with_system_messages():
    """Requests that end with a reminder (its moving breakpoint on it) are
    masked, the reminders go as they came, and the client's breakpoints
    stay where it put them."""
    session = _claude_code_session()
    masker = Masker(_policies()["recommended"])
    client = ClientRequests(session, "claude-sonnet-4-5")
    masked_on_reminder = 0
    for end in session.request_ends[:60]:
        sent = client.request(end)
        outcome = masker.mask(sent.body, ANTHROPIC)
        assert type(outcome).__name__ in ("Masked", "Unchanged"), outcome
        if not isinstance(outcome, Masked):
            continue
        before, after = json.loads(sent.body), json.loads(outcome.body)
        assert len(before["messages"]) == len(after["messages"])
        for old, new in zip(before["messages"], after["messages"], strict=True):
            if old["role"] == "system":
                assert new == old
        last = after["messages"][-1]
        if last["role"] == "system":
            masked_on_reminder += 1
            assert last["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert masked_on_reminder > 0


@functools.cache
def quick_benchmark() -> dict:
    """bench_cache.py --quick --json, run once for the tests that read it."""
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_cache.py"), "--quick", "--json",
         "--jobs", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.figures
def test_a_quick_run_reports_every_family_and_reading_and_checks_their_targets():
    report = quick_benchmark()
    assert set(report["families"]) == set(LINE_NAMES)
    for name in ("sonnet", "opus_5_5", "fable_5_1"):
        assert {f"{name}/strict", f"{name}/lenient"} <= set(report["families"])
    for line in report["families"].values():
        assert line["sessions"] > 0 and line["worst_prefix"] is not None
        assert line["over_1_03"] == len(line["over_1_03_sessions"])
    kinds = {s["kind"] for s in report["sessions"]}
    assert {"real", "claude_code", "synthetic"} <= kinds
    for session in report["sessions"]:
        lines = set(session["lines"])
        if session["format"] == "anthropic":
            assert lines == {n for n in LINE_NAMES if n.split("/")[0] in
                             ("sonnet", "opus_5_5", "fable_5_1")}
        else:
            assert lines == {"gpt_5", "gpt_4o", "gpt_5_6", "no_cache"}
    targets = report["targets"]
    so_far = targets["recommended_bill_so_far_at_most_1.03x_from_request_8"]
    assert set(so_far["lines"]) == set(LINE_NAMES) - {"no_cache"}
    means = report["information_checks"]["recommended_real_mean_at_most_0.80x_under_0.1x_reads"]
    assert set(means["lines"]) == {"sonnet/strict", "sonnet/lenient", "gpt_5"}
    # The verdicts are the figures': a check that can fail.
    for target in (so_far, means):
        for check in target["lines"].values():
            assert check["pass"] == (check["value"] <= target["threshold"])
        assert target["pass"] == all(c["pass"] for c in target["lines"].values())
    # The mean with prices per model is held to the mean with one price per
    # provider, as before, measured in the same run, on each line where
    # that one kept the bill so far within 1.03x.
    before = targets["recommended_real_mean_not_above_one_price"]
    assert set(before["lines"]) == set(LINE_NAMES) - {"no_cache", "gpt_5_6"}
    for check in before["lines"].values():
        if check["pass"] is not None:
            assert check["pass"] == (check["value"] <= check["threshold"] + 1e-9)
    assert targets["all_pass"] == all(
        t["pass"] for name, t in targets.items() if name != "all_pass")
    assert targets["no_protocol_errors_in_any_policy"]["pass"], targets
