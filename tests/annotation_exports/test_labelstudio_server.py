"""The real Label Studio round trip: a server on 127.0.0.1, our config and tasks, annotations over its API.

Label Studio runs from its own cached virtual environment (tool_venvs.py): created with pip on
the first run (minutes), reused afterwards, with a migrated database made once (tests/tool_cache.py).
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from reasonvqa import masks
from reasonvqa.annotation_exports.roundtrip import export_batch, import_decisions
from reasonvqa.flows.resplit import resplit
from reasonvqa.tasks.release.reader import record_tables
from reasonvqa.tasks.release.reader import read_release
from reasonvqa.tasks.release.verify import verify_release
from tests.annotation_exports.fixtures import image_rows, masks_by_region, write_fixture_release
from tests.annotation_exports.tool_venvs import LABEL_STUDIO, tool_python
from tests.tool_cache import label_studio_database

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def label_studio_python():
    return tool_python(LABEL_STUDIO)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory, label_studio_python):
    """A Label Studio server on 127.0.0.1 with a temporary data folder; yields (url, token, images root, python)."""
    python = label_studio_python
    root = tmp_path_factory.mktemp("label-studio")
    images = root / "files" / "images"  # Label Studio serves files below a subfolder of its document root
    for row in image_rows():
        path = images / row["file_path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (row["width"], row["height"]), (90, 120, 150)).save(path, format="JPEG")
    # every migration already applied (tests/tool_cache.py): the start only checks them
    (root / "data").mkdir()
    shutil.copyfile(label_studio_database(python), root / "data" / "label_studio.sqlite3")
    port, token = free_port(), secrets.token_hex(20)
    env = {**os.environ, "HOME": str(root), "LABEL_STUDIO_BASE_DATA_DIR": str(root / "data"),
           "LOCAL_FILES_SERVING_ENABLED": "true", "LOCAL_FILES_DOCUMENT_ROOT": str(images.parent),
           "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true", "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(images.parent),
           "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "COLLECT_ANALYTICS": "false"}
    command = [str(python.parent / "label-studio"), "start", "--no-browser", "--internal-host", "127.0.0.1",
               "--port", str(port), "--data-dir", str(root / "data"), "--username", "annotator@example.com",
               "--password", secrets.token_hex(8), "--user-token", token, "--enable-legacy-api-token"]
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600  # ~30 s on an idle machine; minutes when it is busy
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"label-studio exited with {server.returncode}:\n{(root / 'server.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).json().get("status") == "UP":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"label-studio not healthy in 600 s:\n{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(1)
        yield url, token, images, python
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def choice(key: str, value: str, name: str = "region_decision") -> dict:
    return {"id": key, "from_name": name, "to_name": "image", "type": "choices", "value": {"choices": [value]}}


def test_label_studio_round_trip_reaches_the_next_release(label_studio, tmp_path):
    url, token, images, python = label_studio
    release = write_fixture_release(tmp_path / "out")
    store = tmp_path / "store"
    work = tmp_path / "batch"
    export_batch(release, work, "labelstudio", 10, store=store, url_prefix="/data/local-files/?d=images/")
    tasks = {t["data"]["reasonvqa"]["item_id"]: t for t in json.loads((work / "tasks.json").read_text())}

    def predicted(item: str) -> list[dict]:
        return json.loads(json.dumps(tasks[item]["predictions"][0]["result"]))

    # q1: accept g1, reject g2, redraw g3's brush mask (a new region id, as the editor gives), judge it correct
    keys = {v: k for k, v in tasks["q1"]["data"]["reasonvqa"]["regions"].items()}
    q1 = predicted("q1")
    redrawn = masks_by_region()["sa1b:1/g3"].copy()
    redrawn[25:30, 30:40] = 1  # grown to the bottom-right corner
    for r in q1:
        if r["id"] == keys["sa1b:1/g3"]:
            r["id"] = "Xk9_p2Lm3q"
            r["value"]["rle"] = masks.labelstudio_encode(redrawn)
    q1 += [choice(keys["sa1b:1/g1"], "accept"), choice(keys["sa1b:1/g2"], "reject"), choice("qd", "correct", "question_decision")]
    q4 = predicted("q4")
    q4[-1]["value"]["text"] = ["Ulm"]  # the corrected answer, one of its choices
    plan = {"q1": q1, "q4": q4 + [choice("r1", "reject")], "q6": [choice("qd", "wrong", "question_decision")]}
    (work / "plan.json").write_text(json.dumps(plan))

    done = subprocess.run([str(python), str(Path(__file__).parent / "labelstudio_client.py"), url, token, str(work),
                           str(images)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    session = json.loads((work / "session.json").read_text())
    assert sorted(session["task_ids"]) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert set(session["predictions"].values()) == {1}
    image_file = images / next(r["file_path"] for r in image_rows() if r["image_id"] == tasks[session["image_item"]]["data"]["reasonvqa"]["image_id"])
    assert session["image_status"] == 200 and bytes.fromhex(session["image_bytes"]) == image_file.read_bytes()

    report = import_decisions(work / "export.json", "labelstudio", store=store)
    assert report.rejects == []
    got = sorted((d["region_id"] or d["question_id"], d["action"]) for d in report.decisions)
    assert got == sorted([("sa1b:1/g1", "accept"), ("sa1b:1/g2", "reject"), ("sa1b:1/g3", "edit"), ("q1", "correct"),
                          ("q4", "edit_answer"), ("nuscenes:cam1/g2", "reject"), ("q6", "wrong")])
    assert {d["annotator"] for d in report.decisions} == {"labelstudio:1"}

    nxt = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    assert verify_release(nxt) == []
    loaded = read_release(nxt)
    pool = {q["question_id"]: q for q in loaded.pool.to_pylist()}
    assert "q6" not in pool and pool["q4"]["answer"] == "Ulm" and pool["q4"]["choices"] == ["Berlin", "Bonn", "Kiel", "Ulm"]
    assert pool["q1"]["answer"] == "Paris"
    regions = {r["region_id"]: r for r in record_tables(nxt, loaded.manifest)["regions"].to_pylist()}
    assert "sa1b:1/g2" not in regions and "nuscenes:cam1/g2" not in regions
    assert np.array_equal(masks.coco_decode(regions["sa1b:1/g3"]["mask"]), redrawn)  # pixel for pixel
    assert np.array_equal(masks.coco_decode(regions["sa1b:1/g1"]["mask"]), masks_by_region()["sa1b:1/g1"])
    assert loaded.manifest["annotations"]["decisions"] == sorted(d["decision_id"] for d in report.decisions)


def test_brush_codec_is_byte_identical_to_label_studio_sdk(label_studio_python, tmp_path):
    """Our vectorized brush RLE against label-studio-sdk's converter, both ways, on seeded masks."""
    rng = np.random.default_rng(11)
    cases = [np.ones((300, 300), np.uint8), np.zeros((5, 7), np.uint8), np.ones((1, 1), np.uint8)]
    for _ in range(40):
        h, w = (int(v) for v in rng.integers(1, 70, 2))
        cases.append((rng.random((h, w)) > rng.choice([0.05, 0.5, 0.97])).astype(np.uint8))
    payload = [{"mask": m.tolist(), "ours": masks.labelstudio_encode(m)} for m in cases]
    (tmp_path / "cases.json").write_text(json.dumps(payload))
    script = ("import json, sys, numpy as np\n"
              "from label_studio_sdk.converter.brush import mask2rle, decode_rle\n"
              "cases = json.load(open(sys.argv[1]))\n"
              "out = [{'sdk': [int(v) for v in mask2rle(np.array(c['mask'], np.uint8) * 255)],\n"
              "        'decoded': decode_rle(c['ours']).tolist()} for c in cases]\n"
              "json.dump(out, open(sys.argv[2], 'w'))\n")
    done = subprocess.run([str(label_studio_python), "-c", script, str(tmp_path / "cases.json"), str(tmp_path / "sdk.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for case, sdk in zip(payload, json.loads((tmp_path / "sdk.json").read_text())):
        assert case["ours"] == sdk["sdk"]
        m = np.array(case["mask"], np.uint8)
        assert np.array_equal(np.array(sdk["decoded"], np.uint8).reshape(*m.shape, 4)[:, :, 3] > 0, m > 0)
        assert np.array_equal(masks.labelstudio_decode(sdk["sdk"], m.shape[1], m.shape[0]), m)
