import tarfile

import pytest

from reasonvqa.tasks.sources.tar_stream import Member, walk

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


# Header offsets of sä_5.jpg, sa_6.jpg .. sa_8.json: a long name takes extra blocks in GNU (longname) and
# PAX (extended header) tars, none in USTAR (prefix field); PAX also writes one for the non-ASCII name.
_LATER_OFFSETS = {tarfile.GNU_FORMAT: (6144, 7168, 7680, 8192, 8704),
                  tarfile.PAX_FORMAT: (6144, 8192, 8704, 9216, 9728),
                  tarfile.USTAR_FORMAT: (5120, 6144, 6656, 7168, 7680)}


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
@pytest.mark.parametrize("read", [True, False])
def test_walk_hands_on_regular_members_and_names_the_others(tmp_path, fmt, read):
    path = tmp_path / "a.tar"
    with tarfile.open(path, "w", format=fmt) as archive:
        _fill(archive)
    events = _events(path, read)
    five, six, seven, somedir, eight = _LATER_OFFSETS[fmt]
    jpeg = b"\xff\xd8" + bytes(700)
    assert [e[:4] for e in events] == [
        ("member", "sa_1.jpg", 702, 0), ("member", "sa_1.json", 8, 1536), ("member", "sa_2.json", 0, 2560),
        ("problem", "tar_member_path", "../sa_3.json", 3072),
        ("problem", "tar_member_path", "d" * 120 + "/sa_4.json", 4096),
        ("member", "sä_5.jpg", 512, five), ("problem", "tar_member_link", "sa_6.jpg", six),
        ("problem", "tar_member_device", "sa_7.jpg", seven), ("problem", "tar_member_directory", "somedir", somedir),
        ("member", "sa_8.json", 1500, eight)]
    assert events[0][4] == (jpeg if read else jpeg[:3])
    assert events[-1][4] == b"y" * (1500 if read else 3)
    assert events[6][4] == "link to '/etc/passwd'"


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


@pytest.mark.parametrize("name, change, ending", [
    ("cut_data", lambda d, m: d[:m[1].offset_data + 50],
     lambda n: (1, [("tar_truncated", "sa_1.json", 1024, "member data ends at byte 1936, the file at 1586")])),
    ("cut_padding", lambda d, m: d[:m[1].offset_data + m[1].size + 1],
     lambda n: (2, [("tar_truncated", n, 2048, "unexpected end of data")])),
    ("cut_header", lambda d, m: d[:m[2].offset + 200],
     lambda n: (2, [("tar_truncated", n, 2048, "archive ends at byte 2248 without its end-of-archive block")])),
    ("no_end_block", lambda d, m: d[:m[2].offset_data + 1024],
     lambda n: (3, [("tar_truncated", n, 3584, "archive ends at byte 3584 without its end-of-archive block")])),
    ("corrupt_header", lambda d, m: d[:m[1].offset] + b"garbage!" * 64 + d[m[1].offset + 512:],
     lambda n: (1, [("tar_corrupt", n, 1024, "member header at byte 1024 does not parse")])),
    ("bad_checksum", lambda d, m: d[:m[1].offset + 148] + b"0000001\0" + d[m[1].offset + 156:],
     lambda n: (1, [("tar_corrupt", n, 1024, "member header at byte 1024 does not parse")])),
    ("octal_with_spaces", _octal_with_spaces, lambda n: (3, [])),
    ("base256_size", lambda d, m: _checksum(d[:m[1].offset + 124] + b"\x80" + bytes(7) + (400).to_bytes(4, "big")
                                            + d[m[1].offset + 136:], m[1].offset), lambda n: (3, [])),
])
def test_damaged_archives_end_where_tarfile_ends_them(tmp_path, name, change, ending):
    path = _cut(tmp_path, name, change)
    events = _events(path)
    members = [e[1:4] for e in events if e[0] == "member"]
    assert members == [("sa_0.json", 100, 0), ("sa_1.json", 400, 1024), ("sa_2.json", 700, 2048)][:len(members)]
    assert [e[4] for e in events if e[0] == "member"] == [b"z" * size for _, size, _ in members]
    problems = [e[1:] for e in events if e[0] == "problem"]
    assert (len(members), problems) == ending(name)
