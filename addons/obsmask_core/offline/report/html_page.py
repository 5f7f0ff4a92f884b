"""The report as one HTML page that needs nothing else: the style is in the
page, the plots are inline SVG (``obsmask_core.offline.report.svg``), there is no script,
no font and no picture to fetch, so it opens offline and can be mailed.

Every number of a table is in its cell twice: as text for the reader
(thousands separators, a fixed count of decimals) and whole in the cell's
``data-value`` attribute, for whoever reads the page by program.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from obsmask_core.offline.report.figures import Cell, Figure, Fixed, Table
from obsmask_core.offline.report.svg import render_svg

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1500px; padding: 0 1.5em; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; }
h2 { margin-top: 2.2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
h3 { margin: 1.4em 0 0.4em; }
p.lead, p.note { max-width: 75em; }
p.note { color: #555; font-size: 0.92em; margin: 0.3em 0; }
.figure { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.figure svg { flex: none; background: #fff; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; }
th { background: #f3f3f3; text-align: left; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
tfoot td { font-weight: bold; background: #fafafa; }
caption { text-align: left; font-weight: 600; padding: 0.2em 0; }
.table-box { max-height: 30em; overflow: auto; }
.tables { display: flex; flex-wrap: wrap; gap: 2em; align-items: flex-start; }
nav ul { columns: 2; }
"""


@dataclass(frozen=True)
class Section:
    anchor: str  # the section's id, and the prefix of its figures' ids
    title: str
    paragraphs: tuple[str, ...]
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Page:
    title: str
    intro: tuple[str, ...]
    # What obsmask saved, first on the page: one line per conversation, then
    # its plot of the bill with obsmask over the bill without.
    saved: tuple[str, ...]
    saved_figures: tuple[Figure, ...]
    totals: Table
    bill_totals: Table | None
    bill_note: str
    sections: tuple[Section, ...]
    # The proxy's end-of-run bill lines for these flows (the net line first).
    proxy_bill: tuple[str, ...] = ()


def _cell_text(cell: Cell) -> tuple[str, str, bool]:
    """(text shown, data-value, is a number)."""
    if cell is None:
        return "–", "", False
    if isinstance(cell, Fixed):
        return f"{cell.value:,.{cell.places}f}", repr(float(cell.value)), True
    if isinstance(cell, int):
        return f"{cell:,}", str(cell), True
    return cell, cell, False


def _row(cells: Sequence[Cell], tag: str = "td") -> str:
    out = []
    for cell in cells:
        text, value, number = _cell_text(cell)
        kind = ' class="number"' if number else ""
        out.append(f'<{tag}{kind} data-value="{escape(value)}">{escape(text)}</{tag}>')
    return "<tr>" + "".join(out) + "</tr>"


def render_table(table: Table, table_id: str, caption: str) -> str:
    head = "".join(f'<th scope="col">{escape(column)}</th>' for column in table.columns)
    body = "\n".join(_row(row) for row in table.rows)
    foot = f"<tfoot>{_row(table.footer)}</tfoot>" if table.footer is not None else ""
    return (f'<table id="{escape(table_id)}"><caption>'
            f"{escape(caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>\n{body}\n</tbody>{foot}</table>")


def render_figure(figure: Figure, anchor: str) -> str:
    figure_id = f"{anchor}-{figure.key}"
    parts = [f'<section class="figure-block" id="figure-{escape(figure_id)}">',
             f"<h3>{escape(figure.plot.title)}</h3>"]
    parts += [f'<p class="note">{escape(note)}</p>' for note in figure.notes]
    parts.append('<div class="figure">')
    if figure.plot.has_points:
        parts.append(render_svg(figure.plot, f"plot-{figure_id}"))
    else:
        parts.append('<p class="note">Nothing to draw: no request has these numbers.</p>')
    # A long conversation's table scrolls in its box: the page stays readable
    # and every number is still in it.
    parts.append('<div class="table-box">' + render_table(
        figure.table, f"table-{figure_id}", f"{figure.plot.title}: the numbers of the plot")
        + "</div>")
    parts += ["</div>", "</section>"]
    return "\n".join(parts)


def render_page(page: Page) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(page.title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(page.title)}</h1>",
        '<section id="saved"><h2>What obsmask saved</h2>',
        *((f'<p class="lead proxy-bill">The proxy\'s own bill (its ledger\'s estimate), as '
           f'its end-of-run summary gives it: {escape(page.proxy_bill[0])}</p>',)
          if page.proxy_bill else ()),
        *(f'<p class="proxy-bill-line">{escape(line)}</p>' for line in page.proxy_bill[1:]),
        *(f'<p class="lead saved-line">{escape(text)}</p>' for text in page.saved),
        *(render_figure(figure, "saved") for figure in page.saved_figures),
        "</section>",
        *(f'<p class="lead">{escape(text)}</p>' for text in page.intro),
        "<h2 id=\"totals\">Totals</h2>",
        '<div class="tables">',
        render_table(page.totals, "table-totals", "What obsmask did, over every file"),
    ]
    if page.bill_totals is not None:
        parts.append(render_table(page.bill_totals, "table-bill-totals",
                                  "The bill of every conversation, added up (input tokens at "
                                  "the base price)"))
    parts.append("</div>")
    parts.append(f'<p class="note">{escape(page.bill_note)}</p>')
    if page.sections:
        parts.append("<nav><ul>" + "".join(
            f'<li><a href="#{escape(section.anchor)}">{escape(section.title)}</a></li>'
            for section in page.sections) + "</ul></nav>")
    for section in page.sections:
        parts.append(f'<section class="conversation" id="{escape(section.anchor)}">')
        parts.append(f"<h2>{escape(section.title)}</h2>")
        parts += [f'<p class="note">{escape(text)}</p>' for text in section.paragraphs]
        parts += [render_figure(figure, section.anchor) for figure in section.figures]
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
