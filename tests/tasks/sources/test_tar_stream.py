import tarfile

import pytest

from reasonvqa.tasks.sources import tar_stream
from reasonvqa.tasks.sources.tar_stream import Member, Problem, walk

from tests.tasks.sources.sa1b_fixtures import add_file, add_special


def _events(path, read: bool = True) -> list[tuple]:
    """What a walk hands on: members with their bytes (or the first 3 when ``read`` is False), problems."""
    out = []
    for item in walk(path):
        if isinstance(item, Member):
            out.append(("member", item.name, item.size, item.offset, item.stream.read() if read else item.stream.read(3)))
        else:
            out.append(("problem", item.reason, item.name, item.offset, item.detail))
    return out


def _tarfile_only(monkeypatch, path, read: bool = True) -> list[tuple]:
    with monkeypatch.context() as patch:
        patch.setattr(tar_stream, "DIRECT_HEADERS", False)
        return _events(path, read)


def _fill(archive: tarfile.TarFile) -> None:
    add_file(archive, "sa_1.jpg", b"\xff\xd8" + bytes(700))
    add_file(archive, "sa_1.json", b'{"a": 1}')
    add_file(archive, "./sa_2.json", b"")
    add_file(archive, "../sa_3.json", b"{}")
    add_file(archive, "d" * 120 + "/sa_4.json", b"{}")  # GNU longname, pax path or ustar prefix
    add_file(archive, "sä_5.jpg", b"x" * 512)
    add_special(archive, "sa_6.jpg", tarfile.SYMTYPE, "/etc/passwd")
    add_special(archive, "sa_7.jpg", tarfile.CHRTYPE)
    add_special(archive, "somedir", tarfile.DIRTYPE)
    add_file(archive, "sa_8.json", b"y" * 1500)


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
@pytest.mark.parametrize("read", [True, False])
def test_plain_headers_read_directly_give_what_tarfile_gives(tmp_path, monkeypatch, fmt, read):
    path = tmp_path / "a.tar"
    with tarfile.open(path, "w", format=fmt) as archive:
        _fill(archive)
    taken = []
    plain = tar_stream._plain_header
    monkeypatch.setattr(tar_stream, "_plain_header", lambda *a: taken.append(plain(*a)) or taken[-1])
    events = _events(path, read)
    assert events == _tarfile_only(monkeypatch, path, read)
    assert ("member", "sa_8.json", 1500, events[-1][3], b"y" * (1500 if read else 3)) == events[-1]
    assert sum(t is not None for t in taken) >= 4  # the plain members after the first came this way


def _cut(tmp_path, name: str, change) -> object:
    whole = tmp_path / "whole.tar"
    with tarfile.open(whole, "w", format=tarfile.GNU_FORMAT) as archive:
        for i in range(3):
            add_file(archive, f"sa_{i}.json", b"z" * (100 + 300 * i))
    with tarfile.open(whole) as archive:
        members = archive.getmembers()
    path = tmp_path / name
    path.write_bytes(change(bytearray(whole.read_bytes()), members))
    return path


def _checksum(data: bytearray, at: int) -> bytearray:
    data[at + 148:at + 156] = b" " * 8
    data[at + 148:at + 156] = b"%06o\0 " % sum(data[at:at + 512])
    return data


def _octal_with_spaces(data: bytearray, members) -> bytearray:
    at = members[1].offset
    data[at + 100:at + 108] = b"  644  \0"
    return _checksum(data, at)


@pytest.mark.parametrize("name, change", [
    ("cut_data", lambda d, m: d[:m[1].offset_data + 50]),
    ("cut_padding", lambda d, m: d[:m[1].offset_data + m[1].size + 1]),
    ("cut_header", lambda d, m: d[:m[2].offset + 200]),
    ("no_end_block", lambda d, m: d[:m[2].offset_data + 1024]),
    ("corrupt_header", lambda d, m: d[:m[1].offset] + b"garbage!" * 64 + d[m[1].offset + 512:]),
    ("bad_checksum", lambda d, m: d[:m[1].offset + 148] + b"0000001\0" + d[m[1].offset + 156:]),
    ("octal_with_spaces", _octal_with_spaces),
    ("base256_size", lambda d, m: _checksum(d[:m[1].offset + 124] + b"\x80" + bytes(7) + (400).to_bytes(4, "big")
                                            + d[m[1].offset + 136:], m[1].offset)),
])
def test_damaged_archives_end_where_tarfile_ends_them(tmp_path, monkeypatch, name, change):
    path = _cut(tmp_path, name, change)
    events = _events(path)
    assert events == _tarfile_only(monkeypatch, path)
    assert events[0][:3] == ("member", "sa_0.json", 100)
