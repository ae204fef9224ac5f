"""The --kinds / --task-types / --hallucination flags of build and resplit."""

from typer.testing import CliRunner

from reasonvqa.flows.cli import _kind_selection, app


def test_flags_become_a_kind_selection():
    selection = _kind_selection("grounded, template", "counting,spatial", "exclude")
    assert selection.active() == {"kinds": ["grounded", "template"], "task_types": ["counting", "spatial"],
                                  "hallucination": "exclude"}
    assert _kind_selection(None, None, None).active() == {}


def test_a_bad_hallucination_value_exits_2_before_any_work(tmp_path):
    result = CliRunner().invoke(app, ["build", "--sample", "--out", str(tmp_path), "--hallucination", "sometimes"])
    assert result.exit_code == 2 and "only, exclude" in result.output
    assert not any(tmp_path.iterdir())
    empty = CliRunner().invoke(app, ["build", "--sample", "--out", str(tmp_path), "--kinds", ","])
    assert empty.exit_code == 2
