"""Run inside the Label Studio virtual environment: drive a Label Studio server through label-studio-sdk.

Usage: python labelstudio_client.py URL TOKEN WORKDIR IMAGES_ROOT. WORKDIR holds label_config.xml,
tasks.json and plan.json ({item_id: [annotation results]}). Creates a project with the config,
connects the local images folder, imports the tasks with their predictions, writes one annotation
per planned item as an annotator would, exports the project as Label Studio JSON to
WORKDIR/export.json and writes WORKDIR/session.json (task ids, the first task's served image).
"""

import json
import sys
from pathlib import Path

import httpx
from label_studio_sdk import LabelStudio


def main(url: str, token: str, work: Path, images: Path) -> None:
    client = LabelStudio(base_url=url, api_key=token)
    config = (work / "label_config.xml").read_text(encoding="utf-8")
    tasks = json.loads((work / "tasks.json").read_text(encoding="utf-8"))
    plan = json.loads((work / "plan.json").read_text(encoding="utf-8"))
    project = client.projects.create(title="reasonvqa batch", label_config=config)
    client.import_storage.local.create(project=project.id, path=str(images), use_blob_urls=False, title="images")
    client.projects.import_tasks(id=project.id, request=tasks)
    stored = {t.data["reasonvqa"]["item_id"]: t for t in client.tasks.list(project=project.id)}
    first = stored[sorted(stored)[0]]
    served = httpx.get(url + first.data["image"], headers={"Authorization": f"Token {token}"}, timeout=60)
    for item_id, results in sorted(plan.items()):
        client.annotations.create(id=stored[item_id].id, result=results, lead_time=5.0)
    exported = b"".join(client.projects.exports.download_sync(id=project.id, export_type="JSON"))
    (work / "export.json").write_bytes(exported)
    session = {"task_ids": {k: t.id for k, t in stored.items()}, "image_item": sorted(stored)[0],
               "image_status": served.status_code, "image_bytes": served.content.hex() if served.status_code == 200 else None,
               "predictions": {k: len(t.predictions or []) for k, t in stored.items()}}
    (work / "session.json").write_text(json.dumps(session), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
