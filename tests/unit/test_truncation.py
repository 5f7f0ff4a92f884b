"""Head + marker + tail (``shared/truncation.py``), the one way obsmask
shortens a text it keeps: the first and last characters with a marker
between them, only when that is shorter, and never twice, which the marker,
recognised by its words and any numbers (and any recall id), guarantees."""

from __future__ import annotations

import pytest

from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.truncation import (
    DEFAULT_MARKER,
    TRUNCATION_MARK,
    MarkerFields,
    TruncationMarker,
    check_marker_template,
    truncate_text,
)

TEXT = "".join(f"<{n:04d}>" for n in range(500))  # 3000 characters, no two alike
RECALL_ID = "cut-0123456789abcdef"
# The marker of the spec, as it was before recall existed.
PLAIN_MARKER = "\n... [" + TRUNCATION_MARK + " original_chars={} head={} tail={}] ...\n"


def test_a_text_keeps_its_head_and_tail_around_the_marker():
    out = truncate_text(TEXT, 100, 50)
    marker = f"\n... [{TRUNCATION_MARK} original_chars=3000 head=100 tail=50] ...\n"
    assert out == TEXT[:100] + marker + TEXT[-50:]


def test_a_tail_of_zero_keeps_only_the_head():
    marker = TruncationMarker("[cut {original_chars}]")
    assert truncate_text(TEXT, 12, 0, marker) == TEXT[:12] + "[cut 3000]"


def test_a_text_that_cutting_would_not_shorten_stays_whole():
    """head + marker + tail must be shorter than the text: 10 + 5 + 10
    characters do not shorten 25, they shorten 26."""
    marker = TruncationMarker("[cut]")
    text = "y" * 25
    assert truncate_text(text, 10, 10, marker) is text
    assert truncate_text("y" * 26, 10, 10, marker) == "y" * 10 + "[cut]" + "y" * 10


def test_a_text_holding_a_marker_is_never_cut_again():
    once = truncate_text(TEXT, 100, 50)
    assert truncate_text(once, 10, 10) is once
    other_numbers = DEFAULT_MARKER.render(123456, 7, 8)
    carrying = TEXT[:1500] + other_numbers + TEXT[1500:]
    assert truncate_text(carrying, 10, 10) is carrying


def test_a_marker_is_found_by_its_words_with_any_numbers():
    marker = TruncationMarker("<{head}+{tail} of {original_chars} kept>")
    assert marker.render(3, 4, 5) == "<4+5 of 3 kept>"
    assert marker.found_in("before <1+22 of 333 kept> after")
    assert not marker.found_in("<a+b of c kept>")
    assert not marker.found_in("<1+2 of 3 KEPT>")
    assert marker.template == "<{head}+{tail} of {original_chars} kept>"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("[cut {head!r}]", "the field {head} takes no format spec or conversion"),
        ("[cut {head:>5}]", "the field {head} takes no format spec or conversion"),
        ("{original_chars}/{head}/{tail}", "needs some words besides its fields"),
        ("... ...", "needs some words besides its fields"),
        ("[cut {size}]", "unknown field {size}"),
        ("[cut{recall!r}]", "the field {recall} takes no format spec or conversion"),
        ("[cut {recall_id:>20}]", "the field {recall_id} takes no format spec or conversion"),
    ],
)
def test_a_marker_that_could_not_be_recognised_is_refused(template, message):
    with pytest.raises(SettingError) as raised:
        TruncationMarker(template)
    assert raised.value.key == "marker_template" and message in raised.value.message
    with pytest.raises(SettingError):
        check_marker_template("marker_template", template)


def test_the_check_leaves_the_type_to_the_setting():
    check_marker_template("marker_template", 42)  # typed_value says "must be a string"


# Recall ids ---------------------------------------------------------------------


def test_with_recall_off_the_default_marker_is_the_plain_one_byte_for_byte():
    """Without a recall id, {recall} renders as nothing: the default marker is
    exactly the marker obsmask wrote before recall existed."""
    assert DEFAULT_MARKER.render(3000, 100, 50) == PLAIN_MARKER.format(3000, 100, 50)
    assert DEFAULT_MARKER.render(3000, 100, 50, None) == PLAIN_MARKER.format(3000, 100, 50)
    assert truncate_text(TEXT, 100, 50) == (
        TEXT[:100] + PLAIN_MARKER.format(3000, 100, 50) + TEXT[-50:])


def test_with_a_recall_id_the_marker_carries_the_hint_before_its_bracket():
    out = truncate_text(TEXT, 100, 50, recall_id=RECALL_ID)
    marker = (f"\n... [{TRUNCATION_MARK} original_chars=3000 head=100 tail=50; recall "
              f"id={RECALL_ID}] ...\n")
    assert out == TEXT[:100] + marker + TEXT[-50:]


def test_the_recall_id_field_renders_the_id_alone_or_nothing():
    marker = TruncationMarker("[cut {original_chars} id={recall_id}]")
    assert marker.render(5, 1, 1, RECALL_ID) == f"[cut 5 id={RECALL_ID}]"
    assert marker.render(5, 1, 1) == "[cut 5 id=]"


@pytest.mark.parametrize("template", [
    None,  # the default
    "[cut {original_chars}{recall}]",
    "<{head}+{tail} of {original_chars} kept, id={recall_id}>",
])
def test_a_text_cut_with_or_without_a_recall_id_is_never_cut_again(template):
    """A marker is recognised with its hint and without it, so a text cut
    with recall on or off is left alone by a second cut either way."""
    marker = DEFAULT_MARKER if template is None else TruncationMarker(template)
    for first_id in (None, RECALL_ID):
        once = truncate_text(TEXT, 100, 50, marker, first_id)
        assert once != TEXT and marker.found_in(once)
        for second_id in (None, "cut-ffffffffffffffff"):
            assert truncate_text(once, 10, 10, marker, second_id) is once


def test_a_hint_that_is_not_a_recall_id_is_not_taken_for_a_marker():
    """The hint's id is made of id characters only: a marker whose hint holds
    a space is not a marker of this template."""
    text = f"[{TRUNCATION_MARK} original_chars=3 head=1 tail=1; recall id=a b] ..."
    assert not DEFAULT_MARKER.found_in("\n... " + text + "\n")


def test_a_marker_is_read_back_into_its_fields():
    """What the content view tells of a cut string whose original is gone:
    the marker's own figures and recall id; a template's repeated field is
    read at its first place, a field it lacks is None."""
    cut = truncate_text(TEXT, 100, 50, recall_id=RECALL_ID)
    assert DEFAULT_MARKER.read(cut) == MarkerFields(3000, 100, 50, RECALL_ID)
    assert DEFAULT_MARKER.read(truncate_text(TEXT, 10, 0)) == MarkerFields(3000, 10, 0, None)
    assert DEFAULT_MARKER.read(TEXT) is None
    own = TruncationMarker("<<cut {original_chars}, see {recall_id} ({original_chars})>>")
    assert own.read("x<<cut 42, see cut-1 (42)>>y") == MarkerFields(42, None, None, "cut-1")
    assert own.read("x<<cut 42, see  (42)>>y") == MarkerFields(42, None, None, None)


def test_a_figure_of_thousands_of_digits_is_no_marker_and_reading_it_never_fails():
    """A marker obsmask writes counts less than 10**19. A string whose
    "figure" runs to 5,000 digits (int() refuses more than 4,300) is no
    marker: found and read as none, never a ValueError that would make the
    content view fail; 19 digits are still read."""
    huge = "9" * 5_000
    text = PLAIN_MARKER.format(huge, 100, 50)
    assert not DEFAULT_MARKER.found_in(text)
    assert DEFAULT_MARKER.read(text) is None
    own = TruncationMarker("[cut {original_chars}]")
    assert own.read(f"[cut {huge}]") is None and not own.found_in(f"[cut {huge}]")
    largest = "9" * 19
    assert DEFAULT_MARKER.read(PLAIN_MARKER.format(largest, 100, 50)) == MarkerFields(
        int(largest), 100, 50, None)
    # And the string can still be cut (its digits are no marker of obsmask's).
    assert DEFAULT_MARKER.found_in(truncate_text(huge * 2, 10, 10))
