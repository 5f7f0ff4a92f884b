"""The flows the report draws (``offline/report/flow_file.py``): each
conversation request with the body the client sent (read from the flow's
backup by ``mitm/recorded_flows.py``, the one reader of flow files, which
measure uses too) beside the body that went out, obsmask's record of it,
and the MCP answers obsmask cut, numbered over every flow of every file,
of any kind."""

from __future__ import annotations

import pytest
from mitmproxy.test import tflow

from benchlib.errors import BenchError
from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT
from obsmask_core.offline.report.flow_file import LostOriginal, read_flow_files
from support.flow_files import post_flow, with_unreadable_backup, write_flows

ORIGINAL = b'{"messages": [{"role": "tool", "content": "a long tool result"}]}'
MASKED = b'{"messages": [{"role": "tool", "content": "[masked]"}]}'


def test_a_masked_flow_gives_the_backups_body_as_the_original_and_the_request_as_sent(
        tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED,
                  metadata={"action": "masked", "window_turns": 2})])
    [request] = read_flow_files([path], Routes()).requests
    assert (request.original, request.sent) == (ORIGINAL, MASKED)
    assert request.fmt is CHAT and request.masking == {"action": "masked", "window_turns": 2}


def test_a_compressed_original_and_what_went_out_are_both_decoded(tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/messages", ORIGINAL, masked=MASKED, gzipped=True)])
    [request] = read_flow_files([path], Routes()).requests
    assert (request.original, request.sent) == (ORIGINAL, MASKED)
    assert request.fmt is ANTHROPIC


def test_a_flow_without_a_backup_went_out_as_the_client_sent_it(tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/chat/completions?key=secret", ORIGINAL)])
    [request] = read_flow_files([path], Routes()).requests
    assert request.original == request.sent == ORIGINAL
    assert request.path == "/v1/chat/completions" and request.masking == {}


def test_a_masked_flow_whose_backup_is_missing_or_unreadable_is_skipped_and_listed(tmp_path):
    """Its request is the masked body: read as the client's, the savings
    would show 0. Skipped as measure.py skips it, and listed for the page."""
    masked = {"action": "masked", "format": "chat"}
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/chat/completions?key=1", MASKED, metadata=masked),
        with_unreadable_backup(post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED,
                                         metadata=masked)),
        post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED, metadata=masked),
    ])
    recorded = read_flow_files([path], Routes())
    assert recorded.lost_originals == [LostOriginal(1, "flows.mitm", "/v1/chat/completions"),
                                       LostOriginal(2, "flows.mitm", "/v1/chat/completions")]
    assert [(r.flow_number, r.original, r.sent) for r in recorded.requests] == [
        (3, ORIGINAL, MASKED)]


def test_metadata_of_the_wrong_type_is_read_as_absent(tmp_path):
    flow = post_flow("/v1/chat/completions", ORIGINAL, metadata={"format": ["anthropic"]})
    flow.metadata["obsmask_mcp"] = "truncated"
    [request] = read_flow_files([write_flows(tmp_path / "flows.mitm", [flow])],
                                Routes()).requests
    assert request.fmt is CHAT  # the route's format, not the list's


def test_flows_are_numbered_over_every_file_and_only_conversations_and_mcp_cuts_are_kept(
        tmp_path):
    cut = {"action": "truncated", "strings_cut": 1}
    mcp = post_flow("/mcp", b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call"}')
    mcp.metadata["obsmask_mcp"] = cut
    first = write_flows(tmp_path / "first.mitm", [
        post_flow("/v1/models", b"", method="GET"),
        post_flow("/v1/chat/completions", ORIGINAL, masked=MASKED)])
    second = write_flows(tmp_path / "second.mitm", [
        mcp, post_flow("/v1/messages", ORIGINAL)])
    recorded = read_flow_files([first, second], Routes())
    assert recorded.files == [str(first), str(second)] and recorded.flows == 4
    assert [(r.flow_number, r.source, r.path) for r in recorded.requests] == [
        (2, "first.mitm", "/v1/chat/completions"), (4, "second.mitm", "/v1/messages")]
    assert [(c.flow_number, c.source, c.path, c.cut) for c in recorded.mcp_cuts] == [
        (3, "second.mitm", "/mcp", cut)]


def test_flows_of_any_kind_count_in_the_reports_numbers(tmp_path):
    """A TCP or UDP flow between the HTTP ones, and one ending a file, is a
    flow of the file: the numbers the page gives are the file's."""
    first = write_flows(tmp_path / "first.mitm", [
        tflow.ttcpflow(), post_flow("/v1/chat/completions", ORIGINAL), tflow.tudpflow()])
    second = write_flows(tmp_path / "second.mitm", [post_flow("/v1/messages", ORIGINAL)])
    recorded = read_flow_files([first, second], Routes())
    assert recorded.flows == 4
    assert [(r.flow_number, r.path) for r in recorded.requests] == [
        (2, "/v1/chat/completions"), (4, "/v1/messages")]


def test_the_backup_reads_the_same_every_time(tmp_path):
    """Reading the backup does not consume it: a file reads the same twice."""
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/v1/responses", ORIGINAL, masked=MASKED)])
    once, again = (read_flow_files([path], Routes()).requests for _ in range(2))
    assert once == again and once[0].original == ORIGINAL


def test_a_file_that_is_not_flows_or_is_missing_stops_the_report_with_one_line(tmp_path):
    notes = tmp_path / "notes.mitm"
    notes.write_text("not a flow file")
    # One reader of flow files: measure says the same of the same file.
    with pytest.raises(BenchError, match=r"notes\.mitm: not a mitmproxy flow file"):
        read_flow_files([notes], Routes())
    with pytest.raises(BenchError, match=r"missing\.mitm: cannot be read"):
        read_flow_files([tmp_path / "missing.mitm"], Routes())
