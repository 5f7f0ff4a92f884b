"""Reading flow files (``offline/recorded_requests.py`` over
``mitm/recorded_flows.py``): every HTTP request, numbered among the HTTP
flows, as the client sent it, the flow's backup when obsmask masked it;
what obsmask left in the flow's metadata; and one line for a file that
holds no flows."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from mitmproxy.test import tflow

from benchlib.errors import BenchError
from obsmask_core.mitm.recorded_flows import FlowFile
from obsmask_core.offline.recorded_requests import post_bodies, recorded_requests
from support.flow_files import post_flow, with_unreadable_backup, write_flows

ORIGINAL = b'{"messages": [{"role": "tool", "content": "a long tool result"}]}'
MASKED = b'{"messages": [{"role": "tool", "content": "[masked]"}]}'


def test_a_masked_flow_is_read_from_its_backup_as_the_client_sent_it(tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED,
                  metadata={"action": "masked", "provider_usage": {"input_tokens": 12}}),
    ])
    [request] = recorded_requests(path)
    assert request.body == ORIGINAL and request.from_backup
    assert request.obsmask == {"action": "masked", "provider_usage": {"input_tokens": 12}}
    assert list(post_bodies(path)) == [("/v1/chat/completions", ORIGINAL)]


def test_a_flow_without_a_backup_is_read_as_it_went_out(tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/chat/completions?key=secret", MASKED, host="api.openai.com"),
        post_flow("/v1/models", b"", method="GET"),
    ])
    first, second = recorded_requests(path)
    assert (first.number, first.method, first.path, first.host) == (
        1, "POST", "/v1/chat/completions", "api.openai.com")
    assert first.body == MASKED and not first.from_backup and first.obsmask == {}
    assert (second.number, second.method) == (2, "GET")
    assert list(post_bodies(path)) == [("/v1/chat/completions", MASKED)]


def test_a_masked_flow_whose_backup_is_missing_or_unreadable_is_said_to_have_lost_its_original(
        tmp_path):
    """Its body is then the masked one: no reader may take it for the client's."""
    masked = {"action": "masked"}
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/chat/completions", MASKED, metadata=masked),
        with_unreadable_backup(post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED,
                                         metadata=masked)),
        post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED, metadata=masked),
        post_flow("/v1/chat/completions", ORIGINAL, metadata={"action": "unchanged"}),
        post_flow("/v1/chat/completions", ORIGINAL),
    ])
    requests = list(recorded_requests(path))
    assert [r.original_lost for r in requests] == [True, True, False, False, False]
    assert [r.body for r in requests[:3]] == [MASKED, MASKED, ORIGINAL]


def test_what_obsmask_recorded_is_read_as_absent_when_it_is_no_mapping(tmp_path):
    flow = post_flow("/v1/chat/completions", ORIGINAL)
    flow.metadata["obsmask"] = ["masked"]
    [request] = recorded_requests(write_flows(tmp_path / "flows.mitm", [flow]))
    assert request.obsmask == {} and not request.original_lost


def test_a_compressed_original_is_decoded(tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/messages", ORIGINAL, masked=MASKED, gzipped=True)])
    [request] = recorded_requests(path)
    assert request.body == ORIGINAL and request.from_backup


def test_the_backup_is_read_again_on_every_read(tmp_path):
    """Reading the backup does not consume it: the file reads the same twice."""
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/responses", ORIGINAL, masked=MASKED)])
    assert list(post_bodies(path)) == list(post_bodies(path)) == [("/v1/responses", ORIGINAL)]


def test_the_client_body_is_the_backups_or_else_the_flows_own(tmp_path):
    """The one reader of flow files (the report's too) gives the body the
    client sent beside the one that went out: the backup's when obsmask
    masked the flow, else the flow's own."""
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED, gzipped=True),
        post_flow("/v1/chat/completions", ORIGINAL),
    ])
    masked, unmasked = FlowFile(path).http_flows()
    assert (masked.client_body, masked.sent_body, masked.from_backup) == (ORIGINAL, MASKED, True)
    assert (unmasked.client_body, unmasked.sent_body, unmasked.from_backup) == (
        ORIGINAL, ORIGINAL, False)


@pytest.mark.parametrize("content", [b'{"messages": []}', b"\x00\x01 not flows"])
def test_a_file_of_no_flows_is_refused_with_one_line(tmp_path, content):
    path = tmp_path / "session.mitm"
    path.write_bytes(gzip.compress(content) if content.startswith(b"\x00") else content)
    with pytest.raises(BenchError, match=r"session\.mitm: not a mitmproxy flow file"):
        list(recorded_requests(path))


def test_a_missing_file_is_refused_with_one_line(tmp_path):
    with pytest.raises(BenchError, match=r"missing\.mitm: cannot be read"):
        list(recorded_requests(Path(tmp_path / "missing.mitm")))


def test_requests_are_numbered_among_the_http_flows_only(tmp_path):
    """A file may hold TCP or UDP flows between the HTTP ones: measure
    numbers the HTTP requests it reads (the report numbers every flow)."""
    path = write_flows(tmp_path / "mixed.mitm", [
        tflow.ttcpflow(), post_flow("/v1/chat/completions", ORIGINAL), tflow.tudpflow(),
        post_flow("/v1/responses", ORIGINAL)])
    assert [(r.number, r.path) for r in recorded_requests(path)] == [
        (1, "/v1/chat/completions"), (2, "/v1/responses")]
