"""Reading the usage a provider reported in a buffered answer
(``conversation/usage/provider_usage.py``): the input, output and cached input
tokens (``usage.prompt_tokens_details.cached_tokens`` for OpenAI,
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` for
Anthropic), and nothing from a body that is not what it should be.

The bodies (support/usage.py) are written the way the APIs send them."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.usage.provider_usage import ProviderUsage, usage_from_json
from support.usage import ANTHROPIC_JSON, CHAT_JSON, RESPONSES_JSON


def _bytes(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


def test_a_buffered_chat_answer_gives_its_usage():
    assert usage_from_json(_bytes(CHAT_JSON)) == ProviderUsage(
        input_tokens=2006, cached_input_tokens=1920, output_tokens=300
    )


def test_a_buffered_chat_answer_without_details_gives_no_cached_tokens():
    """Older models and compatible servers send no (or a null) details object."""
    body = dict(CHAT_JSON, usage={"prompt_tokens": 9, "completion_tokens": 1,
                                  "total_tokens": 10, "prompt_tokens_details": None})
    assert usage_from_json(_bytes(body)) == ProviderUsage(input_tokens=9, output_tokens=1)


def test_a_buffered_responses_answer_gives_its_usage():
    assert usage_from_json(_bytes(RESPONSES_JSON)) == ProviderUsage(
        input_tokens=5320, cached_input_tokens=4864, output_tokens=12
    )


def test_a_buffered_anthropic_answer_gives_its_usage():
    """Anthropic's input_tokens excludes the cache: kept as reported."""
    usage = usage_from_json(_bytes(ANTHROPIC_JSON))
    assert usage == ProviderUsage(
        input_tokens=12,
        cached_input_tokens=24000,
        cache_creation_input_tokens=1500,
        output_tokens=15,
    )
    assert usage is not None
    assert usage.as_metadata() == {
        "input_tokens": 12,
        "cached_input_tokens": 24000,
        "cache_creation_input_tokens": 1500,
        "output_tokens": 15,
    }


def test_as_metadata_has_only_reported_fields():
    usage = ProviderUsage(input_tokens=0, output_tokens=7)
    assert usage.as_metadata() == {"input_tokens": 0, "output_tokens": 7}
    assert json.loads(json.dumps(usage.as_metadata())) == usage.as_metadata()
    assert ProviderUsage().as_metadata() == {}


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00garbage",
        b"[1, 2, 3]",
        b'"usage"',
        b"null",
        b'{"error": {"type": "overloaded_error", "message": "Overloaded"}}',
        b'{"usage": null}',
        b'{"usage": {}}',
        b'{"usage": [1]}',
        b'{"usage": {"prompt_tokens": "12", "completion_tokens": true}}',
        b'{"usage": {"input_tokens": -1, "output_tokens": 1.5}}',
        b'{"usage": {"input_tokens": 1e400}}',
        b'{"usage": {"input_tokens": ' + b"9" * 5000 + b"}}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"usage": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001,
        b"data: " + _bytes(CHAT_JSON),
    ],
)
def test_buffered_bad_input_gives_none(body):
    assert usage_from_json(body) is None


def test_buffered_keeps_the_valid_fields_only():
    body = b'{"usage": {"input_tokens": 3, "output_tokens": "many", "cache_read_input_tokens": 0}}'
    assert usage_from_json(body) == ProviderUsage(input_tokens=3, cached_input_tokens=0)


def test_openai_cache_writes_are_read_as_cache_creation_tokens():
    """GPT-5.6 and later report their cache writes beside the cached tokens
    (Chat's prompt_tokens_details, Responses' input_tokens_details); the
    input count includes them."""
    chat = usage_from_json(json.dumps({"usage": {
        "prompt_tokens": 2000, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 1500, "cache_write_tokens": 400}}}).encode())
    assert chat == ProviderUsage(2000, 1500, 400, 5)
    responses = usage_from_json(json.dumps({"usage": {
        "input_tokens": 2000, "output_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 2000}}}).encode())
    assert responses == ProviderUsage(2000, 0, 2000, 5)
