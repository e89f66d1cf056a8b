"""The figures README.md and docs/ quote are their bench result files' (bench/docfigures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.docfigures import MARKER, FigureError, differences, docs, write

#: Markers the docs held when this test was written; far fewer means figures went back to hand-copied.
FEWEST_MARKERS = 20


def test_every_figure_in_the_readme_and_docs_is_its_result_files() -> None:
    found = differences(docs())
    assert not found, "run .venv/bin/python bench/docfigures.py:\n" + "\n".join(map(str, found))


def test_the_docs_quote_their_bench_figures_through_markers() -> None:
    markers = sum(len(MARKER.findall(doc.read_text())) for doc in docs())
    assert markers >= FEWEST_MARKERS


def _result(results: Path, name: str, figures: dict, **rest: object) -> None:
    results.mkdir(exist_ok=True)
    body = {"bench": name, "variant": "", "figures": figures, "machine": {"cores": 2}, **rest}
    (results / f"{name}.json").write_text(json.dumps(body))


def test_a_figure_that_differs_from_its_result_is_named_and_write_fixes_it(tmp_path: Path) -> None:
    _result(tmp_path / "results", "toy", {"p99": 9.81234, "rate": 12345.6})
    doc = tmp_path / "doc.md"
    doc.write_text(
        "p99 <!--bench:toy:p99:.1f-->8.0<!--/bench--> s\n"
        "rate <!--bench:toy:rate:,.0f-->12,346<!--/bench--> msg/s on <!--bench:toy:machine--><!--/bench-->\n"
    )
    [difference] = [d for d in differences([doc], tmp_path / "results") if d.marker == "toy:p99"]
    assert (difference.line, difference.written, difference.expected) == (1, "8.0", "9.8")
    assert write([doc], tmp_path / "results") == 2
    assert doc.read_text() == (
        "p99 <!--bench:toy:p99:.1f-->9.8<!--/bench--> s\n"
        "rate <!--bench:toy:rate:,.0f-->12,346<!--/bench--> msg/s on "
        "<!--bench:toy:machine-->2 cores<!--/bench-->\n"
    )
    assert differences([doc], tmp_path / "results") == []


@pytest.mark.parametrize(
    ("marker", "complaint"),
    [
        ("<!--bench:absent:p99-->1<!--/bench-->", "no result file"),
        ("<!--bench:toy:nothing-->1<!--/bench-->", "no figure 'nothing'"),
        ("<!--bench:toy:unmeasured-->1<!--/bench-->", "was not measured"),
        ("<!--bench:toy:p99:,d-->1<!--/bench-->", "does not apply"),
    ],
)
def test_a_marker_without_its_result_or_figure_is_an_error(
    tmp_path: Path, marker: str, complaint: str
) -> None:
    _result(tmp_path / "results", "toy", {"p99": 9.8, "unmeasured": None})
    doc = tmp_path / "doc.md"
    doc.write_text(f"x {marker}\n")
    with pytest.raises(FigureError, match=complaint):
        differences([doc], tmp_path / "results")
