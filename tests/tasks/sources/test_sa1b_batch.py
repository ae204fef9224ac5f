import copy
import hashlib
import io
import json
import math

import pytest

from reasonvqa.tasks.sources import sa1b, sa1b_batch
from reasonvqa.tasks.sources.sa1b import Sa1bConfig, Sa1bSource

from tests.tasks.sources.sa1b_fixtures import image_pair, real_annotation_doc, write_tar
from tests.tasks.sources.source_runner import run_source


def _doc(change=None) -> dict:
    doc = real_annotation_doc()
    if change is not None:
        change(doc)
    return doc


def _outputs(stage) -> dict[str, str]:
    return {str(p.relative_to(stage)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(stage.rglob("*.parquet"))}


def _both_paths(tmp_path, monkeypatch, docs: list[dict], shard_size: int = 1000, batch: int = 128,
                order=None, **options) -> tuple[dict, dict[str, int]]:
    """Ingest the images batch-read and one by one; assert equal Parquet bytes; return the files and path counts.

    ``order``: a function that reorders the tar's members (jpg, json of each image in turn)."""
    folder = tmp_path / "in"
    members = [m for i, d in enumerate(docs) for m in image_pair(100 + i, d)]
    write_tar(folder / "sa_000001.tar", order(members) if order else members)
    monkeypatch.setattr(sa1b, "BATCH_IMAGES", batch)
    taken = {"fast": 0, "one_by_one": 0}
    fast_image, image = sa1b._TarReader._fast_image, sa1b._TarReader._image

    def count(name, method):
        def wrapped(self, *args):
            taken[name] += 1
            return method(self, *args)
        return wrapped

    monkeypatch.setattr(sa1b._TarReader, "_fast_image", count("fast", fast_image))
    monkeypatch.setattr(sa1b._TarReader, "_image", count("one_by_one", image))
    run_source(Sa1bSource(), Sa1bConfig(kind="sa1b", path=folder, **options), tmp_path / "batch", shard_size)
    batch_taken = dict(taken)
    parse = sa1b_batch.parse
    monkeypatch.setattr(sa1b_batch, "parse", lambda docs, joined=None: None)
    run_source(Sa1bSource(), Sa1bConfig(kind="sa1b", path=folder, **options), tmp_path / "one", shard_size)
    monkeypatch.setattr(sa1b_batch, "parse", parse)
    batch_files, one_files = _outputs(tmp_path / "batch"), _outputs(tmp_path / "one")
    assert batch_files == one_files
    return batch_files, batch_taken


def test_clean_images_are_batch_read_with_the_same_bytes(tmp_path, monkeypatch):
    files, taken = _both_paths(tmp_path, monkeypatch, [_doc() for _ in range(5)], batch=2)
    assert taken == {"fast": 5, "one_by_one": 0}
    assert "regions/part-00000.parquet" in files


def _ann(index, **values):
    def change(doc):
        doc["annotations"][index].update(values)
    return change


@pytest.mark.parametrize("change, one_by_one", [
    (_ann(3, area=1), 1),  # the RLE covers another area: rejected
    (_ann(5, id=333521560), 1),  # the first annotation's id again
    (_ann(2, bbox=[1.0, 2.0, 0.0, 4.0]), 1),
    (_ann(2, predicted_iou=None), 1),
    (_ann(2, predicted_iou=math.nan), 0),  # a NaN literal: orjson refuses it, json.loads and Arrow read it; null both ways
    (lambda doc: doc["annotations"][2].pop("crop_box"), 1),
    (lambda doc: doc["annotations"][2]["segmentation"].update(size=[1499, 2000]), 1),
    (lambda doc: doc["image"].update(width=1000), 1),  # every RLE size disagrees
    (lambda doc: doc["annotations"].insert(0, None), 1),  # Arrow reads a null in a list of objects as an invalid array
    (_ann(2, crop_box=[0, 0, 10, 10]), 0),  # integers among floats
    (_ann(2, meta=1), 3),  # a key the released files do not have: the whole batch is read one by one
])
def test_odd_images_among_clean_ones_give_the_one_by_one_bytes(tmp_path, monkeypatch, change, one_by_one):
    docs = [_doc(), _doc(change), _doc()]
    _, taken = _both_paths(tmp_path, monkeypatch, docs)
    assert taken == {"fast": 3 - one_by_one, "one_by_one": one_by_one}
    _both_paths(tmp_path / "small", monkeypatch, docs, shard_size=1)


def test_integer_boxes_follow_the_encoders_sampled_type(tmp_path, monkeypatch):
    # the one-by-one encoder types a shard's crop_box by every (n // 64)-th row: 16 images x 12 regions
    # sample every 3rd row, all integers here, so the other rows' fractions are cut to integers
    docs, row = [], 0
    for _ in range(16):
        doc = _doc()
        for ann in doc["annotations"]:
            ann["crop_box"] = [1, 2, 3, 4] if row % 3 == 0 else [1.5, 2.0, 3.0, 4.0]
            row += 1
        docs.append(doc)
    _both_paths(tmp_path, monkeypatch, docs)
    integers = [copy.deepcopy(docs[0]) for _ in range(4)]
    for doc in integers:
        for ann in doc["annotations"]:
            ann["crop_box"] = [1, 2, 3, 4]
    _, taken = _both_paths(tmp_path / "ints", monkeypatch, integers + [_doc()], batch=2, shard_size=2)
    assert taken["fast"] == 5


def test_value_text_finds_each_annotations_value():
    doc = json.dumps({"annotations": [{"crop_box": [1, 2.5]}, {"crop_box": [3, 4]}]}).encode()
    assert sa1b_batch._value_text(doc, "crop_box", 1, 2) == b"[3, 4]"
    assert sa1b_batch._value_text(doc, "crop_box", 0, 3) is None  # not written once per annotation
    nested = json.dumps({"point_coords": [[1.0, 2.0], [3, 4]]}, indent=2).encode()
    assert json.loads(sa1b_batch._value_text(nested, "point_coords", 0, 1)) == [[1.0, 2.0], [3, 4]]


def test_parse_refuses_blank_files_and_other_layouts():
    doc = json.dumps(real_annotation_doc()).encode()
    assert sa1b_batch.parse([doc, doc]).num_rows == 2
    assert sa1b_batch.parse([doc, b"  "]) is None
    assert sa1b_batch.parse([doc, doc + doc]) is None  # two objects in one file
    assert sa1b_batch.parse([doc.replace(b'"width"', b'"wide"')]) is None
    assert sa1b_batch.parse([b'{"image": 1}']) is None


def test_json_block_holds_the_files_as_parse_would_join_them(monkeypatch):
    monkeypatch.setattr(sa1b_batch, "BLOCK_BYTES", 12)
    block = sa1b_batch.JsonBlock()
    docs, starts = [], []
    for data in (b"{}", b'{"a":1}', b"[1, 2]"):
        doc, start = block.read(io.BytesIO(data), len(data))
        docs.append(doc)
        starts.append(None if start is None else (block, start))
    assert [bytes(d) for d in docs] == [b"{}", b'{"a":1}', b"[1, 2]"]
    assert starts[2] is None  # past the block's room: read as bytes
    assert bytes(block.joined(docs[:2], starts[:2])) == b'{}\n{"a":1}\n'
    assert block.joined(docs[1:2], starts[1:2]) is not None
    assert block.joined(docs, starts) is None
    assert block.joined(docs[::-1][1:], starts[::-1][1:]) is None  # not in the order they lie
    assert sa1b_batch.JsonBlock().joined(docs[:1], starts[:1]) is None  # another block's
    assert sa1b_batch.JsonBlock().read(io.BytesIO(b"{}"), 5) == (b"{}", None)  # a stream shorter than its size


def test_json_before_its_jpeg_and_a_full_block_give_the_one_by_one_bytes(tmp_path, monkeypatch):
    docs = [_doc() for _ in range(7)]

    def json_early(members):  # image 3's JSON before image 2's JPEG: it lies in the block of the batch before
        members = list(members)
        members.insert(4, members.pop(7))
        return members

    _, taken = _both_paths(tmp_path, monkeypatch, docs, batch=3, order=json_early)
    assert taken == {"fast": 7, "one_by_one": 0}
    size = len(json.dumps(docs[0]))
    monkeypatch.setattr(sa1b_batch, "BLOCK_BYTES", 2 * size + 2)  # two files per block: the third is joined
    _, taken = _both_paths(tmp_path / "full", monkeypatch, docs, batch=3)
    assert taken == {"fast": 7, "one_by_one": 0}


def test_json_waiting_for_its_jpeg_is_copied_out_of_the_block(tmp_path):
    reader = sa1b._TarReader(tmp_path / "sa_000001.tar", Sa1bConfig(kind="sa1b", path=tmp_path), {}, None, 1000)
    view, start = reader.block.read(io.BytesIO(b"{}"), 2)
    reader.pending["7"] = sa1b._Pending(json_bytes=view, json_offset=0, json_at=(reader.block, start))
    old = reader.block
    reader._next_block()
    half = reader.pending["7"]
    assert reader.block is not old and type(half.json_bytes) is bytes and half.json_bytes == b"{}"
    assert half.json_at is None
