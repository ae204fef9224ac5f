#!/usr/bin/env bash
# Build the image, run its default command (`reasonvqa build --sample`) in a container with no
# network, verify the release there, and require the same content hash as a build on the host
# (`make sample`). Needs a running Docker engine. Usage: docker/smoke.sh [extra docker build args]
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${TAG:-reasonvqa:smoke}
docker build "$@" -t "$tag" .
out=$(mktemp -d)
chmod 777 "$out"  # the image runs as uid 10001
docker run --rm --network none -v "$out:/home/reasonvqa/out" "$tag"
docker run --rm --network none -v "$out:/home/reasonvqa/out" "$tag" verify out/reasonvqa-sample/0.1.0
host=out/reasonvqa-sample/0.1.0/manifest.json
[ -f "$host" ] || make sample
python3 - "$host" "$out/reasonvqa-sample/0.1.0/manifest.json" <<'PY'
import json
import sys

host, image = (json.load(open(path))["content_hash"] for path in sys.argv[1:])
print(f"host  {host}\nimage {image}")
sys.exit(0 if host == image else "the image's release differs from the host's")
PY
