"""The real Label Studio round trip: a server on 127.0.0.1, our config and tasks, annotations over its API.

Label Studio runs from its own cached virtual environment (tool_venvs.py): created with pip on
the first run (minutes), reused afterwards.
"""

import json
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from reasonvqa.annotation_exports import masks
from reasonvqa.annotation_exports.apply import record_tables
from reasonvqa.annotation_exports.roundtrip import export_batch, import_decisions
from reasonvqa.flows.resplit import resplit
from reasonvqa.tasks.release.reader import read_release
from reasonvqa.tasks.release.verify import verify_release
from tests.annotation_exports.fixtures import image_rows, masks_by_region, write_fixture_release
from tests.annotation_exports.tool_venvs import LABEL_STUDIO, tool_python

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory):
    """A Label Studio server on 127.0.0.1 with a temporary data folder; yields (url, token, images root)."""
    python = tool_python(LABEL_STUDIO)
    root = tmp_path_factory.mktemp("label-studio")
    images = root / "images"
    for row in image_rows():
        path = images / row["file_path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (row["width"], row["height"]), (90, 120, 150)).save(path, format="JPEG")
    port, token = free_port(), secrets.token_hex(20)
    env = {**os.environ, "HOME": str(root), "LABEL_STUDIO_BASE_DATA_DIR": str(root / "data"),
           "LOCAL_FILES_SERVING_ENABLED": "true", "LOCAL_FILES_DOCUMENT_ROOT": str(images),
           "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true", "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(images),
           "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "COLLECT_ANALYTICS": "false"}
    command = [str(python.parent / "label-studio"), "start", "--no-browser", "--internal-host", "127.0.0.1",
               "--port", str(port), "--data-dir", str(root / "data"), "--username", "annotator@example.com",
               "--password", secrets.token_hex(8), "--user-token", token, "--enable-legacy-api-token"]
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"label-studio exited with {server.returncode}:\n{(root / 'server.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).json().get("status") == "UP":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"label-studio not healthy in 300 s:\n{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(1)
        yield url, token, images
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_label_studio_round_trip_reaches_the_next_release(label_studio, tmp_path):
    from label_studio_sdk import LabelStudio

    url, token, images = label_studio
    release = write_fixture_release(tmp_path / "out")
    store = tmp_path / "store"
    export_batch(release, tmp_path / "batch", "labelstudio", 10, store=store)
    config = (tmp_path / "batch" / "label_config.xml").read_text()
    tasks = json.loads((tmp_path / "batch" / "tasks.json").read_text())

    client = LabelStudio(base_url=url, api_key=token)
    project = client.projects.create(title="reasonvqa batch", label_config=config)
    client.import_storage.local.create(project=project.id, path=str(images), use_blob_urls=False, title="images")
    client.projects.import_tasks(id=project.id, request=tasks)
    ids = {t.data["reasonvqa"]["item_id"]: t for t in client.tasks.list(project=project.id)}
    assert sorted(ids) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    served = httpx.get(url + ids["q1"].data["image"], headers={"Authorization": f"Token {token}"}, timeout=30)
    assert served.status_code == 200 and served.content == (images / "sa1b" / "1.jpg").read_bytes()

    def predicted(item: str) -> list[dict]:
        return json.loads(json.dumps(next(t for t in tasks if t["data"]["reasonvqa"]["item_id"] == item)["predictions"][0]["result"]))

    def choice(key: str, value: str, name: str = "region_decision") -> dict:
        return {"id": key, "from_name": name, "to_name": "image", "type": "choices", "value": {"choices": [value]}}

    # q1: accept g1, reject g2, redraw g3's brush mask (a new region id, as the editor gives), keep the answer
    keys = {v: k for k, v in ids["q1"].data["reasonvqa"]["regions"].items()}
    q1 = predicted("q1")
    redrawn = masks_by_region()["sa1b:1/g3"].copy()
    redrawn[25:30, 30:40] = 1  # grown to the bottom-right corner
    for r in q1:
        if r["id"] == keys["sa1b:1/g3"]:
            r["id"] = "Xk9_p2Lm3q"
            r["value"]["rle"] = masks.labelstudio_encode(redrawn)
    q1 += [choice(keys["sa1b:1/g1"], "accept"), choice(keys["sa1b:1/g2"], "reject"), choice("qd", "correct", "question_decision")]
    client.annotations.create(id=ids["q1"].id, result=q1, lead_time=12.5)
    q4 = predicted("q4")
    q4[-1]["value"]["text"] = ["Hamburg"]  # corrected answer
    client.annotations.create(id=ids["q4"].id, result=q4 + [choice("r1", "reject")], lead_time=8.0)
    client.annotations.create(id=ids["q6"].id, result=[choice("qd", "wrong", "question_decision")], lead_time=3.0)

    export = tmp_path / "label_studio_export.json"
    export.write_bytes(b"".join(client.projects.exports.download_sync(id=project.id, export_type="JSON")))
    report = import_decisions(export, "labelstudio", store=store)
    assert report.rejects == []
    got = sorted((d["region_id"] or d["question_id"], d["action"]) for d in report.decisions)
    assert got == sorted([("sa1b:1/g1", "accept"), ("sa1b:1/g2", "reject"), ("sa1b:1/g3", "edit"), ("q1", "correct"),
                          ("q4", "edit_answer"), ("nuscenes:cam1/g2", "reject"), ("q6", "wrong")])
    assert all(d["annotator"].startswith("labelstudio:") for d in report.decisions)

    nxt = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    assert verify_release(nxt) == []
    loaded = read_release(nxt)
    pool = {q["question_id"]: q for q in loaded.pool.to_pylist()}
    assert "q6" not in pool and pool["q4"]["answer"] == "Hamburg" and "Hamburg" in pool["q4"]["choices"]
    regions = {r["region_id"]: r for r in record_tables(nxt, loaded.manifest)["regions"].to_pylist()}
    assert "sa1b:1/g2" not in regions and "nuscenes:cam1/g2" not in regions
    assert np.array_equal(masks.coco_decode(regions["sa1b:1/g3"]["mask"]), redrawn)  # pixel for pixel
    assert np.array_equal(masks.coco_decode(regions["sa1b:1/g1"]["mask"]), masks_by_region()["sa1b:1/g1"])
    assert loaded.manifest["annotations"]["decisions"] == sorted(d["decision_id"] for d in report.decisions)
