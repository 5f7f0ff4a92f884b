"""Prices and cache rules per model (``conversation/billing/model_table.py``
and the table shipped beside it): which row a request's model is billed
under, what an unknown model gets, and the rows a user adds."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.billing.model_table import (
    ModelTable,
    parse_setting_row,
    rows_from_toml,
    shipped_rows,
)
from obsmask_core.conversation.billing.request_price import price_for_request
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.shared.errors import SettingError


@pytest.mark.parametrize("model, row, read, minimum", [
    ("claude-fable-5-1", "claude-fable-5", 25, 512),
    ("claude-fable-5-2-20261015", "claude-fable-5", 25, 512),
    ("claude-mythos-5-1", "claude-fable-5", 25, 512),
    ("claude-opus-5-5", "claude-opus-5-5", 50, 512),
    ("claude-opus-5", "claude-opus-5", 100, 512),
    ("claude-sonnet-5", "claude-sonnet-5", 100, 1024),
    ("claude-opus-4-8[1m]", "claude-opus-4-8", 100, 1024),
    ("claude-opus-4-7", "claude-opus-4-7", 100, 2048),
    ("claude-opus-4-5-20251101", "claude-opus-4-5", 100, 4096),
    ("claude-opus-4-6", "claude-opus-4-5", 100, 4096),
    ("claude-haiku-4-5", "claude-haiku-4-5", 100, 4096),
    ("claude-3-5-haiku-latest", "claude-haiku-3", 100, 2048),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4", 100, 1024),
    ("claude-opus-4-1", "claude-sonnet-4", 100, 1024),
    ("us.anthropic.claude-opus-5-5-v1:0", "claude-opus-5-5", 50, 512),
])
def test_an_anthropic_model_is_billed_under_its_familys_row(model, row, read, minimum):
    choice = ModelTable.shipped().choose("anthropic", model)
    assert choice.known
    assert (choice.row.name, choice.row.read, choice.row.minimum) == (row, read, minimum)
    assert (choice.row.write, choice.row.write_1h) == (1250, 2000)


@pytest.mark.parametrize("model, row, read, write, step", [
    ("gpt-5.6", "gpt-5.6", 100, 1250, 1),
    ("gpt-5.7-mini", "gpt-5.6", 100, 1250, 1),
    ("gpt-5.12", "gpt-5.6", 100, 1250, 1),
    ("gpt-6", "gpt-5.6", 100, 1250, 1),
    ("gpt-5.1", "gpt-5", 100, 1000, 128),
    ("gpt-5.1-codex-mini", "gpt-5", 100, 1000, 128),
    ("gpt-5.5", "gpt-5", 100, 1000, 128),
    ("gpt-5-codex", "gpt-5", 100, 1000, 128),
    ("gpt-4.1-2025-04-14", "gpt-4.1", 250, 1000, 128),
    ("o3", "gpt-4.1", 250, 1000, 128),
    ("o3-mini", "gpt-4o", 500, 1000, 128),
    ("GPT-4o-2024-08-06", "gpt-4o", 500, 1000, 128),
])
def test_an_openai_model_is_billed_under_its_familys_row(model, row, read, write, step):
    choice = ModelTable.shipped().choose("openai", model)
    price = choice.row.price_model()
    assert (choice.row.name, price.read, price.uncached, price.cache_step) \
        == (row, read, write, step)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("model", ["deepseek-chat", "claude-future-9", "", None, 42])
def test_a_model_no_row_knows_gets_its_providers_most_cautious_terms(provider, model):
    table = ModelTable.shipped()
    choice = table.choose(provider, model)
    own = [row for row in table.rows if row.provider == provider]
    assert not choice.known
    assert choice.row.read == min(row.read for row in own)
    assert choice.row.write == max(row.write for row in own)
    assert choice.row.write_1h == max(row.write_1h for row in own)
    assert choice.row.minimum == min(row.minimum for row in own)
    assert choice.row.provider == provider


def test_every_shipped_row_says_where_its_figures_come_from_and_when():
    for row in shipped_rows():
        assert row.source and row.checked, row.name
        assert row.read < row.write or row.write == 1000, row.name


def test_a_users_row_wins_over_the_shipped_one():
    policy = MaskPolicy(price_model="auto", model_prices=(
        ("claude-sonnet-4-5*", "claude-fable-5"),
        ("house-model", "cache=anthropic_breakpoints read=0.05 write=1.5 minimum=2048"),
    ))
    assert policy.models.choose("anthropic", "claude-sonnet-4-5").row.read == 25
    house = policy.models.choose("anthropic", "house-model").row
    assert (house.read, house.write, house.write_1h, house.minimum) == (50, 1500, 1500, 2048)
    assert policy.models.choose("anthropic", "claude-sonnet-4").row.name == "claude-sonnet-4"


@pytest.mark.parametrize("terms, says", [
    ("no-such-row", "no shipped row"),
    ("cache=openai_prefix read=0.1 minimum=1024", "needs write"),
    ("cache=lru read=0.1 write=1 minimum=1", "cache must be one of"),
    ("cache=openai_prefix read=0.1 write=1 minimum=1 colour=red", "unknown term"),
    ("cache=openai_prefix read=-1 write=1 minimum=1", "read must be a number"),
    ("cache=openai_prefix provider=anthropic read=0.1 write=1 minimum=1", "is openai's"),
    ("read", "no shipped row"),
    ("read=", "is not key=value"),
    ("cache=openai_prefix read=nan write=1 minimum=1", "read must be a number"),
    ("cache=openai_prefix read=0.1 write=inf minimum=1", "write must be a number"),
])
def test_a_wrong_row_in_the_settings_is_refused_with_its_reason(terms, says):
    with pytest.raises(SettingError, match=says):
        MaskPolicy(price_model="auto", model_prices=(("m", terms),))


def test_a_table_file_without_rows_or_with_a_nameless_row_is_refused():
    with pytest.raises(SettingError, match="no \\[\\[model\\]\\] rows"):
        rows_from_toml("x = 1", "t.toml")
    with pytest.raises(SettingError, match="needs a name"):
        rows_from_toml("[[model]]\nread = 0.1", "t.toml")


def test_auto_prices_a_request_by_its_model_and_a_named_model_keeps_its_prices():
    table = ModelTable.shipped()
    fable = price_for_request("auto", table, anthropic=True, model="claude-fable-5-1")
    assert fable is not None and (fable.model.read, fable.minimum_tokens) == (25, 512)
    fixed = price_for_request("anthropic", table, anthropic=True, model="claude-fable-5-1")
    assert fixed is not None and (fixed.model.read, fixed.minimum_tokens) == (100, 512)
    unknown = price_for_request("anthropic", table, anthropic=True, model="house")
    assert unknown is not None and unknown.minimum_tokens == 1024
    assert price_for_request("none", table, anthropic=True, model="claude-fable-5-1") is None
    metadata = fable.as_metadata()
    assert (metadata["row"], metadata["model"], metadata["known"]) \
        == ("claude-fable-5", "claude-fable-5-1", True)


def test_a_setting_row_that_names_a_shipped_row_copies_its_terms():
    shipped = shipped_rows()
    row = parse_setting_row("mine-*", "gpt-5.6", shipped)
    original = next(r for r in shipped if r.name == "gpt-5.6")
    assert (row.read, row.write, row.minimum, row.cache) \
        == (original.read, original.write, original.minimum, original.cache)
    assert row.matches("MINE-1") and not row.matches("yours")


def test_a_long_or_unprintable_model_name_is_cut_and_cleaned_before_it_is_kept():
    table = ModelTable.shipped()
    choice = table.choose("openai", "gpt-5.6" + "x" * 10_000)
    assert choice.known and choice.model is not None and len(choice.model) == 200
    odd = table.choose("openai", "house\nmodel\x00")
    assert odd.model == "house?model?" and not odd.known


def test_a_named_price_model_bills_at_its_own_terms_and_is_never_the_cautious_row():
    table = ModelTable.shipped()
    fixed = price_for_request("anthropic", table, anthropic=True, model="house-model")
    assert fixed is not None and not fixed.cautious
    metadata = fixed.as_metadata()
    assert (metadata["row"], metadata["table_row"], metadata["read"], metadata["minimum"]) \
        == ("anthropic", "anthropic-unknown", 0.1, 1024)
    auto = price_for_request("auto", table, anthropic=True, model="house-model")
    assert auto is not None and auto.cautious and auto.as_metadata()["read"] == 0.025
