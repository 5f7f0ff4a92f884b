"""obsmask's content view in a real mitmweb, end to end.

A session is recorded through a real mitmdump with obsmask (``-w``) in front
of a stub provider that reports its usage; the flow file is opened in a
real mitmweb with obsmask (from the same environment as mitmdump). mitmweb's
own API chooses the view for the masked request, and a real headless
Chromium, opening the flow's request tab, renders both the original result
text and the placeholder; its screenshot is kept (and copied to
/tmp/obsmask-mitmweb-view.png). The flow file holds the comment's summary
line and provider line as two lines.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.browser import rendered_dom, screenshot
from support.chat import body, conversation
from support.flow_files import read_flows
from support.mitmweb import NEEDS_TOKEN, Mitmweb, running_mitmweb
from support.processes import running_mitmdump
from support.recording_server import Answer, recording_server
from support.usage import CHAT_JSON

pytestmark = pytest.mark.e2e

SCREENSHOT_COPY = Path("/tmp/obsmask-mitmweb-view.png")
# What the masked request's page must show: the text of the first result
# (masked: its turn is the oldest) as the JSON of the original holds it,
# and the placeholder that replaced it.
ORIGINAL_TEXT = "line 59: some ordinary tool output\\n(call_0_0)"
PLACEHOLDER = "[Observation masquée: résultat d'outil ancien (tool_call_id=call_0_0, outil=bash"


def provider(_request: object) -> Answer:
    return Answer(body=json.dumps(CHAT_JSON).encode())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flow file written by a real mitmdump with obsmask (window 1): one
    masked Chat Completions request, answered with the provider's usage."""
    folder = tmp_path_factory.mktemp("recorded")
    flows = folder / "session.mitm"
    config = folder / "obsmask.toml"
    config.write_text("", encoding="utf-8")
    with recording_server(provider) as server, running_mitmdump(
        ["--mode", f"reverse:{server.url}", "--set", f"obsmask_config={config}",
         "--set", "obsmask_window_turns=1", "-w", str(flows)],
        cwd=folder, confdir=folder / "confdir",
    ) as proxy:
        request = urllib.request.Request(
            f"http://127.0.0.1:{proxy.port}/v1/chat/completions",
            data=body(conversation(turns=4)), headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.status == 200
        proxy.wait_for("provider reported")
    return flows


def test_the_comment_keeps_its_summary_and_provider_lines_apart(recorded):
    """The flow file (what mitmweb loads) holds the comment as two lines:
    obsmask's summary, then the provider's usage."""
    (flow,) = read_flows(recorded)
    lines = flow.comment.split("\n")
    assert len(lines) == 2
    assert lines[0].startswith("obsmask: masked 3 of 4 tool results: tool chars ")
    assert lines[1] == ("obsmask: provider reported 2,006 input tokens, 1,920 read from its "
                        "cache")


@pytest.fixture(scope="module")
def mitmweb(recorded: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmweb]:
    """A real mitmweb with obsmask, the recorded flows loaded; stopped by its
    process, whatever happens."""
    folder = tmp_path_factory.mktemp("mitmweb")
    config = folder / "obsmask.toml"
    config.write_text("", encoding="utf-8")
    with running_mitmweb(["--set", f"obsmask_config={config}", "--set",
                          "obsmask_window_turns=1", "-r", str(recorded)],
                         folder, folder / "confdir") as web:
        yield web


def masked_flow_id(web: Mitmweb) -> str:
    flows = web.get_json("/flows")
    assert isinstance(flows, list)
    (found,) = [f["id"] for f in flows
                if str(f.get("comment", "")).startswith("obsmask: masked")]
    return str(found)


def test_mitmweb_chooses_the_view_for_the_masked_request(mitmweb):
    """mitmweb's content endpoint, with the view "auto", answers with
    obsmask's page (11: lines of styled parts; 12: one text)."""
    flow_id = masked_flow_id(mitmweb)
    content = mitmweb.get_json(f"/flows/{flow_id}/request/content/auto.json")
    assert isinstance(content, dict)
    if NEEDS_TOKEN:  # mitmweb 12: one text
        assert content["view_name"] == "obsmask"
        text = content["text"]
    else:
        assert content["description"] == "obsmask: masked request"
        text = "\n".join("".join(part for _style, part in line) for line in content["lines"])
    assert text.startswith("obsmask: masked request (OpenAI Chat Completions)")
    assert "masked 3, clipped 0 of 4 tool results; stage masking" in text
    assert ORIGINAL_TEXT in text and PLACEHOLDER in text
    # The diff is made item by item, each hunk headed by its place and call id.
    assert [line for line in text.splitlines() if line.startswith("@@")] == [
        "@@ messages[3] (call_0_0) @@", "@@ messages[5] (call_1_0) @@",
        "@@ messages[7] (call_2_0) @@"]
    assert "\n  obsmask: provider reported 2,006 input tokens" in text
    # The flow's answer is not obsmask's: mitmweb's JSON view.
    answer = mitmweb.get_json(f"/flows/{flow_id}/response/content/auto.json")
    assert isinstance(answer, dict)
    assert "obsmask" not in str(answer.get("view_name", answer.get("description")))


def test_the_request_tab_shows_the_original_and_the_placeholder(mitmweb, tmp_path):
    """Headless Chromium opens the flow's request tab: the rendered page
    holds the original result text and the placeholder; the screenshot is
    kept."""
    flow_id = masked_flow_id(mitmweb)
    page = mitmweb.url(f"/#/flows/{flow_id}/request")
    header = "obsmask: masked request (OpenAI Chat Completions)"
    dom = rendered_dom(page, tmp_path, showing=header)
    assert header in dom
    assert ORIGINAL_TEXT in dom
    assert PLACEHOLDER.replace("'", "&#39;") in dom or PLACEHOLDER in dom
    png = screenshot(page, tmp_path / "mitmweb-view.png", size=(1600, 1100))
    shutil.copyfile(png, SCREENSHOT_COPY)
