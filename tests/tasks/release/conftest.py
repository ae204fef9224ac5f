import pyarrow as pa
import pytest

from reasonvqa import schemas


def question(qid: str, image: str, answer: str, choices: list[str], **extra) -> dict:
    row = {
        "question_id": qid,
        "image_id": image,
        "image_source": image.split(":")[0],
        "object_ids": [f"{image}/o1"],
        "question": "What is the capital of the country where this tower is located?",
        "answer": answer,
        "answer_qid": None,
        "answer_category": "literal",
        "choices": choices,
        "n_hop": 2,
        "route": ["P17", "P36"],
        "property_id": "P36",
        "domains": ["Places & Locations"],
        "has_scene_graph": False,
        "template_ids": ["P17.sub", "P36.main"],
        "template_version": "t1",
        "knowledge_snapshot": "k1",
    }
    row.update(extra)
    return row


@pytest.fixture
def splits() -> dict[str, pa.Table]:
    train = [
        question("q2", "vg:1", "Lisbon", ["Porto", "Lisbon", "Braga", "Faro"], answer_qid="Q597"),
        question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"], answer_qid="Q90"),
        question("q3", "gldv2:7e4627eb6f721857", "8848.86 m", ["8848.86 m", "8000 m", "7500 m", "9100 m"],
                 answer_category="number", n_hop=1, route=["P2048"], property_id="P2048"),
    ]
    test = [question("q4", "vg:2", "Madrid", ["Madrid", "Rome", "Bern", "Oslo"], answer_qid="Q2807")]
    return {
        "train": schemas.from_rows(train, schemas.QUESTIONS),
        "test": schemas.from_rows(test, schemas.QUESTIONS),
    }
