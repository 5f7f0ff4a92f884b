"""The text report of measure.py (``scripts/benchlib/measure/text.py``): the
bill first (the price model obsmask's decisions used marked), the tokens
second, a sentence when obsmask costs more than it saves, the provider's
own figures next to the estimate when the flows have them, and how it was
all estimated."""

from __future__ import annotations

import json

import pytest

from obsmask_core.offline.measure.document import json_document
from obsmask_core.offline.measure.run import measure
from obsmask_core.offline.measure.text import HOW, text_report
from obsmask_core.offline.proxy_settings import settings_in_force
from support.chat import conversation
from support.flow_files import post_flow, write_flows
from support.processes import REPO

FLOWS = REPO / "fixtures" / "flows" / "chat_session.mitm"
# The three saved sessions: only the chat one's first user message falls in
# the lowest 70 buckets (66; anthropic 88, responses 81).
SESSIONS = tuple(REPO / "fixtures" / "flows" / f"{name}_session.mitm"
                 for name in ("chat", "anthropic", "responses"))


def _report(toml_file, *options: str, paths=(FLOWS,), per_request: bool = False) -> str:
    settings = settings_in_force(list(options), toml_file(""))
    return text_report(measure(list(paths), settings), per_request=per_request)


def test_the_bill_comes_first_and_the_tokens_second(toml_file):
    text = _report(toml_file, "obsmask_window_turns=2", "obsmask_price_model=openai")
    assert text.startswith("obsmask measure: the bill of these sessions without and with "
                           "obsmask, estimated by a replay (not your provider's bill)")
    assert (text.index("The bill, in input tokens at the base input price")
            < text.index("Per conversation:") < text.index("input tokens sent:")
            < text.index("Price models") < text.index("How: "))
    assert "\n  openai *  " in text and "\n  anthropic *" not in text
    assert 'obsmask\'s decisions used price_model = "openai"' in text
    assert "The provider's own figures" not in text  # these flows have none


def test_auto_marks_the_models_of_both_providers(toml_file):
    """price_model "auto" decides each request under its provider's model:
    Anthropic's for Anthropic requests, OpenAI's for the others."""
    text = _report(toml_file, "obsmask_window_turns=2", "obsmask_price_model=auto")
    assert "\n  openai *  " in text and "\n  anthropic *  " in text
    assert "\n  openai_50 *" not in text


def test_a_bill_above_the_one_without_obsmask_is_said_in_words(toml_file):
    text = _report(toml_file, "obsmask_window_turns=2")
    assert ("With these settings obsmask costs more than it saves under "
            "openai, anthropic_prefix:") in text
    off = _report(toml_file, "obsmask_enabled=false")
    assert "costs more than it saves" not in off
    assert "Masking is off: the bill with obsmask is the bill without it." in off


def test_the_providers_figures_sit_next_to_the_estimate(toml_file, tmp_path):
    messages = conversation(3)
    ends = [n for n, m in enumerate(messages) if m["role"] == "assistant"] + [len(messages)]
    flows = [post_flow("/v1/chat/completions", json.dumps({"messages": messages[:end]}).encode(),
                       metadata={"action": "unchanged",
                                 "provider_usage": {"input_tokens": 1000 + n,
                                                    "cached_input_tokens": 0}})
             for n, end in enumerate(ends)]
    path = write_flows(tmp_path / "flows.mitm", flows)
    text = _report(toml_file, paths=(path,), per_request=True)
    assert "4 requests report usage, 4 of them found in the replay; 0 were masked" in text
    assert "    provider                            4,006                0              -" in text
    assert "    request by request (" in text and "1,003 / 0 / -" in text
    assert "    request by request (" not in _report(toml_file, paths=(path,))


def test_how_says_anthropic_bills_as_a_cache_write_the_tokens_up_to_the_last_breakpoint():
    """Not "every other token", which reads as every second one."""
    assert "every other" not in HOW
    assert ("bills the tokens from there to the request's last breakpoint as a cache write"
            in HOW)


def test_held_out_conversations_are_named_and_counted_in_the_headline_beside_the_others_bill(
        toml_file):
    settings = settings_in_force(["obsmask_window_turns=2", "obsmask_holdout_percent=70"],
                                 toml_file(""))
    measurement = measure(list(SESSIONS), settings)
    text = text_report(measurement)
    assert ("The bill, in input tokens at the base input price: 3 conversations, 1 of them "
            "held out, ") in text
    assert ("  1 of the 3 conversations is held out (holdout_percent = 70: the proxy leaves "
            "held-out conversations unmasked, so their bill with obsmask is their bill without "
            "it); it is in the total above") in text
    assert "The 2 conversations not held out, alone:" in text
    held = [line for line in text.splitlines() if "; held out (holdout_percent)" in line]
    assert len(held) == 1 and ": chat, " in held[0]
    # Kept in the total, as the proxy bills them; the others' bill beside it.
    total = measurement.total
    [chat] = [f for f in measurement.conversations if f.held_out]
    assert all(bill.with_obsmask == bill.without for bill in chat.bills.values())
    for name, bill in total.bills.items():
        others = total.not_held_out_bills[name]
        assert bill.without == pytest.approx(others.without + chat.bills[name].without)
    document = json_document(measurement)
    assert [c["held_out"] for c in document["conversations"]] == [True, False, False]
    assert document["total"]["held_out_conversations"] == 1
    assert document["total"]["not_held_out"]["conversations"] == 2


def test_with_every_conversation_held_out_the_headline_says_the_bills_tell_nothing_of_masking(
        toml_file):
    text = _report(toml_file, "obsmask_holdout_percent=100")
    assert "1 conversation, 1 of them held out" in text
    assert "  Every conversation is held out (holdout_percent = 100: " in text
    assert "lower holdout_percent to measure it" in text
    assert "not held out, alone" not in text
    unheld = _report(toml_file, "obsmask_window_turns=2")
    assert "held out" not in unheld
