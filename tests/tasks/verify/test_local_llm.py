"""LlamaServer start-up failures leave no server process behind."""

from __future__ import annotations

import pytest

from reasonvqa.tasks.verify.local_llm import LlamaServer


def test_server_that_exits_at_start_is_closed(tmp_path):
    # Without the extra, or with it and a missing model file, llama_cpp.server exits at once.
    server = LlamaServer(model=tmp_path / "missing.gguf", startup_seconds=30, log=tmp_path / "server.log")
    with pytest.raises(RuntimeError, match="exited with"):
        server.__enter__()
    assert server.process is None
