from reasonvqa.snapshot import code_fingerprint, folder_snapshot_id


def test_snapshot_changes_with_content_and_names(tmp_path):
    (tmp_path / "a.json").write_text("[1]")
    (tmp_path / ".hidden").write_text("ignored")
    first = folder_snapshot_id(tmp_path)
    assert first.startswith("sha256:") and len(first) == 7 + 64
    (tmp_path / ".hidden").write_text("still ignored")
    assert folder_snapshot_id(tmp_path) == first
    (tmp_path / "a.json").write_text("[2]")
    assert folder_snapshot_id(tmp_path) != first
    (tmp_path / "a.json").rename(tmp_path / "b.json")
    assert folder_snapshot_id(tmp_path) != first


def test_top_level_snapshot_ignores_image_folders(tmp_path):
    (tmp_path / "train.csv").write_text("id,url,landmark_id\n")
    top = folder_snapshot_id(tmp_path, recursive=False)
    (tmp_path / "train" / "0" / "0").mkdir(parents=True)
    (tmp_path / "train" / "0" / "0" / "00a.jpg").write_bytes(b"\xff\xd8")
    assert folder_snapshot_id(tmp_path, recursive=False) == top
    assert folder_snapshot_id(tmp_path) != top


def test_code_fingerprint_follows_code_and_templates(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "templates").mkdir()
    (tmp_path / "tasks" / "stage.py").write_text("X = 1\n")
    (tmp_path / "templates" / "p.yaml").write_text("a: 1\n")
    (tmp_path / "tasks" / "notes.md").write_text("not code")
    roots = {"tasks": tmp_path / "tasks", "templates": tmp_path / "templates"}
    first = code_fingerprint(roots)
    (tmp_path / "tasks" / "notes.md").write_text("still not code")
    assert code_fingerprint(roots) == first
    (tmp_path / "templates" / "p.yaml").write_text("a: 2\n")
    assert code_fingerprint(roots) != first


def test_code_fingerprint_hashes_a_nested_package_once(tmp_path):
    core = tmp_path / "reasonvqa"
    (core / "tasks").mkdir(parents=True)
    (core / "cli.py").write_text("A = 1\n")
    (core / "tasks" / "stage.py").write_text("X = 1\n")
    flat = tmp_path / "flat"
    (flat / "core").mkdir(parents=True)
    (flat / "tasks").mkdir()
    (flat / "core" / "cli.py").write_text("A = 1\n")
    (flat / "tasks" / "stage.py").write_text("X = 1\n")
    # a wheel nests tasks/ inside the package; a checkout keeps it beside it: same fingerprint
    assert code_fingerprint({"reasonvqa": core, "reasonvqa.tasks": core / "tasks"}) == \
        code_fingerprint({"reasonvqa": flat / "core", "reasonvqa.tasks": flat / "tasks"})
