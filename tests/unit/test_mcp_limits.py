"""The settings of MCP truncation (``mcp/limits.py``): their defaults, and
the values refused with a SettingError naming the key."""

from __future__ import annotations

import pytest

from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import check_value
from obsmask_core.shared.truncation import DEFAULT_MARKER_TEMPLATE, TruncationMarker
from support.mcp_messages import DEFAULTS, PLAIN_MARKER_TEMPLATE, README_MARKER_TEMPLATE


def test_the_defaults_keep_2000_and_2000_of_strings_over_4000():
    """By default a string over 4000 characters keeps its first 2000 and its
    last 2000, no tool has a limit of its own, and the marker is the one
    README.md shows: ``\\n... [OBSMASK_TRUNCATED original_chars={original_chars}
    head={head} tail={tail}{recall}] ...\\n``, which with recall off renders
    exactly as the marker without ``{recall}``."""
    assert (DEFAULTS.max_chars, DEFAULTS.head_chars, DEFAULTS.tail_chars) == (4000, 2000, 2000)
    assert DEFAULTS.max_chars_for == () and DEFAULTS.tool_limits().rules == ()
    assert DEFAULTS.marker_template == DEFAULT_MARKER_TEMPLATE == README_MARKER_TEMPLATE
    assert TruncationMarker(DEFAULTS.marker_template).render(100_000, 2000, 2000) == (
        PLAIN_MARKER_TEMPLATE.format(original_chars=100_000, head=2000, tail=2000))


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"max_chars": 100, "head_chars": 60, "tail_chars": 41}, "head_chars"),
        ({"head_chars": -1}, "head_chars"),
        ({"tail_chars": -5}, "tail_chars"),
        ({"max_chars": 0, "head_chars": 0, "tail_chars": 0}, "max_chars"),
        ({"max_chars": -10, "head_chars": 0, "tail_chars": 0}, "max_chars"),
        ({"max_chars": 4000.0}, "max_chars"),
        ({"max_chars": True, "head_chars": 0, "tail_chars": 0}, "max_chars"),
        ({"head_chars": "2000"}, "head_chars"),
        ({"marker_template": "[cut {foo}]"}, "marker_template"),
        ({"marker_template": "[cut {head!r}]"}, "marker_template"),
        ({"marker_template": "[cut {head:>5}]"}, "marker_template"),
        ({"marker_template": "[cut {0}]"}, "marker_template"),
        ({"marker_template": "[cut {head"}, "marker_template"),
        ({"marker_template": "{original_chars}/{head}/{tail}"}, "marker_template"),
        ({"marker_template": "... ..."}, "marker_template"),
        ({"marker_template": 42}, "marker_template"),
    ],
)
def test_invalid_limits_are_refused(values, key):
    """Limits that cannot work are refused with a SettingError naming the key:
    head + tail over max_chars, negative values, max_chars 0, values that
    are not integers, and a template with an unknown field, a format spec or
    conversion, or no words of its own."""
    with pytest.raises(SettingError) as raised:
        TruncationLimits(**values)
    assert raised.value.key == key


def test_each_key_of_the_masking_table_is_checked_on_its_own():
    """[mcp_gateway.masking] keys are checked one by one; an unknown key is an
    error that lists the known ones."""
    check_value(TruncationLimits, "enabled", False)
    check_value(TruncationLimits, "max_chars", 1)
    check_value(TruncationLimits, "head_chars", 0)
    check_value(TruncationLimits, "marker_template", "[cut {original_chars}]")
    check_value(TruncationLimits, "marker_template", "[cut{recall}]")
    check_value(TruncationLimits, "max_chars_for", [["fs/read_*", "20000"], ["search", "0"]])
    for key, value in [("enabled", "yes"), ("max_chars", 0), ("tail_chars", -1),
                       ("marker_template", "{foo} bar"), ("max_char", 10)]:
        with pytest.raises(SettingError) as raised:
            check_value(TruncationLimits, key, value)
        assert raised.value.key == key
    with pytest.raises(SettingError, match="unknown key"):
        check_value(TruncationLimits, "head", 10)


def test_valid_edge_limits_are_accepted():
    """head + tail == max_chars is allowed, so are 0 head or tail, and a template
    without fields as long as it has words."""
    TruncationLimits(max_chars=10, head_chars=5, tail_chars=5)
    TruncationLimits(max_chars=1, head_chars=0, tail_chars=0, marker_template="cut")
    marker = TruncationMarker("[cut]")
    assert marker.render(1, 2, 3) == "[cut]" and marker.found_in("a[cut]b")
