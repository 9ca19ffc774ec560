"""Read a hostile .zip or .tar(.gz/.bz2/.xz) as a list of entries, within fixed bounds.

Tar headers are parsed here, not by the stdlib: tarfile's PAX parsing of hostile input can take
seconds of GIL-held time (quadratic in the header size) and a gigabyte of memory. This reader knows
the ustar subset plus PAX `path`/`size` records and GNU long names, refuses any extended header over
a few KiB, and reads each header and record in linear time. Zip goes through zipfile (its central
directory is parsed linearly), with every error it can raise turned into BadSubmission.

Each entry is (path, reason to ignore or None, bytes or None); bytes are kept only for the paths
`wanted(path)` accepts, at most MAX_FILE_BYTES each. Names that are not UTF-8 come back escaped.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import stat
import zipfile
from pathlib import PurePosixPath

from grader.errors import BadSubmission

MAX_FILE_BYTES = 1 << 20            # one module file: 1 MiB is ~20x the reference solution
MAX_TOTAL_BYTES = 64 << 20          # everything in one archive, uncompressed (zip-bomb guard)
MAX_ARCHIVE_BYTES = 64 << 20        # the archive file itself
MAX_ENTRIES = 5000                  # entries (and extended headers) in one archive
MAX_NAME_BYTES = 1024               # one entry's path
MAX_EXTENDED_BYTES = 4096           # one PAX or GNU long-name header: real ones are a few hundred bytes
MAX_HEADER_BYTES = 4 << 20          # all headers of one archive together
BLOCK = 512


def archive_entries(path, wanted) -> list[tuple[str, str | None, bytes | None]]:
    """Every file entry of the archive at `path`; BadSubmission for anything unsafe or unreadable."""
    label = path.name
    size = path.stat().st_size
    if size > MAX_ARCHIVE_BYTES:
        raise BadSubmission(f"{label}: {size} bytes, over the {MAX_ARCHIVE_BYTES}-byte cap for an archive")
    try:
        if label.lower().endswith(".zip"):
            return _zip_entries(path, label, wanted)
        return _tar_entries(path, label, wanted)
    except (BadSubmission, MemoryError):
        raise                 # the staging child names its memory limit
    except Exception as error:  # noqa: BLE001 - any failure of a parser on hostile bytes: this archive only
        raise BadSubmission(f"{label}: unreadable archive ({type(error).__name__}: {str(error)[:200]})") from None


def printable(name: str) -> str:
    """A name as text that encodes to UTF-8 (undecodable bytes become backslash escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# --- zip --------------------------------------------------------------------------------------------


def _zip_entries(path, label, wanted):
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        if len(infos) > MAX_ENTRIES:
            raise BadSubmission(f"{label}: more than {MAX_ENTRIES} entries; refusing to unpack")
        total, entries = 0, []
        for info in infos:
            name = _checked_name(label, info.filename.replace("\\", "/"))
            if stat.S_ISLNK(info.external_attr >> 16):
                raise BadSubmission(f"{label}: entry {name!r} is a link or device; only plain files allowed")
            total += info.file_size
            if total > MAX_TOTAL_BYTES:
                raise BadSubmission(f"{label}: unpacks to more than {MAX_TOTAL_BYTES} bytes; refusing (zip bomb?)")
            if info.is_dir():
                continue
            reason = _size_reason(info.file_size)
            data = None
            if reason is None and wanted(name):
                with archive.open(info) as handle:       # reading to the end checks the CRC
                    data = _capped(handle.read(MAX_FILE_BYTES + 1), label, name)
            entries.append((name, reason, data))
    return entries


# --- tar --------------------------------------------------------------------------------------------


def _open_stream(path):
    with open(path, "rb") as handle:
        magic = handle.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def _tar_entries(path, label, wanted):
    entries = []
    with _open_stream(path) as stream:
        reader = _Reader(stream, label)
        pending: dict[str, object] = {}
        headers = 0
        while True:
            block = reader.read(BLOCK, header=True)
            if len(block) < BLOCK or block == bytes(BLOCK):
                break                                  # end of archive (or a tolerated short tail)
            headers += 1
            if headers > MAX_ENTRIES:
                raise BadSubmission(f"{label}: more than {MAX_ENTRIES} entries; refusing to unpack")
            kind, name, size = _parse_header(block, label)
            if kind in b"xgLK":
                if size > MAX_EXTENDED_BYTES:
                    raise BadSubmission(f"{label}: an extended tar header of {size} bytes (over the "
                                        f"{MAX_EXTENDED_BYTES}-byte cap); refusing to unpack")
                data = reader.read(_padded(size), header=True)[:size]
                if kind == b"x":
                    pending.update(_pax_records(data, label))
                elif kind == b"L":
                    pending["path"] = data.split(b"\0", 1)[0]
                continue
            if isinstance(pending.get("path"), bytes):
                name = pending["path"]
            if "size" in pending:
                size = pending["size"]
            pending = {}
            text = _checked_name(label, _decode(name))
            if kind not in b"0\x0075":
                raise BadSubmission(f"{label}: entry {text!r} is a link or device; only plain files allowed")
            reader.count(size)
            if kind == b"5":
                reader.skip(_padded(size))
                continue
            reason = _size_reason(size)
            if reason is None and wanted(text.rstrip("/")):
                data = reader.read(_padded(size))
                if len(data) < size:
                    raise BadSubmission(f"{label}: truncated archive (entry {text!r})")
                entries.append((text, None, data[:size]))
            else:
                reader.skip(_padded(size))
                entries.append((text, reason, None))
    return entries


class _Reader:
    """Reads from the decompressed stream, counting header and data bytes against the caps."""

    def __init__(self, stream, label):
        self.stream = stream
        self.label = label
        self.header_bytes = 0
        self.data_bytes = 0

    def read(self, size: int, header: bool = False) -> bytes:
        if header:
            self.header_bytes += size
            if self.header_bytes > MAX_HEADER_BYTES:
                raise BadSubmission(f"{self.label}: more than {MAX_HEADER_BYTES} bytes of tar headers; "
                                    "refusing to unpack")
        return self.stream.read(size)

    def count(self, size: int) -> None:
        self.data_bytes += size
        if self.data_bytes > MAX_TOTAL_BYTES:
            raise BadSubmission(f"{self.label}: unpacks to more than {MAX_TOTAL_BYTES} bytes; refusing (zip bomb?)")

    def skip(self, size: int) -> None:
        while size > 0:
            chunk = self.stream.read(min(size, 1 << 16))
            if not chunk:
                return
            size -= len(chunk)


def _parse_header(block: bytes, label: str) -> tuple[bytes, bytes, int]:
    stored = _octal(block[148:156], label)
    computed = sum(block) - sum(block[148:156]) + 8 * 32
    if stored != computed:
        raise BadSubmission(f"{label}: not a tar archive, or a corrupt header (bad checksum)")
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:262] == b"ustar":
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return block[156:157], name, _octal(block[124:136], label)


def _octal(field: bytes, label: str) -> int:
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not re.fullmatch(rb"[0-7]{1,12}", text):
        raise BadSubmission(f"{label}: a tar header with a malformed number field; refusing to unpack")
    return int(text, 8)


def _pax_records(data: bytes, label: str) -> dict[str, object]:
    """`LENGTH KEY=VALUE\\n` records, read front to back once; only path and size matter here."""
    found: dict[str, object] = {}
    position = 0
    while position < len(data) and data[position:position + 1] != b"\0":
        space = data.find(b" ", position, position + 12)
        if space < 0 or not data[position:space].isdigit():
            raise BadSubmission(f"{label}: a malformed PAX header; refusing to unpack")
        end = position + int(data[position:space])
        record = data[space + 1:end]
        if end > len(data) or end <= space or not record.endswith(b"\n") or b"=" not in record:
            raise BadSubmission(f"{label}: a malformed PAX header; refusing to unpack")
        key, value = record[:-1].split(b"=", 1)
        if key == b"path":
            found["path"] = value
        elif key == b"size":
            if not value.isdigit() or len(value) > 12:
                raise BadSubmission(f"{label}: a PAX size that is not a small number; refusing to unpack")
            found["size"] = int(value)
        position = end
    return found


def _padded(size: int) -> int:
    return (size + BLOCK - 1) // BLOCK * BLOCK


def _decode(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")


# --- shared -----------------------------------------------------------------------------------------


def _checked_name(label: str, name: str) -> str:
    """The entry's path, cleaned; the whole archive is refused for traversal or an oversized name."""
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise BadSubmission(f"{label}: an entry name over {MAX_NAME_BYTES} bytes; refusing to unpack")
    name = printable(name)
    posix = PurePosixPath(name)
    if posix.is_absolute() or ".." in posix.parts or re.match(r"^[A-Za-z]:", name):
        raise BadSubmission(f"{label}: entry {name!r} escapes the archive (path traversal)")
    while name.startswith("./"):
        name = name[2:]
    return name


def _size_reason(size: int) -> str | None:
    return f"{size} bytes, over the {MAX_FILE_BYTES}-byte cap" if size > MAX_FILE_BYTES else None


def _capped(data: bytes, label: str, name: str) -> bytes:
    """The declared size of an archive entry is not trusted."""
    if len(data) > MAX_FILE_BYTES:
        raise BadSubmission(f"{label}: {name} is larger than {MAX_FILE_BYTES} bytes once unpacked")
    return data
