import shutil

import numpy as np
import pytest

from reasonvqa.stage import read_table
from reasonvqa.tasks.sources.gldv2 import Gldv2Source, is_http_url
from reasonvqa.tasks.sources.gldv2_side import CsvColumnError, commons_category_name, image_key
from reasonvqa.tasks.sources.seen_ids import SeenIds

from tests.tasks.sources.conftest import (
    CATEGORIES, CLEAN, TRAIN, assert_accounted, gldv2_folder, read_gldv2_folder, rejects_by_reason, rows, stage_bytes,
)

def test_category_urls_to_names():
    assert commons_category_name("http://commons.wikimedia.org/wiki/Category:Eiffel_Tower") == "Eiffel Tower"
    assert commons_category_name("https://commons.wikimedia.org/wiki/Category:Haleakal%C4%81_National_Park") == "Haleakalā National Park"
    assert commons_category_name("https://commons.m.wikimedia.org/wiki/Category:St._Peter%27s_Basilica") == "St. Peter's Basilica"
    assert commons_category_name("Category:Tower_Bridge") == "Tower Bridge"
    assert commons_category_name("http://commons.wikimedia.org/wiki/Category:Bad_%FF") is None  # not UTF-8
    assert commons_category_name("http://commons.wikimedia.org/wiki/File:X.jpg") is None
    assert commons_category_name("http://commons.wikimedia.org/wiki/Category:__") is None


def test_image_keys_and_urls():
    assert image_key(" 6E158A47EB2CA3F6 ") == "6e158a47eb2ca3f6"
    assert image_key("6e158a47eb2ca3f") is None and image_key("6e158a47eb2ca3fg") is None
    assert is_http_url("https://upload.wikimedia.org/a.jpg") and not is_http_url("ftp://x/a.jpg")
    assert not is_http_url("upload.wikimedia.org/a.jpg") and not is_http_url("http:///a.jpg")
    assert not is_http_url("https://upload.wikimedia.org/a b.jpg") and is_http_url("HTTP://example.org")


def test_rows_to_images_and_whole_image_objects(tmp_path):
    stage = tmp_path / "gl"
    stats = read_gldv2_folder(gldv2_folder(tmp_path), stage)
    assert_accounted(stats, stage)
    images = rows(stage, "images")
    assert [i["image_id"] for i in images] == ["gldv2:202cd79556f30760", "gldv2:3ad87684c99c06e1",
                                               "gldv2:6e158a47eb2ca3f6", "gldv2:e7f70e9c61e66bfd"]
    assert images[1] == {"image_id": "gldv2:3ad87684c99c06e1", "source": "gldv2", "source_image_id": "3ad87684c99c06e1",
                         "width": None, "height": None,
                         "url": "http://upload.wikimedia.org/wikipedia/commons/2/2d/Tour_Eiffel.jpg",
                         "file_path": "train/3/a/d/3ad87684c99c06e1.jpg", "group_id": "37914", "is_clean": True,
                         "visual_domain": "landmarks", "license": Gldv2Source.license, "context": None}
    assert [i["is_clean"] for i in images] == [False, True, False, False]
    objects = {o["object_id"]: o for o in rows(stage, "objects")}
    assert objects["gldv2:202cd79556f30760/o0"]["label"] == "Guayaquil, Ecuador"
    observatory = objects["gldv2:6e158a47eb2ca3f6/o0"]
    assert observatory == {"object_id": "gldv2:6e158a47eb2ca3f6/o0", "image_id": "gldv2:6e158a47eb2ca3f6",
                           "label": "Observatoriet väderkvarn", "names": ["Observatoriet väderkvarn"], "synset": None,
                           "synsets": None, "x": None, "y": None, "w": None, "h": None, "mask": None, "score": None,
                           "origin": "annotation:gldv2", "commons_category": "Observatoriet väderkvarn"}
    assert stats[0]["rows_in"] == 4 and stats[0]["rows_out"] == 4 and stats[0]["missing_files"] == []
    assert read_table(stage, "relations").num_rows == 0 and read_table(stage, "attributes").num_rows == 0


def test_bad_rows_are_rejected_with_line_numbers(tmp_path):
    train = TRAIN + "\n".join([
        "XYZ,http://upload.wikimedia.org/y.jpg,37914",
        "aaaaaaaaaaaaaaa1,notaurl,37914",
        "aaaaaaaaaaaaaaa2,https://upload.wikimedia.org/z.jpg,abc",
        "aaaaaaaaaaaaaaa3,https://upload.wikimedia.org/z.jpg,999",
        "aaaaaaaaaaaaaaa4,https://upload.wikimedia.org/z.jpg",
        '"aaaaaaaaaaaaaaa5","https://upload.wikimedia.org/multi',
        'line.jpg",37914',
        "",
        "6e158a47eb2ca3f6,https://upload.wikimedia.org/again.jpg,142820",
    ]) + "\n"
    categories = CATEGORIES + "x,http://commons.wikimedia.org/wiki/Category:Bad\n5,http://example.org/foo\n37914,Category:Other\n"
    clean = CLEAN + "abc,0123456789abcdef\n37914,zz 00000000000000ff\n"
    stage = tmp_path / "gl"
    stats = read_gldv2_folder(gldv2_folder(tmp_path, train, categories, clean), stage, shard_size=3)
    assert_accounted(stats, stage)
    assert rejects_by_reason(stage) == {
        "category_landmark_id_not_numeric": ["train_label_to_category.csv:5"],
        "category_url_malformed": ["train_label_to_category.csv:6"],
        "clean_image_id_malformed": ["train_clean.csv:4"],
        "clean_landmark_id_not_numeric": ["train_clean.csv:3"],
        "csv_row_malformed": ["train.csv:10"],
        "duplicate_image_id": ["train.csv:14"],
        "duplicate_landmark_category": ["train_label_to_category.csv:7"],
        "image_id_malformed": ["train.csv:6"],
        "landmark_id_not_numeric": ["train.csv:8"],
        "landmark_without_category": ["train.csv:9"],
        "url_malformed": ["train.csv:11", "train.csv:7"],  # a quoted URL over two lines is named by its first line
    }
    assert stats[0]["rejected"]["category_url_malformed"] == 1  # side-file rejects live in shard 0
    kept = {i["source_image_id"]: i for i in rows(stage, "images")}
    assert kept["6e158a47eb2ca3f6"]["url"].endswith("Observatoriet_v%C3%A4derkvarn_2.jpg")  # first of the duplicates
    assert len(kept) == 4 and sum(s["rows_out"] for s in stats) == 4


def test_without_clean_list_is_clean_is_null(tmp_path):
    stage = tmp_path / "gl"
    stats = read_gldv2_folder(gldv2_folder(tmp_path, clean=None), stage)
    assert {i["is_clean"] for i in rows(stage, "images")} == {None}
    assert stats[0]["missing_files"] == ["train_clean.csv"]


def test_missing_files_name_the_path(tmp_path):
    src = gldv2_folder(tmp_path, categories=None)
    with pytest.raises(FileNotFoundError, match=str(src / "train_label_to_category.csv")):
        read_gldv2_folder(src, tmp_path / "gl")
    (src / "train.csv").unlink()
    with pytest.raises(FileNotFoundError, match=str(src / "train.csv")):
        read_gldv2_folder(src, tmp_path / "gl")


def test_index_csv_variant_has_images_without_landmarks(tmp_path):
    index = "id,url\n0123456789abcdef,https://upload.wikimedia.org/i.jpg\n"
    src = gldv2_folder(tmp_path, train=index, categories=None, clean=None, split="index.csv")
    stage = tmp_path / "gl"
    stats = read_gldv2_folder(src, stage)
    (image,) = rows(stage, "images")
    assert (image["file_path"], image["group_id"], image["is_clean"]) == ("index/0/1/2/0123456789abcdef.jpg", None, None)
    assert rows(stage, "objects") == [] and stats[0]["split_file"] == "index.csv"


def test_kaggle_train_csv_without_urls(tmp_path):
    train = "id,landmark_id\n17660ef415d37059,37914\n"
    stage = tmp_path / "gl"
    read_gldv2_folder(gldv2_folder(tmp_path, train=train), stage)
    (image,) = rows(stage, "images")
    assert image["url"] is None and image["group_id"] == "37914"
    assert rows(stage, "objects")[0]["commons_category"] == "Eiffel Tower"


def test_header_without_id_is_a_data_error_naming_file_and_column(tmp_path):
    folder = gldv2_folder(tmp_path, train="image,url\nx,y\n")
    with pytest.raises(CsvColumnError, match=rf"^{folder / 'train.csv'}: required column 'id' missing \(header: image,url\)$"):
        read_gldv2_folder(folder, tmp_path / "gl")


def test_shards_max_images_duplicates_across_shards(tmp_path):
    train = TRAIN + "6e158a47eb2ca3f6,https://upload.wikimedia.org/again.jpg,142820\n"
    stage = tmp_path / "gl"
    stats = read_gldv2_folder(gldv2_folder(tmp_path, train=train), stage, shard_size=2)
    assert [s["rows_in"] for s in stats] == [2, 2, 1]
    assert stats[2]["rejected"] == {"duplicate_image_id": 1}
    limited = tmp_path / "limited"
    stats = read_gldv2_folder(gldv2_folder(tmp_path, train=train), limited, shard_size=2, max_images=3)
    assert [s["rows_in"] for s in stats] == [2, 1] and len(rows(limited, "images")) == 3


def test_determinism_and_resume(tmp_path):
    src = gldv2_folder(tmp_path)
    first = read_gldv2_folder(src, tmp_path / "a", shard_size=2)
    read_gldv2_folder(src, tmp_path / "b", shard_size=2)
    assert stage_bytes(tmp_path / "a") == stage_bytes(tmp_path / "b")
    shutil.rmtree(src)
    assert read_gldv2_folder(src, tmp_path / "a", shard_size=2) == first


def test_seen_ids_across_batches():
    seen = SeenIds()
    assert seen.add_batch(np.array([5, 3, 5], dtype=np.uint64)).tolist() == [False, False, True]
    assert seen.add_batch(np.arange(150, dtype=np.uint64)).tolist() == [i in (3, 5) for i in range(150)]
    for start in range(100, 4000, 100):  # many overlapping batches force level merges
        mask = seen.add_batch(np.arange(start, start + 150, dtype=np.uint64))
        assert mask.tolist() == [i < start + 50 for i in range(start, start + 150)]
    assert len(seen) == 4050
    assert seen.contains(np.array([0, 4049, 4050, 2**64 - 1], dtype=np.uint64)).tolist() == [True, True, False, False]
    assert seen.add_batch(np.array([], dtype=np.uint64)).tolist() == []
