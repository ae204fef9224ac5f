"""Run inside the datumaro virtual environment: load a CVAT 1.1 (or COCO) export with datumaro, print JSON.

Usage: python datumaro_reference.py FORMAT FOLDER. Prints one object per item: image size and each
annotation's type, label, attributes, box and (for masks) the COCO RLE of datumaro's decoded mask.
"""

import json
import sys

import datumaro as dm
import numpy as np
from pycocotools import mask as coco_mask


def main(fmt: str, folder: str) -> None:
    dataset = dm.Dataset.import_from(folder, fmt)
    labels = dataset.categories()[dm.AnnotationType.label]
    out = {}
    for item in dataset:
        rows = []
        for ann in item.annotations:
            row = {"type": ann.type.name, "label": labels[ann.label].name if ann.label is not None else None,
                   "attributes": {k: v for k, v in sorted(ann.attributes.items()) if isinstance(v, (str, int, float, bool))}}
            if ann.type == dm.AnnotationType.bbox:
                row["bbox"] = [float(v) for v in ann.get_bbox()]
            if ann.type == dm.AnnotationType.mask:
                rle = coco_mask.encode(np.asfortranarray(ann.image.astype(np.uint8)))
                row["mask"] = {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode()}
            if ann.type == dm.AnnotationType.polygon:
                row["points"] = [float(v) for v in ann.points]
            rows.append(row)
        size = item.media.size if item.media is not None and item.media.has_size else None
        out[item.id] = {"size": list(size) if size else None, "annotations": rows}
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
