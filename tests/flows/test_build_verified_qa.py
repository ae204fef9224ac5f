"""build-verified-qa end to end against a real OpenAI-compatible HTTP server on 127.0.0.1 that
replays LLM replies: good pairs, broken JSON, wrong and failing programs, hostile programs."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from reasonvqa.flows.build_verified_qa import GraphSource, VerifiedBuildConfig, build_verified_qa, vg_graph_shards
from reasonvqa.llm import LLMConfig, LLMEndpointError
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.tasks.verify.sandbox import SandboxConfig
from reasonvqa.tasks.verify.scene_graph import SceneGraph
from reasonvqa.tasks.verify.verified import VerifiedQAConfig
from reasonvqa.text_filters import FilterConfig

from tests.tasks.verify.llm_server import FixtureLLM

pytestmark = pytest.mark.integration
FIXTURES = Path(__file__).parent / "fixtures"

LYING_ON = '''def execute_command(scene_graph):
    for target, rels in scene_graph.get_outgoing_relations("dog").items():
        if "lying on" in rels.get("relations", []):
            return f"The dog is lying on the {target}."
    return None
'''
BALL_COLOR = '''def execute_command(scene_graph):
    colors = scene_graph.get_attributes("ball").get("attributes", [])
    return "The ball is " + " and ".join(colors) + "."
'''
WRONG = '''def execute_command(scene_graph):
    return ", ".join(scene_graph.get_entities())
'''
CRASH = '''def execute_command(scene_graph):
    return scene_graph.get_attributes("dog")["color"][0]
'''
HOSTILE = "import os\ndef execute_command(scene_graph):\n    os.system('touch /tmp/verified-pwned')\n    return 'ok'\n"
LOOP = "def execute_command(scene_graph):\n    while True:\n        pass\n"
CONSTANT = "def execute_command(scene_graph):\n    return 'The dog is small and brown.'\n"


def _qa(question, answer, program):
    return {"question": question, "answer": answer, "program": program}


DOG_REPLY = "Here are the question-answer pairs:\n```json\n" + json.dumps({"qa": [
    _qa("What is the dog lying on?", "The dog is lying on the grass.", LYING_ON),
    _qa("What is the dog resting on?", "The dog is lying on the grass.", LYING_ON),  # near-duplicate of the first
    _qa("What is the dog wearing around its neck?", "The dog is wearing a blue collar.", WRONG),  # wrong answer
    _qa("What color is the dog?", "The dog is small and brown.", CONSTANT),  # tautology: hard-coded answer
    _qa("What does the caption say about the ball?", "The ball is red.", BALL_COLOR),  # taboo word
    _qa("Which color does the dog have?", "Brown.", CRASH),  # program fails
    _qa("Is the dog near a ball?", "Yes.", HOSTILE),  # program rejected
    _qa("How long is the grass?", "Short.", LOOP),  # program times out
    {"question": "Where is the ball?", "answer": "Next to the dog."},  # no program
]}, indent=1) + "\n```"
BOAT_REPLY = '{"qa": [{"question": "What are the boats tied to?", "answer": "The boats are tied to the wooden doc'  # truncated
MAN_REPLY = json.dumps({"qa": [
    _qa("What is the man holding?", "The man is holding a black umbrella.",
        "def execute_command(scene_graph):\n    for target, rels in scene_graph.get_outgoing_relations('man').items():\n"
        "        if 'holding' in rels.get('relations', []):\n"
        "            color = ' '.join(scene_graph.get_attributes(target).get('attributes', []))\n"
        "            return f'The man is holding a {color} {target}.'\n"),
    _qa("What is the fence made of?", "The fence is made of wood.",
        "def execute_command(scene_graph):\n    attrs = scene_graph.get_attributes('fence').get('attributes', [])\n"
        "    return 'The fence is made of wood.' if 'wooden' in attrs else None\n"),
    _qa("What is the man wearing?", "The man is wearing a yellow raincoat.",
        "def verify(sg):\n    for target, rels in sg.get_outgoing_relations('man').items():\n"
        "        if 'wearing' in rels['relations']:\n"
        "            return 'The man is wearing a ' + sg.get_attributes(target)['attributes'][0] + ' ' + target + '.'\n"),
]})
GENERATIONS = {"blue collar": DOG_REPLY, "white boats": BOAT_REPLY, "yellow raincoat": MAN_REPLY}
TEXT_VERDICTS = {"What is the fence made of?": "trivial"}
ENTAILMENT = {"What is the man wearing?": False}


def _config(server: FixtureLLM, **filters) -> VerifiedBuildConfig:
    llm = LLMConfig(base_url=server.base_url, model="fixture-gpt", api_key_env="FIXTURE_KEY", max_retries=1,
                    backoff_seconds=0.01)
    return VerifiedBuildConfig(
        graphs=GraphSource(kind="tuples", path=FIXTURES / "verified_graphs.jsonl"), shard_size=2,
        verified=VerifiedQAConfig(llm=llm, sandbox=SandboxConfig(workers=2, wall_seconds=1.5),
                                  filters=FilterConfig(**filters)))


def test_end_to_end_against_a_replaying_openai_server(tmp_path):
    with FixtureLLM(GENERATIONS, TEXT_VERDICTS, ENTAILMENT) as server:
        out = Path(build_verified_qa(_config(server), str(tmp_path / "out")))
        calls = len(server.requests)
        assert calls == 3 + 2 + 2  # generation per image; judges per image with survivors (dog, man)
        questions = pq.read_table(out / "questions.parquet").to_pylist()
        stats = json.loads((out / "stats.json").read_text())
        assert sorted(q["question"] for q in questions) == ["What is the dog lying on?", "What is the man holding?"] or \
            sorted(q["question"] for q in questions) == ["What is the dog resting on?", "What is the man holding?"]
        man = next(q for q in questions if q["image_id"] == "docci:test_00003")
        assert man["kind"] == "verified" and man["generator_model"] == "fixture-gpt"
        assert json.loads(man["program_output"]) == "The man is holding a black umbrella."
        assert man["similarity"] > 0.99 and man["answer_category"] == "free_form"
        assert man["evidence_object_ids"] == [] and man["image_source"] == "docci"  # tuple graphs have no object ids
        assert stats["graphs"]["rejected"] == {"bad_graph": 2}
        assert stats["verified_qa"]["rejected"] == {
            "judge_trivial": 1, "llm_broken_json": 1, "malformed_candidate": 1, "near_duplicate": 1, "not_entailed": 1,
            "program_failed": 2, "program_rejected": 1, "semantic_mismatch": 1, "taboo_word": 1, "tautology": 1}
        breakdown = stats["prove_breakdown"]
        assert breakdown["candidates"] == 13 and breakdown["kept"] == 2
        assert (breakdown["program_failed"], breakdown["wrong_answer"], breakdown["text_filtered"]) == (5, 1, 5)
        assert breakdown["program_failed_rate"] == round(5 / 13, 4) and breakdown["text_filtered_rate"] == round(5 / 7, 4)
        assert stats["sandbox"]["ast_allow_list"] == "on" and set(stats["prompt_versions"]) == {
            "generate_qa", "judge_text", "judge_entailment"}
        rejects = pq.read_table(out / "rejects.parquet").to_pylist()
        assert {r["source"] for r in rejects if r["reason"] == "bad_graph"} == {
            "verified_graphs.jsonl:4", "verified_graphs.jsonl:5"}
        assert any(r["source"] == "llm:docci:test_00001#qa[8]" for r in rejects if r["reason"] == "malformed_candidate")
        assert not Path("/tmp/verified-pwned").exists()
        first = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

        # a rerun into a fresh work folder replays nothing from the shard markers but the same replies:
        # byte-identical outputs
        again = Path(build_verified_qa(_config(server), str(tmp_path / "again")))
        assert {p.name: p.read_bytes() for p in again.iterdir() if p.is_file()} == first
        # a rerun of the finished build makes no call
        build_verified_qa(_config(server), str(tmp_path / "out"))
        assert len(server.requests) == 2 * calls


def test_failing_endpoint_fails_the_build_after_bounded_retries(tmp_path):
    with FixtureLLM(GENERATIONS, fail_status=500) as server:
        with pytest.raises(LLMEndpointError):
            build_verified_qa(_config(server), str(tmp_path / "out"))
        assert 2 <= len(server.requests) <= 2 * 2  # at most max_retries + 1 attempts per call of the first shard


def test_visual_genome_graphs_for_the_flow(tmp_path):
    shards = vg_graph_shards(SAMPLE_DIR / "vg", tmp_path, shard_size=2, max_images=3)
    assert [s.rows_in for s in shards] == [2, 1]
    rows = shards[0].outputs["graphs"].to_pylist()
    assert [r["image_id"] for r in rows] == ["vg:1", "vg:2"]
    graph = SceneGraph.from_json(json.loads(rows[0]["graph"]))
    assert graph.object_ids["clock"] == ["vg:1/o1058498"]
