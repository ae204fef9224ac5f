from reasonvqa.snapshot import folder_snapshot_id


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
