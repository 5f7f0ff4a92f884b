"""The page's headline (``offline/report/headline.py``): per conversation,
the bill with obsmask over the bill without, along the session, estimated
and from the provider's own counts; checked against numbers worked out here
by hand."""

from __future__ import annotations

import pytest

from obsmask_core.offline.report.bills import ConversationBill, ModelBill
from obsmask_core.offline.report.headline import (
    headline_model,
    provider_cost,
    saving,
    saving_figure,
    saving_line,
)
from obsmask_core.offline.report.request_numbers import ProviderFigures, RequestNumbers


def numbers(number: int, provider: ProviderFigures | None,
            tokens_sent: int | None = None) -> RequestNumbers:
    return RequestNumbers(number, number, "masked", "", None, tokens_sent, provider, None, None,
                          None, None, None, None, None)


def bill(without: tuple[float, ...], with_masking: tuple[float, ...]) -> ConversationBill:
    models = tuple(ModelBill(name, name, without, with_masking)
                   for name in ("anthropic", "openai", "openai_50", "none"))
    return ConversationBill(tuple(range(1, len(without) + 1)), models, ())


def test_auto_headlines_anthropics_prices_for_messages_and_openais_for_the_others():
    assert headline_model("auto", anthropic=True) == "anthropic"
    assert headline_model("auto", anthropic=False) == "openai"
    assert headline_model("none", anthropic=True) == "none"


def test_the_providers_counts_are_priced_as_the_replay_prices_its_own():
    # Anthropic: 100 plain + 900 read + 200 written = a prompt of 1,200;
    # 900 read at 0.1, 200 written at 1.25, the other 100 at the base price.
    figures = ProviderFigures(100, 900, 200, cache_outside_input=True)
    assert provider_cost(figures, "anthropic") == pytest.approx(900 * 0.1 + 200 * 1.25 + 100)
    assert provider_cost(figures, "none") == 1200
    # OpenAI: the input holds the cached tokens; the rest at 1.0.
    openai = ProviderFigures(1000, 600, None, cache_outside_input=False)
    assert provider_cost(openai, "openai") == pytest.approx(600 * 0.1 + 400)


def test_the_line_and_plot_give_the_final_ratio_and_the_providers_beside_it():
    # Without: 1000, then 1000 more; with obsmask: 1000, then 500 more.
    conversation = bill((1000.0, 2000.0), (1000.0, 1500.0))
    # Request 2 went out as 500 tokens by the replay's count; the provider
    # counted 400 of its own: 0.8 of its tokens to one of the replay's.
    reported = [numbers(1, None, 700),
                numbers(2, ProviderFigures(400, 0, None, cache_outside_input=False), 500)]
    s = saving("c1-chat", "Conversation 1", conversation, reported, "auto", anthropic=False)
    assert s.model == "openai"
    assert s.estimate == (1.0, 0.75)
    # Only request 2 has counts: 400 uncached at 1.0 over its 1,000 without,
    # in the provider's tokens 800.
    assert s.provider_scale == pytest.approx(0.8)
    assert s.provider == (None, pytest.approx(0.5))
    line = saving_line(s)
    assert line.startswith("Conversation 1: with obsmask the bill is 0.750× the bill without "
                           "(-25.0%; 500 input tokens at the base price saved)")
    assert ("from the provider's own counts (1 request(s); tool definitions, system and "
            "messages on both sides; 0.80 of its tokens to one of the replay's): 0.500×") in line
    figure = saving_figure(s)
    assert [series.name for series in figure.plot.series] == [
        "estimate (replay)", "provider's counts"]
    assert figure.table.rows[-1][1].value == 0.75  # type: ignore[union-attr]


def test_without_the_providers_figures_the_line_says_so_and_draws_the_estimate_alone():
    s = saving("c", "C", bill((10.0, 30.0), (10.0, 33.0)), [numbers(1, None), numbers(2, None)],
               "anthropic", anthropic=True)
    assert saving_line(s).endswith("the flows hold no usage figures of the provider.")
    assert "1.100×" in saving_line(s) and "+10.0%" in saving_line(s)
    assert len(saving_figure(s).plot.series) == 1
