"""A per-shard record of finished calls (model, LLM, SPARQL), keyed by the call's inputs: the one
on-disk call cache of the pipeline.

File format (JSON lines): a header ``{"fingerprint": ...}`` naming the stage setup the answers
came from, then one ``{"k": <sha256 of namespace + canonical JSON of the inputs>, "t": <unix time
written>, "v": <result>}`` per finished call. Only a result that ``compute`` returned is written:
a call that raised (a truncated or malformed answer) leaves no line. A caller may bound the age of
the answers it takes (``max_age_s``): an older one is computed again and its new line supersedes it.
A line is written and flushed before ``call`` returns, so a killed process loses at most the
calls in flight (the OS keeps what was written; a power loss is not covered).
A line torn by a kill mid-write has no final newline: it is cut off on reload.

Keys and results may hold JSON values, bytes (stored as base64) and numpy arrays or scalars;
other types raise ``TypeError`` rather than being turned into text that differs between runs.
Only the byte offsets of results are kept in memory; a hit reads its line back from the file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from concurrent.futures import Future
from pathlib import Path, PurePath
from typing import Any, Callable

import numpy as np
from pydantic import BaseModel

BYTES_TAG = "__bytes__"
NDARRAY_TAG = "__ndarray__"
DEFAULT_MAX_ENTRY_BYTES = 32 * 2**20


def encode(value: Any) -> Any:
    """``value`` as plain JSON data: bytes and numpy arrays as tagged objects, tuples as lists."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {BYTES_TAG: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {NDARRAY_TAG: {"dtype": data.dtype.str, "shape": list(data.shape),
                              "data": base64.b64encode(data.tobytes()).decode("ascii")}}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if any(not isinstance(k, str) for k in value):
            raise TypeError(f"call cache: dict keys must be strings, got {sorted(type(k).__name__ for k in value)}")
        if BYTES_TAG in value or NDARRAY_TAG in value:
            raise TypeError(f"call cache: dict keys {BYTES_TAG!r} and {NDARRAY_TAG!r} are reserved")
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, PurePath):
        return value.as_posix()
    raise TypeError(f"call cache: cannot store a {type(value).__name__}; use JSON values, bytes or numpy arrays")


def decode(value: Any) -> Any:
    """The inverse of ``encode`` (tuples come back as lists)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if BYTES_TAG in value:
            return base64.b64decode(value[BYTES_TAG])
        if NDARRAY_TAG in value:
            spec = value[NDARRAY_TAG]
            flat = np.frombuffer(base64.b64decode(spec["data"]), dtype=np.dtype(spec["dtype"]))
            return flat.reshape(spec["shape"]).copy()
        return {k: decode(v) for k, v in value.items()}
    return value


def dumps(value: Any) -> str:
    """Canonical JSON text of ``value`` (sorted keys, no spaces)."""
    return json.dumps(encode(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_key(namespace: str, key: Any) -> str:
    """sha256 of a call's namespace and inputs in canonical JSON."""
    return hashlib.sha256(dumps([namespace, key]).encode()).hexdigest()


class CallCache:
    """Finished calls of one shard, on disk, keyed by (namespace, inputs).

    Safe for threads of one process: a call already in flight on another thread with the same
    inputs is waited for, not run twice. ``fingerprint`` names the setup the answers came from
    (stage, config, device); a file written under another fingerprint is discarded.
    ``max_entry_bytes`` refuses results too big to belong in a call cache. ``clock`` gives the
    time written into each line (and the age ``max_age_s`` is measured against).
    One process writes a file at a time: a caller that shares its folder between processes holds
    a lock around it (``knowledge/wikidata.py`` ``query_cache``).
    """

    def __init__(self, path: Path, fingerprint: str = "", max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.max_entry_bytes = max_entry_bytes
        self.hits = 0
        self.misses = 0
        self._clock = clock
        self._offsets: dict[str, tuple[int, int, float | None]] = {}  # digest -> (offset, length, time written)
        self._inflight: dict[str, Future] = {}
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._size = self._load()
        self._file = self.path.open("r+b")
        self._file.seek(self._size)

    def _load(self) -> int:
        """Index the complete lines of an existing file; return the byte length kept."""
        header = (json.dumps({"fingerprint": self.fingerprint}, sort_keys=True) + "\n").encode()
        kept = 0
        if self.path.exists():
            with self.path.open("rb") as handle:
                first = handle.readline()
                if first == header:
                    kept = len(first)
                    for line in handle:
                        if not line.endswith(b"\n"):
                            break  # torn by a kill mid-write: that call runs again
                        try:
                            entry = json.loads(line)
                            digest = entry["k"]
                        except (ValueError, KeyError, TypeError):
                            break
                        written = entry.get("t")
                        self._offsets[digest] = (kept, len(line),
                                                 float(written) if isinstance(written, (int, float)) else None)
                        kept += len(line)
        if kept == 0:
            self.path.write_bytes(header)
            return len(header)
        with self.path.open("r+b") as handle:
            handle.truncate(kept)
        return kept

    def __len__(self) -> int:
        return len(self._offsets)

    def __enter__(self) -> "CallCache":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (the recorded calls stay on disk)."""
        self._file.close()

    def _read(self, digest: str) -> Any:
        offset, length, _ = self._offsets[digest]
        self._file.seek(offset)
        line = self._file.read(length)
        self._file.seek(self._size)
        return decode(json.loads(line)["v"])

    def _fresh(self, digest: str, max_age_s: float | None) -> bool:
        """Whether ``digest`` has a recorded result no older than ``max_age_s`` (None: any age)."""
        if digest not in self._offsets:
            return False
        written = self._offsets[digest][2]
        return max_age_s is None or (written is not None and self._clock() - written <= max_age_s)

    def has(self, namespace: str, key: Any, max_age_s: float | None = None) -> bool:
        """True when the call (namespace, key) has a recorded result (no older than ``max_age_s``)."""
        with self._lock:
            return self._fresh(canonical_key(namespace, key), max_age_s)

    def call(self, namespace: str, key: Any, compute: Callable[[], Any], max_age_s: float | None = None) -> Any:
        """The recorded result of ``compute`` for (namespace, key), computing and recording it once
        (again when the recorded one is older than ``max_age_s``).

        Every caller, first run or rerun, gets the result as read back from the record.
        """
        digest = canonical_key(namespace, key)
        with self._lock:
            if self._fresh(digest, max_age_s):
                self.hits += 1
                return self._read(digest)
            waiting = self._inflight.get(digest)
            if waiting is None:
                mine: Future = Future()
                self._inflight[digest] = mine
        if waiting is not None:
            line = waiting.result()  # raises what the other thread's call raised
            with self._lock:
                self.hits += 1
            return decode(json.loads(line)["v"])
        try:
            value = compute()
            written = self._clock()
            line = (dumps({"k": digest, "t": written, "v": value}) + "\n").encode()
            if len(line) > self.max_entry_bytes:
                raise ValueError(f"call cache: result of {namespace!r} is {len(line)} bytes, over the "
                                 f"{self.max_entry_bytes}-byte limit; write large outputs to a table instead")
            with self._lock:
                self._file.write(line)
                self._file.flush()
                self._offsets[digest] = (self._size, len(line), written)
                self._size += len(line)
                self.misses += 1
            mine.set_result(line)
        except BaseException as error:
            mine.set_exception(error)
            raise
        finally:
            with self._lock:
                del self._inflight[digest]
        return decode(json.loads(line)["v"])
