"""Benchmark: the whole sample build end to end, as a user runs it (``reasonvqa build --sample``).

    python -m benchmarks.bench_end_to_end [--repeats 3] [--baseline OTHER_CHECKOUT] [--json FILE]

Each run is a fresh interpreter running the CLI into a new output folder (the Prefect API it starts,
the embedded knowledge mirror, every stage and the release write included), measured by
benchmarks/measure.py: wall and CPU seconds and the peak RSS of the process tree, medians of
``--repeats`` runs, and the load average. With ``--baseline`` the same build of another checkout (its
``.venv``) alternates with this one's; the release's content hash of each side is printed, so a change
that should not alter the release can be seen not to.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from benchmarks import measure


def build_once(out: Path) -> dict:
    """The child's own figures: where the release went and its content hash (from its manifest)."""
    manifest = next(out.glob("*/*/manifest.json"))
    return {"release": str(manifest.parent.relative_to(out)), "content_hash": json.loads(manifest.read_text())["content_hash"]}


def main() -> None:
    args = measure.parser(__doc__).parse_args()
    sides = [measure.side(None, "this checkout")] + ([measure.side(args.baseline, "baseline")] if args.baseline else [])
    load_before = measure.load_average()
    runs, hashes = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-end-to-end-") as scratch:
        for repeat in range(args.repeats):
            for side in sides if repeat % 2 == 0 else sides[::-1]:
                out = Path(scratch) / f"{side.label.replace(' ', '-')}-{repeat}"
                cli = Path(side.python).parent / "reasonvqa"  # the console script beside that interpreter
                run = measure.run_once([str(cli), "build", "--sample", "--out", str(out)], cwd=side.cwd, label=side.label)
                runs.append(run)
                hashes.setdefault(side.label, set()).add(build_once(out)["content_hash"])
                shutil.rmtree(out, ignore_errors=True)
    extra = {"content_hash": {label: sorted(h) for label, h in hashes.items()}}
    result = measure.report("reasonvqa build --sample (fresh interpreter each)", runs, load_before, extra)
    for label, h in extra["content_hash"].items():
        print(f"{label}: release content {', '.join(h)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
