"""Benchmark: the build's hand-over of the question pool to the partitioned release path.

    python -m benchmarks.bench_build_handover [--questions 1000000] [--shard-rows 35000] [--mode on|off]
        [--ways merged files] [--pythons OLD/.venv/bin/python .venv/bin/python] [--repeat 1]

A synthetic pool is written as question shard files (``questions/part-*.parquet``, about one
shard of 5,000 images each) in a work folder. Each way then runs in a fresh child process with
``partitioned.mode: on``, reporting peak RSS (ru_maxrss) once the pool is handed over and at the
end, and CPU seconds:

- ``merged`` (before this change): ``merge_kinds`` of all shards read into one table, then
  ``finish_release``, which writes it to ``<work>/partitioned/input`` and runs ``plan_partitioned``;
- ``files``: ``merged_pool`` hands the shard files over as they are (``PoolFiles``), then
  ``finish_release``.

Both must write the same release bytes (checked by a digest of every file).

``--mode off`` runs the in-memory path instead (the build's default below ``partitioned.min_rows``):
``merged`` is then ``merge_kinds`` + ``plan_release``. ``--pythons`` runs each way under several
interpreters, alternating (e.g. a checkout of the previous commit's venv beside this one's: the child
imports whatever ``reasonvqa`` that interpreter has), and asserts their releases are the same bytes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import hashlib, json, resource, sys, time
from pathlib import Path
from reasonvqa import schemas
from reasonvqa.config import sample_config
from reasonvqa.flows import build_reasonvqa as flow
from reasonvqa.stage import read_table
from reasonvqa.tasks.balance.config import PartitionConfig
way, root, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
start = time.perf_counter()
config = sample_config()
config.partitioned = PartitionConfig(mode=mode)
work, report = root / f"work-{way}", {}
work.mkdir()
(work / "questions").symlink_to(root / "questions")
if way == "merged":
    pool = flow.merge_kinds(read_table(work / "questions", "questions", schemas.QUESTIONS), [], config, report)
else:
    pool = flow.merged_pool(work / "questions", [], config, work, report)
merged_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
handed = [pool]
del pool
release = flow.finish_release(handed.pop(), config, root / f"out-{way}", work, {"source:vg": "sha256:x"}, report, False)
wall = time.perf_counter() - start
digest = hashlib.sha256()
for path in sorted(p for p in release.rglob("*") if p.is_file()):
    digest.update(path.relative_to(release).as_posix().encode() + path.read_bytes())
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"way": way, "wall_s": round(wall, 1), "peak_rss_mb_at_handover": merged_mb, "peak_rss_mb": round(usage.ru_maxrss / 1024), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                  "release_sha256": digest.hexdigest()[:16]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1_000_000)
    parser.add_argument("--shard-rows", type=int, default=35_000)
    parser.add_argument("--mode", choices=("on", "off"), default="on", help="partitioned.mode of the release")
    parser.add_argument("--ways", nargs="+", choices=("merged", "files"), default=["merged", "files"])
    parser.add_argument("--pythons", nargs="+", default=[sys.executable])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    import pyarrow.parquet as pq

    from tests.tasks.balance.synthetic import synthetic_pool

    with tempfile.TemporaryDirectory(prefix="bench-handover-") as tmp:
        root = Path(tmp)
        folder = root / "questions" / "questions"
        folder.mkdir(parents=True)
        pool = synthetic_pool(args.questions, max(args.questions // 7, 1), 180, seed=5)
        for k, start in enumerate(range(0, pool.num_rows, args.shard_rows)):
            pq.write_table(pool.slice(start, args.shard_rows), folder / f"part-{k:05d}.parquet", compression="zstd")
        print(f"{args.questions} questions in {k + 1} shard files")
        del pool
        digests = set()
        for rep in range(args.repeat):
            for python in args.pythons if rep % 2 == 0 else args.pythons[::-1]:
                for way in args.ways:
                    for leftover in (root / f"work-{way}", root / f"out-{way}"):
                        shutil.rmtree(leftover, ignore_errors=True)
                    out = subprocess.run([python, "-c", CHILD, way, str(root), args.mode], capture_output=True, text=True)
                    if out.returncode:
                        raise SystemExit(out.stderr[-3000:])
                    result = json.loads(out.stdout.strip().splitlines()[-1])
                    digests.add(result["release_sha256"])
                    print(f"{python} {json.dumps(result)}", flush=True)
        if len(digests) != 1:
            raise SystemExit(f"the releases differ: {sorted(digests)}")


if __name__ == "__main__":
    main()
