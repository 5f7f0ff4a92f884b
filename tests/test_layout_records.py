"""The records obsmask writes into a flow's metadata have their keys declared
once (``obsmask_core/shared/request_record.py``): no other module of the
package spells one where it reads or writes a record, and the value objects
that write them name their fields by those keys."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path

from obsmask_core.conversation.billing.ledger import BillSoFar
from obsmask_core.conversation.billing.model_table import ModelTable, shipped_rows
from obsmask_core.conversation.billing.request_price import price_for_request
from obsmask_core.conversation.masking.summary import LeftAlone, MaskSummary
from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from obsmask_core.mcp.summary import McpSummary
from obsmask_core.shared.request_record import (
    CONVERSATION_RECORD,
    MCP_RECORD,
    RECALL_RECORD,
    Action,
    BillKey,
    BrakeKey,
    Key,
    McpKey,
    PredictedKey,
    RowKey,
    UsageKey,
    declared,
)

PACKAGE = Path(__file__).resolve().parents[1] / "addons" / "obsmask_core"
RECORD_MODULE = PACKAGE / "shared" / "request_record.py"
# The keys nested under a record's key, but those that are also the words
# of something else the package reads by key: the provider's usage fields
# (``ProviderUsage`` keeps the wire's names), a model table row's terms in
# mitm.toml, a request body's "model", the settings' names.
OTHER_WORDS = frozenset({
    "input_tokens", "cached_input_tokens", "cache_creation_input_tokens", "output_tokens",
    "cache_write_tokens", "cache_miss_reason", "cache", "provider", "minimum", "read",
    "write", "write_1h", "model", "request", "requests", "price_model", "allowance_percent"})
NESTED_KEYS = (declared(BillKey) | declared(PredictedKey) | declared(RowKey)
               | declared(UsageKey) | declared(BrakeKey))
RECORD_KEYS = declared(Key) | declared(McpKey) | (NESTED_KEYS - OTHER_WORDS)
# The records' places: "obsmask" is the program's name too, so a place is
# only looked for where a mapping is read or written by key.
RECORD_PLACES = frozenset({CONVERSATION_RECORD, MCP_RECORD, RECALL_RECORD})


def _keyed_strings(tree: ast.AST) -> Iterator[tuple[ast.Constant, bool]]:
    """The string constants where code reads or writes a mapping by key
    (True: a subscript, ``.get``/``.setdefault``/``.pop``, an ``in`` test),
    or passes one to a call (False: helpers such as ``count(facts, "key")``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            found: list[tuple[ast.expr, bool]] = [(node.slice, True)]
        elif isinstance(node, ast.Call):
            by_key = isinstance(node.func, ast.Attribute) and node.func.attr in (
                "get", "setdefault", "pop")
            found = [(argument, by_key and at == 0) for at, argument in enumerate(node.args)]
        elif isinstance(node, ast.Compare) and any(
                isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            found = [(node.left, True)]
        else:
            continue
        yield from ((c, by_key) for c, by_key in found
                    if isinstance(c, ast.Constant) and isinstance(c.value, str))


def spelled_keys(source: str) -> list[tuple[int, str]]:
    """Where ``source`` spells a record key or place (line, key)."""
    return sorted((c.lineno, c.value) for c, by_key in _keyed_strings(ast.parse(source))
                  if c.value in RECORD_KEYS or (by_key and c.value in RECORD_PLACES))


def test_no_module_but_the_records_own_spells_a_record_key() -> None:
    spelled = [f"{path.relative_to(PACKAGE)}:{line}: {key!r}"
               for path in sorted(PACKAGE.rglob("*.py")) if path != RECORD_MODULE
               for line, key in spelled_keys(path.read_text(encoding="utf-8"))]
    assert spelled == [], "record keys spelled outside shared/request_record.py:\n" + "\n".join(
        spelled)


def test_the_check_finds_a_key_read_by_its_spelling() -> None:
    source = ('def saved(facts):\n'
              '    return count(facts, "masked_tokens_before") - facts.get("masked_tokens_after")\n'
              'def masked(metadata):\n'
              '    return "bill" in metadata["obsmask"]\n')
    assert spelled_keys(source) == [(2, "masked_tokens_after"), (2, "masked_tokens_before"),
                                    (4, "bill"), (4, "obsmask")]
    assert spelled_keys("def f(facts):\n    return facts.get(Key.BILL)\n") == []


def test_the_writers_fields_are_the_declared_keys() -> None:
    """A masked request's record and one left alone are written field by
    field (``as_metadata``): each field is a key of the record, and so is the
    action they add."""
    for record in (MaskSummary, LeftAlone):
        names = {field.name for field in dataclasses.fields(record)}
        assert names <= declared(Key), f"{record.__name__}: {sorted(names - declared(Key))}"
    assert {Action.MASKED, Action.UNCHANGED, Action.PASSED_THROUGH} == declared(Action)


def test_an_mcp_answers_record_is_written_with_the_declared_keys() -> None:
    summary = McpSummary("http", tokens_estimated=True, recall_ids={"r1": None})
    assert set(summary.as_metadata()) <= declared(McpKey)
    assert summary.as_metadata()[McpKey.ACTION] == "truncated"


def test_the_nested_values_are_written_with_the_declared_keys() -> None:
    """The ledger's bill, its prediction and model row, and the provider's
    usage are written with the keys declared for them."""
    price = price_for_request("auto", ModelTable(shipped_rows()), anthropic=True,
                              model="claude-sonnet-4-5")
    assert price is not None
    bill = BillSoFar("auto", 3, 900.0, 1000.0, 2, "breakpoints", 1200, 1000, 100,
                     cold_ends=(4,), doubtful_ends=(2,), price_row=price.as_metadata(),
                     moved=True,
                     request_items=9, braked_from=5, history="h",
                     request_with_masking=300.0, request_without_masking=320.0)
    written = bill.as_metadata()
    assert set(written) == declared(BillKey)
    assert set(as_mapping(written[BillKey.PREDICTED])) == declared(PredictedKey)
    assert set(as_mapping(written[BillKey.REQUEST])) <= declared(BillKey)
    assert set(as_mapping(written[BillKey.MODEL_ROW])) == declared(RowKey)
    assert {field.name for field in dataclasses.fields(ProviderUsage)} == declared(UsageKey)


def as_mapping(value: object) -> Mapping[str, object]:
    assert isinstance(value, Mapping), value
    return value
