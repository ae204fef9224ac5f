import json

import pyarrow.compute as pc
import pytest
from typer.testing import CliRunner

from reasonvqa.flows.cli import app
from reasonvqa.flows.config import sample_config
from reasonvqa.flows.resplit import SourceReleaseError, resplit, resplit_flow
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.filters import EmptySelectionError
from reasonvqa.tasks.balance.pipeline import balance_and_split
from reasonvqa.tasks.balance.stats import write_stats
from reasonvqa.tasks.release.reader import read_release
from reasonvqa.tasks.release.verify import verify_release
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.balance.synthetic import synthetic_pool

KEEP = ["Places & Locations", "History & Events"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A release written by the real writer from a synthetic pool of 6 domains."""
    root = tmp_path_factory.mktemp("source")
    config = json.loads(sample_config().canonical_json())
    config["release"] = {"name": "syn", "version": "1.0.0"}  # as a build of that release would hold
    done = balance_and_split(synthetic_pool(3_000, 400, 12, seed=5), BalanceConfig(), SplitConfig(), config["seed"])
    write_stats(done.pool, done.balance, done.split, root / "stats")
    return write_release(
        root / "out", "syn", "1.0.0", {"train": done.split.train, "test": done.split.test}, pool=done.pool,
        stats_dir=root / "stats", config=config, inputs={"source:vg": "sha256:feed"},
    )


def domains_in(table) -> set[str]:
    return set(pc.list_flatten(table["domains"]).to_pylist())


def test_resplit_by_domain_gives_a_valid_release_of_those_domains(source, tmp_path):
    # the synthetic pool's properties are not in the template bank: select by domain tag
    path = resplit(source, tmp_path, domains=KEEP, domain_match="any")
    assert path.parent == tmp_path / "syn" and path.name.startswith("1.0.0-resplit-")
    assert verify_release(path) == []
    release = read_release(path)
    for table in [release.pool, *release.splits.values()]:
        assert domains_in(table) <= set(KEEP) and table.num_rows > 0
    assert set(release.splits["train"]["image_id"].to_pylist()).isdisjoint(release.splits["test"]["image_id"].to_pylist())
    manifest = release.manifest
    assert manifest["config"]["resplit"]["filters"] == {"domains": sorted(KEEP), "domain_match": "any"}
    assert manifest["config"]["resplit"]["from"]["version"] == "1.0.0"
    assert manifest["inputs"]["source:vg"] == "sha256:feed"
    assert manifest["inputs"]["resplit_source_pool"].startswith("sha256:")
    assert "stats/filter_report.json" in manifest["files"] and "stats/answers_train_test.png" in manifest["files"]
    assert "Re-split of syn 1.0.0" in (path / "README.md").read_text()
    source_pool = read_release(source).pool
    expected = sum(1 for d in source_pool["domains"].to_pylist() if set(d) & set(KEEP))
    assert manifest["counts"]["pool"] == expected


def test_same_request_same_version_and_bytes(source, tmp_path):
    first = resplit(source, tmp_path / "a", domains=KEEP, domain_match="any")
    second = resplit(source, tmp_path / "b", domains=list(reversed(KEEP)), domain_match="any")
    assert first.name == second.name
    assert (first / "manifest.json").read_bytes() == (second / "manifest.json").read_bytes()
    assert resplit(source, tmp_path / "a", domains=KEEP, domain_match="any") == first  # rerun: no error
    other = resplit(source, tmp_path / "a", domains=KEEP, domain_match="any", seed=99)
    assert other.name != first.name


def test_source_and_hop_filters_and_explicit_version(source, tmp_path):
    path = resplit(source, tmp_path, sources=["gldv2"], hops=[2, 3], version="2.0.0-gldv2")
    assert path.name == "2.0.0-gldv2" and verify_release(path) == []
    pool = read_release(path).pool
    assert set(pool["image_source"].to_pylist()) == {"gldv2"} and set(pool["n_hop"].to_pylist()) <= {2, 3}


def test_empty_filter_is_a_clear_error_and_writes_nothing(source, tmp_path):
    with pytest.raises(EmptySelectionError, match="match none") as info:
        resplit(source, tmp_path, domains=["Sports"], domain_match="any")
    assert info.value.report["unknown_values"] == {"domains": ["Sports"]}
    assert not (tmp_path / "syn").exists()


def test_changed_pool_is_refused(source, tmp_path):
    import shutil

    copy = tmp_path / "syn" / "1.0.0"  # verify reads name and version from the path
    shutil.copytree(source, copy)
    part = sorted((copy / "pool").glob("*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(SourceReleaseError, match="fails verification .* pool/part-00000.parquet: sha256 mismatch"):
        resplit(copy, tmp_path / "out", domains=KEEP)
    with pytest.raises(SourceReleaseError, match="no manifest"):
        resplit(tmp_path / "nowhere", tmp_path / "out", domains=KEEP)


def test_cli_resplit_then_verify(source, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["resplit", str(source), "--domains", ",".join(KEEP), "--domain-match", "any",
                                 "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    path = result.output.strip().splitlines()[-1]
    assert runner.invoke(app, ["verify", path]).exit_code == 0


def test_prefect_flow_resplit(source, tmp_path):
    path = resplit_flow(str(source), str(tmp_path), domains=KEEP, domain_match="any")
    assert verify_release(type(source)(path)) == []
    assert domains_in(read_release(type(source)(path)).pool) <= set(KEEP)


def test_flow_states_name_the_release_or_the_one_line_reason(source, tmp_path):
    done = resplit_flow(str(source), str(tmp_path), domains=KEEP, domain_match="any", return_state=True)
    assert done.is_completed()
    assert done.message == f"re-split release written to {done.result()}"
    failed = resplit_flow(str(tmp_path / "nowhere"), str(tmp_path), return_state=True)
    assert failed.is_failed()
    assert failed.message == f"SourceReleaseError: {tmp_path / 'nowhere' / 'manifest.json'}: not a release folder (no manifest)"
    with pytest.raises(SourceReleaseError):  # called as a function, the flow raises the error itself
        resplit_flow(str(tmp_path / "nowhere"), str(tmp_path))


def _one_image_test_split(tmp_path):
    """A release whose pool has questions on 10 images of which one image is in test: a re-split to
    the test image's source leaves train empty."""
    from tests.tasks.balance.conftest import pool_of, question

    rows = [question(f"q{i:02d}", f"vg:{i % 10}", "P17", ["France", "Italy"][i % 2], domains=["Places & Locations"])
            for i in range(30)]
    rows += [question("g00", "gldv2:a", "P17", "Spain", domains=["Places & Locations"])]
    pool = pool_of(rows)
    is_vg = pc.starts_with(pool["image_id"], "vg:")
    return write_release(tmp_path / "src", "reasonvqa-sample", "0.1.0", {"train": pool.filter(is_vg),
                                                            "test": pool.filter(pc.invert(is_vg))},
                         pool=pool, stats_dir=None, config=json.loads(sample_config().canonical_json()), inputs={})


def test_resplit_refuses_an_empty_split_unless_allowed(tmp_path):
    from reasonvqa.tasks.release.writer import EmptySplitError

    source = _one_image_test_split(tmp_path)
    with pytest.raises(EmptySplitError, match=r"release reasonvqa-sample 2\.0\.0: split '(train|test)' is empty .*--allow-empty"):
        resplit(source, tmp_path / "out", sources=["gldv2"], version="2.0.0")
    assert not (tmp_path / "out" / "reasonvqa-sample" / "2.0.0").exists()
    allowed = resplit(source, tmp_path / "out", sources=["gldv2"], version="2.0.0", allow_empty=True)
    manifest = json.loads((allowed / "manifest.json").read_text())
    assert manifest["config"]["resplit"]["allow_empty"] is True
    assert 0 in (manifest["counts"]["train"], manifest["counts"]["test"])
    assert verify_release(allowed) == []


def test_verify_reports_an_empty_split_unless_the_manifest_allows_it(tmp_path):
    from tests.tasks.balance.conftest import pool_of, question

    pool = pool_of([question("q1", "vg:1", "P17", "France", domains=["Places & Locations"])])
    release = write_release(tmp_path, "demo", "1.0.0", {"train": pool, "test": pool.slice(0, 0)}, pool=pool,
                            stats_dir=None, config={}, inputs={})
    assert verify_release(release) == ["test: empty split (0 questions; datasets.load_dataset cannot load it, and only "
                                       "a re-split given --allow-empty may publish one, recorded as "
                                       "config.resplit.allow_empty)"]
    allowed = write_release(tmp_path, "demo", "1.0.1", {"train": pool, "test": pool.slice(0, 0)}, pool=pool,
                            stats_dir=None, config={"resplit": {"allow_empty": True}}, inputs={})
    assert verify_release(allowed) == []


def test_cli_resplit_allow_empty(tmp_path):
    source = _one_image_test_split(tmp_path)
    refused = CliRunner().invoke(app, ["resplit", str(source), "--sources", "gldv2", "--version", "2.0.0",
                                       "--out", str(tmp_path / "o")])
    assert refused.exit_code == 2
    assert "is empty" in refused.output and "--allow-empty" in refused.output
    allowed = CliRunner().invoke(app, ["resplit", str(source), "--sources", "gldv2", "--version", "2.0.0",
                                       "--allow-empty", "--out", str(tmp_path / "o")])
    assert allowed.exit_code == 0, allowed.output
    assert "is empty; datasets.load_dataset cannot load an empty split" in allowed.output
    assert CliRunner().invoke(app, ["verify", str(tmp_path / "o" / "reasonvqa-sample" / "2.0.0")]).exit_code == 0


def test_cli_empty_selection_exits_2_with_the_reason(source, tmp_path):
    result = CliRunner().invoke(app, ["resplit", str(source), "--domains", "Sports", "--domain-match", "any",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "error: the filters" in result.output and "match none" in result.output


def test_route_match_keeps_what_a_domain_build_would_generate(tmp_path):
    """Route mode uses the real template bank: every property on the route must have a selected domain."""
    from reasonvqa.tasks.questions.bank import load_bank
    from tests.tasks.balance.conftest import pool_of, question

    bank = load_bank()
    rows = []
    for i in range(40):
        rows.append(question(f"a{i:02d}", f"vg:{i}", "P36", ["Lisbon", "Paris", "Rome"][i % 3], n_hop=2,
                             route=["P17", "P36"], domains=["Places & Locations", "Physical Geography", "Politics & Ideologies"],
                             template_version=bank.version))
        rows.append(question(f"b{i:02d}", f"vg:{i}", "P571", str(1800 + i % 4), route=["P571"],
                             domains=["History & Events"], template_version=bank.version))
    pool = pool_of(rows)
    # rows alternate a/b per image: the first 40 rows are images 0-19, the last 40 images 20-39
    source = write_release(tmp_path / "src", "reasonvqa-sample", "0.1.0", {"train": pool.slice(0, 40), "test": pool.slice(40)},
                           pool=pool, stats_dir=None, config=json.loads(sample_config().canonical_json()),
                           inputs={})
    # 40 questions of one property on 40 images: the split keeps them all in train (allowed here: the
    # test is about the filter)
    path = resplit(source, tmp_path / "out", domains=["Politics & Ideologies"], allow_empty=True)
    assert verify_release(path) == []
    release = read_release(path)
    assert set(release.pool["property_id"].to_pylist()) == {"P36"}
    assert domains_in(release.pool) == {"Politics & Ideologies"}  # narrowed: P17/P36's other domains are dropped
    assert release.manifest["config"]["resplit"]["filters"]["domain_match"] == "route"
