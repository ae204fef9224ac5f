"""The release's PNG figures: deterministic bytes, drawn once per distinct statistics in a process."""

from __future__ import annotations

import pytest
from PIL import Image

from reasonvqa.tasks.balance import plots

STATS = {
    "top_answers": {"knowledge:P17": {
        "before_order": [{"answer": "France", "pool": 6, "balanced": 3}, {"answer": "Portugal", "pool": 2, "balanced": 2}],
        "after_order": [{"answer": "France", "train": 2, "test": 1}, {"answer": "Portugal", "train": 1, "test": 1}],
        "questions": {"pool": 8, "balanced": 5, "train": 3, "test": 2}}},
    "entropy_bits": {"knowledge:P17": {"before": 0.811, "after": 0.971}},
    "train_test_divergence": {"overall": 0.0196, "per_group": {"knowledge:P17": 0.0196}},
    "counts": {"train": {"by_source": {"gldv2": 3}}, "test": {"by_source": {"gldv2": 2}}},
}


@pytest.fixture
def drawn(monkeypatch):
    """The figures this test draws, by size; the process's kept figures emptied for the test."""
    monkeypatch.setattr(plots, "_DRAWN", type(plots._DRAWN)())
    sizes: list[tuple[float, float]] = []
    render_png = plots.render_png

    def counting(draw, size):
        sizes.append(size)
        return render_png(draw, size)

    monkeypatch.setattr(plots, "render_png", counting)
    return sizes


def test_the_same_statistics_are_drawn_once_and_written_byte_for_byte(tmp_path, drawn):
    first = plots.write_plots(STATS, ["knowledge:P17"], tmp_path / "a")
    again = plots.write_plots(STATS, ["knowledge:P17"], tmp_path / "b")
    assert sorted(first) == sorted(plots.FIGURES) and len(drawn) == 5
    assert {name: p.read_bytes() for name, p in first.items()} == {name: p.read_bytes() for name, p in again.items()}
    with Image.open(first["answers_before_after.png"]) as image:  # 12 x 7 inches at 100 dpi
        assert (image.format, image.size) == ("PNG", (1200, 700))
        assert len(set(image.convert("L").getdata())) > 2  # bars, text and axes, not a blank canvas


def test_other_statistics_are_drawn_again(tmp_path, drawn):
    plots.write_plots(STATS, ["knowledge:P17"], tmp_path / "a")
    changed = {**STATS, "entropy_bits": {"knowledge:P17": {"before": 0.811, "after": 0.5}}}
    other = plots.write_plots(changed, ["knowledge:P17"], tmp_path / "b")
    assert drawn[5:] == [plots.FIGURES["entropy_before_after.png"]]  # only the figure drawn from what changed
    assert other["entropy_before_after.png"].read_bytes() != (tmp_path / "a" / "entropy_before_after.png").read_bytes()


def test_a_process_keeps_a_bounded_number_of_figures(tmp_path, drawn, monkeypatch):
    monkeypatch.setattr(plots, "KEPT_FIGURES", 6)
    for after in (0.1, 0.2, 0.3):
        plots.write_plots({**STATS, "entropy_bits": {"g": {"before": 1.0, "after": after}}}, [], tmp_path / str(after))
    assert len(plots._DRAWN) == 6
    assert len(drawn) == 5 + 1 + 1  # the four figures without entropy stay kept between the three calls
