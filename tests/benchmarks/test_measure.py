import hashlib
import math

from benchmarks._measure import peak_rss_mb, sha256_files, status_kib, status_mb

STATUS = "Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t  524288 kB\nVmRSS:\t  262144 kB\n"


def test_status_figures_in_kib_and_mb(tmp_path):
    status = tmp_path / "status"
    status.write_text(STATUS)
    assert status_kib("VmHWM", status) == 524288 and status_kib("VmRSS", status) == 262144
    assert status_mb("VmHWM", status) == 512.0 and status_mb("VmRSS", status) == 256.0
    assert status_kib("VmSwap", status) is None and math.isnan(status_mb("VmSwap", status))


def test_this_process_figures_are_read():
    assert peak_rss_mb() > 10 and status_mb("VmRSS") > 10  # an interpreter running pytest holds more than 10 MB


def test_sha256_files_by_relative_path_in_the_given_order(tmp_path):
    (tmp_path / "train").mkdir()
    first, second = tmp_path / "train" / "part-0.parquet", tmp_path / "stats.json"
    first.write_bytes(b"rows")
    second.write_bytes(b"{}")
    digests = sha256_files(tmp_path, [second, first])
    assert list(digests) == ["stats.json", "train/part-0.parquet"]
    assert digests["train/part-0.parquet"] == hashlib.sha256(b"rows").hexdigest()
    assert digests["stats.json"] == hashlib.sha256(b"{}").hexdigest()
