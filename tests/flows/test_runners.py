"""Which tasks may query a loopback endpoint from where (flows/runners.py)."""

from prefect.task_runners import ThreadPoolTaskRunner

from reasonvqa.flows.runners import make_task_runner, may_run_elsewhere, runner_for_endpoint


def test_only_a_cluster_given_by_address_may_run_elsewhere():
    assert may_run_elsewhere(make_task_runner(dask_address="tcp://10.0.0.2:8786"))
    assert not may_run_elsewhere(make_task_runner(dask_workers=2))  # a LocalCluster the runner starts itself
    assert not may_run_elsewhere(make_task_runner())


def test_a_loopback_endpoint_on_a_remote_cluster_gets_a_thread_pool_in_this_process():
    remote = make_task_runner(dask_address="tcp://10.0.0.2:8786")
    with runner_for_endpoint(remote, "http://127.0.0.1:7878/query") as local:
        assert isinstance(local, ThreadPoolTaskRunner) and local._started
    for runner, endpoint in ((remote, "https://query.wikidata.org/sparql"),
                             (make_task_runner(dask_workers=2), "http://127.0.0.1:7878/query")):
        with runner_for_endpoint(runner, endpoint) as local:
            assert local is None
