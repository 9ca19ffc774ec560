"""Tiny generators of hostile archives, built at test time (none is stored in the repo).

Raw tar blocks are written here byte by byte, since tarfile refuses to write most of these.
"""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path


def tar_block(name: bytes, size: int, kind: bytes = b"0") -> bytes:
    """One ustar header block with a valid checksum."""
    block = bytearray(512)
    block[0:len(name)] = name
    block[100:108], block[108:116], block[116:124] = b"0000644\0", b"0000000\0", b"0000000\0"
    block[124:136], block[136:148] = b"%011o\0" % size, b"00000000000\0"
    block[156:157], block[257:263], block[263:265] = kind, b"ustar\0", b"00"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def tar_member(name: bytes, data: bytes = b"", kind: bytes = b"0") -> bytes:
    return tar_block(name, len(data), kind) + data + bytes(-len(data) % 512)


def write_tar(path: Path, members: list[bytes], compress: bool = False) -> Path:
    data = b"".join(members) + bytes(1024)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def pax_records_bomb(path: Path, size: int) -> Path:
    """A PAX header whose records all match the stdlib's pattern anew from each position: quadratic
    time and memory in tarfile (each keyword is the rest of the header)."""
    payload = b"2 " * (size // 2) + b"=\n"
    return write_tar(path, [tar_member(b"././@PaxHeader", payload, b"x"), tar_member(b"matmul.py", b"x = 1\n")])


def ignored_names_flood(path: Path, count: int = 5000, length: int = 1000) -> Path:
    """Thousands of long names (GNU long-name headers) that compress to almost nothing."""
    members = []
    for index in range(count):
        name = b"%06d/" % index + b"n" * length
        members.append(tar_member(b"././@LongLink", name + b"\0", b"L") + tar_member(name[:100]))
    return write_tar(path, members + [tar_member(b"matmul.py", b"x = 1\n")], compress=True)


def zip_with_bad_crc(path: Path) -> Path:
    content = b"MATMUL = 1  # a module whose stored bytes were damaged\n"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("matmul.py", content)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(content, content.replace(b"1", b"2"), 1))
    return path


def zip_with_utf8_flag_and_bad_name(path: Path) -> Path:
    """The UTF-8 flag set on a name that is not UTF-8."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("caf\u00e9.py", "x = 1\n")      # non-ASCII: zipfile sets the UTF-8 flag
        archive.writestr("matmul.py", "x = 1\n")
    raw = path.read_bytes()
    path.write_bytes(raw.replace("caf\u00e9".encode(), b"caf\xff\xfe"))
    return path
