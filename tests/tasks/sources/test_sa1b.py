import io
import json
import math
import shutil
import tarfile

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from reasonvqa import sources
from reasonvqa.tasks.sources.sa1b import Sa1bConfig, Sa1bSource, jpeg_size, missing_tars, read_domain_table
from reasonvqa.tasks.sources.sa1b_links import LinksFileError, read_links

from tests.tasks.sources.conftest import rejects_by_reason, rows
from tests.tasks.sources.sa1b_fixtures import (
    SAMPLE_TAR, add_file, add_special, image_pair, jpeg_bytes, real_annotation_doc, write_tar,
)
from tests.tasks.sources.source_runner import run_source, table_counts


def config(path, **options) -> Sa1bConfig:
    return Sa1bConfig(kind="sa1b", path=path, **options)


def test_registered_under_its_kind():
    assert isinstance(sources.get("sa1b"), Sa1bSource)
    assert sources.parse_config({"kind": "sa1b", "path": "x", "domain": "indoor"}).domain == "indoor"


def test_real_excerpt_regions_keep_the_json_values(tmp_path):
    shutil.copy(SAMPLE_TAR, tmp_path / SAMPLE_TAR.name)
    stage = tmp_path / "stage"
    stats = run_source(Sa1bSource(), config(tmp_path), stage)
    assert table_counts(stage) == {"images": 1, "regions": 12, "objects": 0, "rejected": {}, "shards": 1}
    assert stats[0]["rows_in"] == 13 and stats[0]["tar"] == "sa_000020.tar"
    image = rows(stage, "images")[0]
    assert (image["image_id"], image["width"], image["height"]) == ("sa1b:226381", 2000, 1500)
    assert image["file_path"] == "sa_000020.tar/sa_226381.jpg"
    assert image["visual_domain"] == "indoor/outdoor" and image["license"].startswith("SA-1B")
    first = rows(stage, "regions")[0]
    assert first["region_id"] == "sa1b:226381/g333521560"
    assert (first["x"], first["y"], first["w"], first["h"], first["area"]) == (861.0, 525.0, 71.0, 149.0, 6206.0)
    assert first["predicted_iou"] == pytest.approx(0.9783458709716797)
    assert first["stability_score"] == pytest.approx(0.9728441834449768)
    assert first["origin"] == "annotation:sa1b" and first["label"] is None
    assert json.loads(first["extra"]) == {"crop_box": [436.0, 311.0, 692.0, 567.0], "point_coords": [[911.75, 629.9375]]}
    doc = real_annotation_doc()
    assert first["mask"] == {"size": [1500, 2000], "counts": doc["annotations"][0]["segmentation"]["counts"]}


def test_masks_decode_with_pycocotools_to_their_stated_area(tmp_path):
    shutil.copy(SAMPLE_TAR, tmp_path / SAMPLE_TAR.name)
    stage = tmp_path / "stage"
    run_source(Sa1bSource(), config(tmp_path), stage)
    regions = rows(stage, "regions")
    assert len(regions) == 12
    for region in regions:
        rle = {"size": region["mask"]["size"], "counts": region["mask"]["counts"].encode()}
        pixels = mask_utils.decode(rle)
        assert pixels.shape == (1500, 2000)
        assert int(pixels.sum()) == region["area"]
        # SA-1B boxes span inclusive pixel indices: one pixel less than pycocotools' toBbox
        ys, xs = np.nonzero(pixels)
        assert (region["x"], region["y"]) == (xs.min(), ys.min())
        assert (region["w"], region["h"]) == (xs.max() - xs.min(), ys.max() - ys.min())


def _bad_doc() -> dict:
    doc = real_annotation_doc()
    anns = doc["annotations"][:8]
    anns[1]["segmentation"]["size"] = [1499, 2000]  # RLE size disagrees with the image
    anns[2]["bbox"][2] = float("nan")
    anns[3]["bbox"][3] = 0.0  # zero-area box
    anns[4]["area"] += 1  # the RLE covers a different area
    anns[5]["id"] = anns[0]["id"]  # duplicate annotation id
    anns[6]["segmentation"]["counts"] = ""
    doc["annotations"] = anns
    return doc


def test_bad_members_and_annotations_are_rejected_with_locations(tmp_path):
    doc = real_annotation_doc()
    tar = tmp_path / "sa_000001.tar"
    with tarfile.open(tar, "w", format=tarfile.GNU_FORMAT) as archive:
        for name, data in image_pair(1, _bad_doc()):
            add_file(archive, name, data)
        add_file(archive, "../sa_2.json", b"{}")
        add_file(archive, "sub/sa_3.jpg", jpeg_bytes(8, 8))
        add_special(archive, "sa_4.jpg", tarfile.SYMTYPE, "/etc/passwd")
        add_special(archive, "sa_5.jpg", tarfile.LNKTYPE, "sa_1.jpg")
        add_special(archive, "sa_6.jpg", tarfile.CHRTYPE)
        add_special(archive, "sa_7.jpg", tarfile.FIFOTYPE)
        add_special(archive, "somedir", tarfile.DIRTYPE)
        add_file(archive, "readme.txt", b"hello")
        for name, data in image_pair(8, doc, jpeg_size=(1000, 750)):  # JSON says 2000x1500
            add_file(archive, name, data)
        add_file(archive, "sa_9.jpg", jpeg_bytes(2000, 1500))  # no JSON
        add_file(archive, "sa_10.json", json.dumps(doc).encode())  # no JPEG
        add_file(archive, "sa_11.jpg", jpeg_bytes(2000, 1500))
        add_file(archive, "sa_11.json", b"{not json")
        add_file(archive, "sa_12.jpg", b"GIF89a not a jpeg")
        add_file(archive, "sa_12.json", json.dumps(doc).encode())
        add_file(archive, "./sa_13.jpg", jpeg_bytes(20, 10))  # a leading ./ is how `tar -C d .` names members
        doc13 = {"image": {"image_id": 13, "width": 20, "height": 10, "file_name": "sa_13.jpg"}, "annotations": []}
        add_file(archive, "./sa_13.json", json.dumps(doc13).encode())
        add_file(archive, "sa_13.json", json.dumps(doc13).encode())  # the same member twice
    stage = tmp_path / "stage"
    stats = run_source(Sa1bSource(), config(tmp_path), stage)
    assert table_counts(stage) == {
        "images": 2, "regions": 2, "objects": 0, "shards": 1,
        "rejected": {"sa1b_annotation_duplicate": 1, "sa1b_area_mismatch": 1, "sa1b_bbox_invalid": 2,
                     "sa1b_jpeg_invalid": 1, "sa1b_jpeg_missing": 1, "sa1b_json_invalid": 1, "sa1b_json_missing": 1,
                     "sa1b_rle_invalid": 1, "sa1b_rle_size_mismatch": 1, "sa1b_size_mismatch": 1,
                     "tar_member_device": 2, "tar_member_directory": 1, "tar_member_duplicate": 1,
                     "tar_member_link": 2, "tar_member_path": 2, "tar_member_unexpected": 1},
    }
    # images 1 and 13 + 8 annotations of image 1 + one reject per refused member, image, annotation
    assert stats[0]["rows_in"] == 2 + 8 + 14 and stats[0]["rows_out"] == 4
    found = rejects_by_reason(stage)
    assert found["sa1b_rle_size_mismatch"] == ["sa_000001.tar:sa_1.json#annotations[1]"]
    assert found["sa1b_bbox_invalid"] == ["sa_000001.tar:sa_1.json#annotations[2]", "sa_000001.tar:sa_1.json#annotations[3]"]
    assert found["sa1b_area_mismatch"] == ["sa_000001.tar:sa_1.json#annotations[4]"]
    assert found["tar_member_path"][0].startswith("sa_000001.tar:../sa_2.json@")
    assert found["sa1b_json_missing"][0].startswith("sa_000001.tar:sa_9.jpg@")
    assert found["sa1b_jpeg_missing"][0].startswith("sa_000001.tar:sa_10.json@")
    assert found["sa1b_size_mismatch"] == ["sa_000001.tar:sa_8.json"]
    records = {(r["reason"], r["record"]) for r in rows(stage, "_rejects")}
    assert any(reason == "sa1b_size_mismatch" and "JPEG header 1000x750" in text for reason, text in records)
    assert ("tar_member_link", "link to '/etc/passwd'") in records
    assert ("sa1b_jpeg_invalid", "not a JPEG Pillow can read: not a JPEG file") in records
    assert {r["region_id"] for r in rows(stage, "regions")} == {"sa1b:1/g333521560", "sa1b:1/g333521567"}
    assert {r["image_id"] for r in rows(stage, "images")} == {"sa1b:1", "sa1b:13"}


def test_truncated_tar_keeps_what_came_before_and_names_the_offset(tmp_path):
    doc = real_annotation_doc()
    full = write_tar(tmp_path / "full" / "sa_000002.tar", image_pair(1, doc) + image_pair(2, doc) + image_pair(3, doc))
    with tarfile.open(full) as archive:
        cut_member = archive.getmember("sa_2.json")
    data = full.read_bytes()
    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / full.name).write_bytes(data[: cut_member.offset_data + 100])  # inside sa_2.json's data
    stage = tmp_path / "stage"
    stats = run_source(Sa1bSource(), config(folder), stage)
    assert table_counts(stage) == {"images": 1, "regions": 12, "objects": 0, "shards": 1,
                                   "rejected": {"sa1b_json_missing": 1, "tar_truncated": 1}}
    assert stats[0]["rows_in"] == 1 + 12 + 2
    found = rejects_by_reason(stage)
    assert found["tar_truncated"] == [f"sa_000002.tar:sa_2.json@{cut_member.offset}"]
    assert found["sa1b_json_missing"][0].startswith("sa_000002.tar:sa_2.jpg@")


@pytest.mark.parametrize("cut", ["after_member", "inside_header"])
def test_tar_cut_between_members_is_not_a_silent_end(tmp_path, cut):
    doc = real_annotation_doc()
    full = write_tar(tmp_path / "full" / "sa_000003.tar", image_pair(1, doc) + image_pair(2, doc))
    with tarfile.open(full) as archive:
        second = archive.getmember("sa_2.jpg")
    end = second.offset if cut == "after_member" else second.offset + 200
    (tmp_path / "sa_000003.tar").write_bytes(full.read_bytes()[:end])
    stage = tmp_path / "stage"
    run_source(Sa1bSource(), config(tmp_path), stage)
    assert table_counts(stage)["rejected"] == {"tar_truncated": 1}
    assert rejects_by_reason(stage)["tar_truncated"] == [f"sa_000003.tar:sa_000003.tar@{second.offset}"]
    assert table_counts(stage)["images"] == 1


def test_corrupt_header_mid_archive(tmp_path):
    doc = real_annotation_doc()
    tar = write_tar(tmp_path / "sa_000004.tar", image_pair(1, doc) + image_pair(2, doc))
    with tarfile.open(tar) as archive:
        second = archive.getmember("sa_2.jpg")
    data = bytearray(tar.read_bytes())
    data[second.offset + 148: second.offset + 156] = b"garbage!"  # header checksum field
    tar.write_bytes(bytes(data))
    stage = tmp_path / "stage"
    run_source(Sa1bSource(), config(tmp_path), stage)
    assert table_counts(stage)["rejected"] == {"tar_corrupt": 1}
    assert table_counts(stage)["images"] == 1


def test_shards_are_cut_by_images_and_by_regions(tmp_path):
    doc = real_annotation_doc()
    write_tar(tmp_path / "sa_000005.tar", image_pair(1, doc) + image_pair(2, doc) + image_pair(3, doc))
    stage = tmp_path / "by_images"
    stats = run_source(Sa1bSource(), config(tmp_path), stage, shard_size=2)
    assert [s["rows_out"] for s in stats] == [26, 13]
    stage = tmp_path / "by_regions"
    stats = run_source(Sa1bSource(), config(tmp_path, max_regions_per_shard=20), stage, shard_size=100)
    assert [s["rows_out"] for s in stats] == [26, 13]
    assert table_counts(stage)["regions"] == 36
    stats = run_source(Sa1bSource(), config(tmp_path, max_images=2), tmp_path / "max", shard_size=100)
    assert [s["rows_out"] for s in stats] == [26]


def test_output_is_byte_identical_across_runs(tmp_path):
    doc = real_annotation_doc()
    write_tar(tmp_path / "in" / "sa_000006.tar", image_pair(1, doc) + image_pair(2, doc))
    outputs = []
    for run in ("a", "b"):
        run_source(Sa1bSource(), config(tmp_path / "in"), tmp_path / run)
        outputs.append([(tmp_path / run / t / "part-00000.parquet").read_bytes() for t in ("images", "regions")])
    assert outputs[0] == outputs[1]


def test_links_file_selects_tars_and_reports_missing_ones(tmp_path):
    doc = real_annotation_doc()
    write_tar(tmp_path / "sa_000000.tar", image_pair(1, doc))
    write_tar(tmp_path / "sa_000009.tar", image_pair(2, doc))  # downloaded but not in the links file
    (tmp_path / "links.tsv").write_text(
        "file_name\tcdn_link\n"
        "sa_000000.tar\thttps://scontent.example.net/m1/v/t6/sa_000000.tar?ccb=10-5&oh=00_A&oe=66\n"
        "sa_000001.tar\thttps://scontent.example.net/m1/v/t6/sa_000001.tar?ccb=10-5&oh=00_B&oe=66\n")
    cfg = config(tmp_path, links_file="links.tsv")
    Sa1bSource().check(cfg)
    assert Sa1bSource().plan(cfg, 10) == [str(tmp_path / "sa_000000.tar")]
    assert missing_tars(cfg) == ["sa_000001.tar"]
    stats = run_source(Sa1bSource(), cfg, tmp_path / "stage")
    assert stats[0]["tar_url"].endswith("sa_000000.tar?ccb=10-5&oh=00_A&oe=66")


@pytest.mark.parametrize("text, message", [
    ("name\tlink\n", "links.tsv:1: header"),
    ("file_name\tcdn_link\nsa_000000.tar\n", "links.tsv:2: expected 2"),
    ("file_name\tcdn_link\n../sa_000000.tar\thttps://x.net/a\n", "links.tsv:2: file name"),
    ("file_name\tcdn_link\nsa_000000.tar\tftp://x.net/a\n", "links.tsv:2: link for sa_000000.tar is not an https"),
    ("file_name\tcdn_link\nsa_000000.tar\thttps://x.net/a\nsa_000000.tar\thttps://x.net/b\n", "links.tsv:3: sa_000000.tar is listed twice"),
])
def test_links_file_errors_name_the_line(tmp_path, text, message):
    (tmp_path / "links.tsv").write_text(text)
    with pytest.raises(LinksFileError, match=message.replace("?", r"\?")):
        read_links(tmp_path / "links.tsv")


def test_domain_table_tags_images(tmp_path):
    doc = real_annotation_doc()
    write_tar(tmp_path / "sa_000007.tar", image_pair(1, doc) + image_pair(2, doc))
    (tmp_path / "domains.tsv").write_text("image_id\tdomain\n1\tindoor\n")
    stage = tmp_path / "stage"
    run_source(Sa1bSource(), config(tmp_path, domain_table="domains.tsv", domain="outdoor"), stage)
    assert {r["image_id"]: r["visual_domain"] for r in rows(stage, "images")} == {"sa1b:1": "indoor", "sa1b:2": "outdoor"}
    (tmp_path / "bad.tsv").write_text("1\tkitchen\n")
    with pytest.raises(ValueError, match=r"bad.tsv:1: expected"):
        read_domain_table(tmp_path / "bad.tsv")


def test_check_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no SA-1B tar shards"):
        Sa1bSource().check(config(tmp_path))
    with pytest.raises(FileNotFoundError, match="links file not found"):
        Sa1bSource().check(config(tmp_path, links_file="links.tsv"))


def test_scores_that_are_not_finite_numbers_become_null(tmp_path):
    doc = real_annotation_doc()
    doc["annotations"] = doc["annotations"][:4]
    doc["annotations"][0]["predicted_iou"] = math.nan
    doc["annotations"][1]["predicted_iou"] = "0.9"
    doc["annotations"][2]["stability_score"] = None
    write_tar(tmp_path / "sa_000008.tar", image_pair(1, doc))
    stage = tmp_path / "stage"
    run_source(Sa1bSource(), config(tmp_path), stage)
    regions = rows(stage, "regions")
    assert [r["predicted_iou"] is None for r in regions] == [True, True, False, False]
    assert [r["stability_score"] is None for r in regions] == [False, False, True, False]


def test_path_may_name_one_tar(tmp_path):
    shutil.copy(SAMPLE_TAR, tmp_path / SAMPLE_TAR.name)
    (tmp_path / "links.tsv").write_text("file_name\tcdn_link\nsa_000020.tar\thttps://x.example.net/sa_000020.tar\n")
    cfg = config(tmp_path / SAMPLE_TAR.name, links_file="links.tsv")
    Sa1bSource().check(cfg)
    assert Sa1bSource().plan(cfg, 10) == [str(tmp_path / SAMPLE_TAR.name)]
    assert missing_tars(cfg) == []
    run_source(Sa1bSource(), cfg, tmp_path / "stage")
    assert table_counts(tmp_path / "stage")["regions"] == 12


def test_an_image_with_more_than_255_masks_is_read(tmp_path):
    # pycocotools' area() refuses more than 255 masks per call under numpy 2; real SA-1B images hold more
    doc = real_annotation_doc()
    base = doc["annotations"]
    doc["annotations"] = [{**base[k % len(base)], "id": 10_000 + k} for k in range(300)]
    doc["annotations"][299] = {**doc["annotations"][299], "area": doc["annotations"][299]["area"] + 1}
    write_tar(tmp_path / "sa_000007.tar", image_pair(1, doc))
    stats = run_source(Sa1bSource(), config(tmp_path), tmp_path / "out")
    assert stats[0]["rows_out"] == 1 + 299
    assert table_counts(tmp_path / "out")["regions"] == 299
    assert rejects_by_reason(tmp_path / "out") == {"sa1b_area_mismatch": ["sa_000007.tar:sa_1.json#annotations[299]"]}


@pytest.mark.parametrize("options", [{}, {"progressive": True}, {"exif": b"Exif\x00\x00" + b"\x00" * 60000},
                                     {"subsampling": 0}])
def test_jpeg_size_from_the_frame_header(options):
    assert jpeg_size(io.BytesIO(jpeg_bytes(321, 123, **options))) == (321, 123)


def test_jpeg_fill_bytes_before_a_marker_are_skipped():
    data = jpeg_bytes(40, 30)
    assert jpeg_size(io.BytesIO(data[:2] + b"\xff\xff\xff" + data[2:])) == (40, 30)  # 0xFF may precede any marker


def test_jpeg_size_reads_only_the_header():
    data = jpeg_bytes(2000, 1500)

    class Counting(io.BytesIO):
        read_bytes = 0

        def read(self, n=-1):
            chunk = super().read(n)
            Counting.read_bytes += len(chunk)
            return chunk

    assert jpeg_size(Counting(data)) == (2000, 1500)
    assert Counting.read_bytes <= 4096 < len(data)


@pytest.mark.parametrize("data, message", [
    (b"GIF89a....", "not a JPEG file"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "Truncated File Read"),
    (b"\xff\xd8\xff\xda\x00\x08" + b"\x00" * 20, "not identified"),  # scan data before any frame header
    (b"\xff\xd8\x00\x00" + b"\x00" * 20, "not a JPEG file"),
    (jpeg_bytes(40, 30)[:200], "Truncated File Read"),  # cut before its scan data
])
def test_bad_jpeg_headers_are_one_line_errors(data, message):
    with pytest.raises(ValueError, match=f"^not a JPEG Pillow can read: .*{message}"):
        jpeg_size(io.BytesIO(data))
