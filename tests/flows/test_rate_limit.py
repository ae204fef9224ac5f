"""The knowledge stage takes a slot of the endpoint's Prefect rate limit per query, in strict mode."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL

from reasonvqa.flows.build_reasonvqa import RUN_REPORT, build_reasonvqa
from reasonvqa.flows.config import sample_config
from reasonvqa.knowledge.mirror import serve_mirror
from reasonvqa.knowledge.rate_limit import RateLimitMissing, rate_limit_name
from reasonvqa.tasks.release.verify import verify_release

pytestmark = pytest.mark.integration


def test_required_limit_is_refused_when_missing_and_used_once_created(tmp_path):
    config = sample_config()
    with serve_mirror(config.knowledge.mirror_entities, tmp_path / "mirror") as endpoint:
        config.knowledge.endpoint, config.knowledge.rate_limit = endpoint, "required"
        name = rate_limit_name(endpoint)
        with pytest.raises(RateLimitMissing, match=f"prefect gcl create {name} --limit 1 --slot-decay-per-second 1"):
            build_reasonvqa(config, str(tmp_path / "refused"))
        assert not (tmp_path / "refused" / "reasonvqa-sample").exists()

        # the documented command; a slow decay keeps the slots taken visible after the build
        env = dict(os.environ, PREFECT_API_URL=PREFECT_API_URL.value())
        subprocess.run([sys.executable, "-m", "prefect", "gcl", "create", name, "--limit", "10000",
                        "--slot-decay-per-second", "0.01"], env=env, check=True, capture_output=True, timeout=120)
        release = Path(build_reasonvqa(config, str(tmp_path / "out")))
    assert verify_release(release) == []
    report = next((tmp_path / "out" / ".work").glob(f"*/{RUN_REPORT}"))
    requests = sum(json.loads(report.read_text())[stage]["requests"] for stage in ("link", "facts"))
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(name)
    assert requests > 0
    assert requests - 2 <= limit.active_slots <= requests  # one slot per query sent, a little decayed
