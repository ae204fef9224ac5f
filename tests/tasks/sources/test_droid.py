import json
import shutil

import pytest

from reasonvqa import sources
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.tasks.sources.droid import DroidConfig, DroidSource, read_instructions
from reasonvqa.tasks.sources.droid_trajectory import TrajectoryError, read_trajectory
from reasonvqa.tasks.sources.video_keyframes import VideoDecodeError, sample_keyframes

from tests.tasks.sources.conftest import rejects_by_reason, rows
from tests.tasks.sources.droid_fixtures import SERIALS, write_episode, write_mp4, write_trajectory
from tests.tasks.sources.source_runner import run_source, table_counts

UUID = "AUTOLab+5d05c5aa+2023-07-07-09h-42m-23s"
EPISODE = "AUTOLab/success/2023-07-07/Fri_Jul__7_09:42:23_2023"


def config(path, **options) -> DroidConfig:
    return DroidConfig(kind="droid", path=path, **options)


def test_registered_under_its_kind():
    assert isinstance(sources.get("droid"), DroidSource)


def test_keyframes_at_the_configured_rate(tmp_path):
    video = write_mp4(tmp_path / "v.mp4", seconds=3, fps=15)
    keyframes = sample_keyframes(video, 1.0)
    assert [(k.index, k.frame_number) for k in keyframes] == [(0, 0), (1, 15), (2, 30)]
    assert [round(k.seconds, 3) for k in keyframes] == [0.0, 1.0, 2.0]
    assert (keyframes[0].width, keyframes[0].height) == (64, 48)
    assert len(sample_keyframes(video, 2.0)) == 6
    assert len(sample_keyframes(video, 15.0)) == 45
    assert len(sample_keyframes(video, 1.0, limit=2)) == 2


def test_episode_keyframes_with_language_context(tmp_path):
    write_episode(tmp_path / EPISODE, UUID)
    (tmp_path / "annotations.json").write_text(json.dumps({UUID: {
        "language_instruction1": "Put the marker in the cup", "language_instruction2": "put the marker in the cup",
        "language_instruction3": ""}}))
    stage = tmp_path / "stage"
    stats = run_source(DroidSource(), config(tmp_path, annotations_file="annotations.json"), stage)
    assert table_counts(stage, ("images",)) == {"images": 9, "rejected": {}, "shards": 1}
    images = rows(stage, "images")
    first = images[0]
    assert first["image_id"] == f"droid:{UUID}/ext1/0"
    assert first["file_path"] == f"{EPISODE}/recordings/MP4/{SERIALS['ext1']}.mp4#t=0.000000"
    assert (first["width"], first["height"], first["group_id"]) == (64, 48, UUID)
    assert (first["visual_domain"], first["license"]) == ("robotics", "CC BY 4.0")
    assert first["context"] == "put the marker in the cup\nPut the marker in the cup"
    assert [r["image_id"].split("/", 1)[1] for r in images] == [f"{c}/{k}" for c in ("ext1", "ext2", "wrist") for k in range(3)]
    assert stats[0]["episode"] == EPISODE


def test_cameras_rate_and_shards(tmp_path):
    write_episode(tmp_path / EPISODE, UUID)
    stage = tmp_path / "stage"
    stats = run_source(DroidSource(), config(tmp_path, cameras=["wrist"], keyframe_rate_hz=2.0), stage, shard_size=4)
    assert [s["rows_out"] for s in stats] == [4, 2]
    assert {r["image_id"].split("/")[1] for r in rows(stage, "images")} == {"wrist"}


def test_bad_episodes_are_rejected_with_reasons(tmp_path):
    good = write_episode(tmp_path / "lab/success/a", "lab+1+a", cameras=("ext1",))
    no_meta = tmp_path / "lab/success/b"
    write_mp4(no_meta / "recordings" / "MP4" / "1.mp4")
    (no_meta / "trajectory.h5").write_bytes(b"\x89HDF\r\n\x1a\n")
    bad_meta = tmp_path / "lab/success/c"
    bad_meta.mkdir(parents=True)
    (bad_meta / "metadata_lab+1+c.json").write_text("{not json")
    broken = write_episode(tmp_path / "lab/success/d", "lab+1+d", cameras=("ext1", "ext2"))
    (broken / "recordings/MP4" / f"{SERIALS['ext1']}.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 garbage")
    ext2 = broken / "recordings/MP4" / f"{SERIALS['ext2']}.mp4"
    ext2.write_bytes(ext2.read_bytes()[: ext2.stat().st_size // 2])  # cut: no moov atom at the end
    stage = tmp_path / "stage"
    stats = run_source(DroidSource(), config(tmp_path), stage)
    assert table_counts(stage, ("images",)) == {
        "images": 3, "shards": 4,
        "rejected": {"droid_metadata_invalid": 1, "droid_metadata_missing": 1, "droid_video_missing": 3,
                     "droid_video_undecodable": 2},
    }
    found = rejects_by_reason(stage)
    assert found["droid_metadata_missing"] == ["lab/success/b/"]
    assert found["droid_metadata_invalid"] == ["lab/success/c/metadata_lab+1+c.json"]
    assert found["droid_video_undecodable"] == [f"lab/success/d/recordings/MP4/{SERIALS['ext1']}.mp4",
                                                f"lab/success/d/recordings/MP4/{SERIALS['ext2']}.mp4"]
    assert found["droid_video_missing"] == ["lab/success/a/metadata_lab+1+a.json#ext2",
                                            "lab/success/a/metadata_lab+1+a.json#wrist",
                                            "lab/success/d/metadata_lab+1+d.json#wrist"]
    assert good.exists()
    for s in stats:
        assert s["rows_in"] == s["rows_out"] + sum(s["rejected"].values())


def test_undecodable_video_raises_with_the_file_name(tmp_path):
    path = tmp_path / "x.mp4"
    path.write_bytes(b"not a video at all")
    with pytest.raises(VideoDecodeError, match="x.mp4"):
        sample_keyframes(path, 1.0)


def test_instruction_file_errors(tmp_path):
    (tmp_path / "a.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="a.json: expected an object"):
        read_instructions(tmp_path / "a.json")
    with pytest.raises(FileNotFoundError, match="annotations file not found"):
        DroidSource().check(config(tmp_path, annotations_file="missing.json"))


def test_bundled_sample_episode(tmp_path):
    shutil.copytree(SAMPLE_DIR / "droid", tmp_path / "droid")
    stage = tmp_path / "stage"
    run_source(DroidSource(), config(tmp_path / "droid"), stage)
    counts = table_counts(stage, ("images",))
    assert counts["images"] == 6 and counts["rejected"] == {}


def test_read_trajectory_length_task_and_camera_roles(tmp_path):
    path = write_trajectory(tmp_path, length=20, task="  wipe the table ")
    trajectory = read_trajectory(path)
    assert trajectory.length == 20
    assert trajectory.current_task == "wipe the table"
    # wrist by camera type 0; the two external cameras sorted by serial: 24400334 < 26405488
    assert trajectory.cameras == {"wrist": "18026681", "ext1": "24400334", "ext2": "26405488"}


def test_trajectory_gives_missing_serials_and_task_and_bounds_the_keyframes(tmp_path):
    folder = write_episode(tmp_path / EPISODE, UUID)  # 3 s at 15 fps: keyframes at frames 0, 15, 30
    meta_path = folder / f"metadata_{UUID}.json"
    meta = json.loads(meta_path.read_text())
    for camera in ("ext1", "ext2", "wrist"):
        del meta[f"{camera}_cam_serial"], meta[f"{camera}_mp4_path"]
    del meta["current_task"]
    meta_path.write_text(json.dumps(meta))
    write_trajectory(folder, length=20, task="wipe the table")
    stage = tmp_path / "stage"
    stats = run_source(DroidSource(), config(tmp_path), stage)
    assert table_counts(stage, ("images",)) == {"images": 6, "rejected": {"droid_keyframe_past_trajectory": 3},
                                                "shards": 1}
    images = rows(stage, "images")
    assert [r["image_id"].split("/", 1)[1] for r in images] == [f"{c}/{k}" for c in ("ext1", "ext2", "wrist") for k in (0, 1)]
    assert images[0]["file_path"] == f"{EPISODE}/recordings/MP4/{SERIALS['ext1']}.mp4#t=0.000000"
    assert {r["context"] for r in images} == {"wipe the table"}
    assert rejects_by_reason(stage)["droid_keyframe_past_trajectory"] == sorted(
        f"{EPISODE}/recordings/MP4/{serial}.mp4#frame=30" for serial in SERIALS.values())
    assert stats[0]["rows_in"] == 9


def test_incomplete_or_damaged_trajectory_refuses_the_episode(tmp_path):
    import h5py

    incomplete = write_episode(tmp_path / "lab/success/a", "lab+1+a", cameras=("ext1",))
    with h5py.File(incomplete / "trajectory.h5", "w") as h5:  # recording aborted before the first step
        h5.attrs["current_task"] = "open the drawer"
    damaged = write_episode(tmp_path / "lab/success/b", "lab+1+b", cameras=("ext1",))
    write_trajectory(damaged, length=45)
    data = (damaged / "trajectory.h5").read_bytes()
    (damaged / "trajectory.h5").write_bytes(data[:1000])
    stage = tmp_path / "stage"
    stats = run_source(DroidSource(), config(tmp_path, cameras=["ext1"]), stage)
    assert table_counts(stage, ("images",)) == {"images": 0, "rejected": {"droid_trajectory_invalid": 2}, "shards": 2}
    assert rejects_by_reason(stage)["droid_trajectory_invalid"] == ["lab/success/a/trajectory.h5",
                                                                    "lab/success/b/trajectory.h5"]
    with pytest.raises(TrajectoryError, match="incomplete recording"):
        read_trajectory(incomplete / "trajectory.h5")
    for s in stats:
        assert s["rows_in"] == s["rows_out"] + sum(s["rejected"].values())
