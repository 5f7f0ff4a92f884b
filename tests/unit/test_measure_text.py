"""The text report of measure.py (``scripts/benchlib/measure/text.py``): the
bill first (the price model obsmask's decisions used marked), the tokens
second, a sentence when obsmask costs more than it saves, the provider's
own figures next to the estimate when the flows have them, and how it was
all estimated."""

from __future__ import annotations

import json

from benchlib.measure.run import measure
from benchlib.measure.text import text_report
from benchlib.proxy_settings import settings_in_force
from support.chat import conversation
from support.flow_files import post_flow, write_flows
from support.processes import REPO

FLOWS = REPO / "fixtures" / "flows" / "chat_session.mitm"


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


def test_a_bill_above_the_one_without_obsmask_is_said_in_words(toml_file):
    text = _report(toml_file, "obsmask_window_turns=1")
    assert ("With these settings obsmask costs more than it saves under "
            "anthropic_breakpoints:") in text
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
