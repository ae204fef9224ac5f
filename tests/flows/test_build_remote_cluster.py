"""build-reasonvqa on a Dask cluster given by its scheduler address, with its work folder on S3 (moto on
127.0.0.1), whose workers are elsewhere as far as the flow's loopback goes (tests/flows/elsewhere.py): they
cannot reach the embedded knowledge mirror the flow serves on its 127.0.0.1, as on other hosts."""

from pathlib import Path

import pytest

from reasonvqa import workstore
from reasonvqa.children import free_port
from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from reasonvqa.flows.config import sample_config
from reasonvqa.flows.runners import make_task_runner
from reasonvqa.knowledge import mirror
from tests.flows import elsewhere
from tests.moto_s3 import s3_server

pytestmark = pytest.mark.integration


def files(release: Path) -> dict[str, bytes]:
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def remote(tmp_path_factory, sample_release):
    import socket

    from distributed import Client, LocalCluster

    root = tmp_path_factory.mktemp("remote-cluster")
    port = free_port()
    with s3_server("remote"), pytest.MonkeyPatch.context() as patch:
        patch.setenv(elsewhere.ENV, f"127.0.0.1:{port}")  # before the workers start: they inherit it
        patch.setattr(mirror, "free_port", lambda: port)  # the flow serves its mirror there
        local = sample_release
        with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                          preload=[elsewhere.__name__]) as cluster, Client(cluster) as client:
            with socket.create_server(("127.0.0.1", port)):  # listening on this machine, unreachable from them
                reach = {"flow": elsewhere.reaches("127.0.0.1", port),
                         "workers": sorted(client.run(elsewhere.reaches, "127.0.0.1", port).values())}
            on_cluster = build_reasonvqa.with_options(task_runner=make_task_runner(dask_address=cluster.scheduler_address))
            flow_markers: list[Path] = []
            forget = workstore.forget

            def markers_then_forget(path: Path) -> None:  # what the flow's mirror held when the build ended
                flow_markers.extend(p for p in workstore.rebase(Path(path)).rglob("*") if p.parent.name == "_done")
                forget(path)

            patch.setattr(workstore, "forget", markers_then_forget)
            built = Path(on_cluster(sample_config(), str(root / "remote"), "s3://remote/work"))
        ran_here = sorted({p.parent.parent.name for p in flow_markers})
        yield {"local": local, "remote": built, "reach": reach, "ran_here": ran_here}


def test_the_workers_cannot_reach_the_flows_loopback(remote):
    assert remote["reach"] == {"flow": True, "workers": [False, False]}


def test_a_cluster_by_address_gives_the_local_release_byte_for_byte(remote):
    local, theirs = files(remote["local"]), files(remote["remote"])
    assert len(local) > 20
    assert sorted(theirs) == sorted(local)
    assert [f for f in local if local[f] != theirs[f]] == []


def test_only_the_mirror_queries_ran_in_the_flows_process(remote):
    # link and facts shards were written through the flow's own mirror; sources and questions by the workers
    assert remote["ran_here"] == ["facts", "link"]
