"""Submission intake: find one submission per student, and copy only its allow-listed module files.

A submission is a folder or an archive (.zip, .tar, .tar.gz, .tgz) named after the student. Its module
files sit flat or under `assignment/`, optionally inside one wrapper folder (what zipping a folder
gives). Nothing from the submission is ever executed or imported here: module files are read as bytes
with a size cap and written into a fresh staging tree `<dest>/assignment/<module>.py`; every other entry
is ignored and listed, and archives with path traversal, links or too much data are refused whole.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import stat
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.errors import BadSubmission

MODULES = ("accounting", "mixed_precision", "softmax", "matmul", "flash_attention")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip", ".tar")
MAX_FILE_BYTES = 1 << 20           # one module file: 1 MiB is ~20x the reference solution
MAX_TOTAL_BYTES = 64 << 20          # everything in one archive, uncompressed (zip-bomb guard)
MAX_ENTRIES = 5000                  # entries in one archive
METADATA_FILE = "metadata.csv"      # optional, beside the submissions: id, late[, submitted_at]
_SAFE_ID = re.compile(r"[^A-Za-z0-9._@+-]+")


@dataclass(frozen=True)
class Source:
    """One student's submission as found on disk (not yet read)."""

    id: str
    path: Path

    @property
    def kind(self) -> str:
        return "folder" if self.path.is_dir() else "archive"


@dataclass
class Staged:
    """What intake copied: module -> sha256 of its bytes, plus everything it left out and why."""

    id: str
    files: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)      # "path (reason)"
    missing: list[str] = field(default_factory=list)      # allow-listed modules not submitted

    @property
    def content_hash(self) -> str:
        """Hash of the staged files only: unchanged modules mean an unchanged grade."""
        digest = hashlib.sha256()
        for module in sorted(self.files):
            digest.update(f"{module}\0{self.files[module]}\0".encode())
        return digest.hexdigest()


def find_submissions(root: Path) -> tuple[list[Source], list[str]]:
    """Every submission under `root`, sorted by id; plus entries skipped (duplicate ids, stray files)."""
    sources: dict[str, Source] = {}
    skipped = []
    for path in sorted(Path(root).iterdir()):
        if path.name.startswith(".") or path.name == METADATA_FILE:
            continue
        if path.is_symlink():
            skipped.append(f"{path.name} (a symbolic link; submissions must be real folders or files)")
            continue
        student = submission_id(path)
        if student is None:
            skipped.append(f"{path.name} (not a folder or a .zip/.tar/.tar.gz/.tgz archive)")
        elif student in sources:
            skipped.append(f"{path.name} (same id {student!r} as {sources[student].path.name})")
        else:
            sources[student] = Source(student, path)
    return [sources[key] for key in sorted(sources)], skipped


def submission_id(path: Path) -> str | None:
    """The student id a folder or archive stands for, made safe to use as a folder name."""
    name = path.name
    if not path.is_dir():
        suffix = next((s for s in ARCHIVE_SUFFIXES if name.lower().endswith(s)), None)
        if suffix is None:
            return None
        name = name[: -len(suffix)]
    safe = _SAFE_ID.sub("_", name).strip("._")
    return safe or None


def read_metadata(root: Path) -> dict[str, dict]:
    """Optional `metadata.csv` beside the submissions (written by staff, never by students)."""
    path = Path(root) / METADATA_FILE
    if not path.exists():
        return {}
    rows = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            student = (row.get("id") or "").strip()
            if student:
                late = (row.get("late") or "").strip().lower()
                rows[student] = {"late": late in ("1", "true", "yes", "y"),
                                 "submitted_at": (row.get("submitted_at") or "").strip()}
    return rows


def stage(source: Source, dest: Path) -> Staged:
    """Copy the allow-listed module files of `source` into `dest/assignment/`; raise BadSubmission
    for an unsafe or unreadable archive. An empty result (no module) is for the caller to judge."""
    entries = _folder_entries(source.path) if source.kind == "folder" else _archive_entries(source.path)
    staged = Staged(source.id)
    chosen: dict[str, tuple[int, str, bytes]] = {}
    for relpath, reason, read in entries:
        module, rank = _module_of(relpath)
        if reason is None and module is None:
            reason = "not an assignment module file"
        if reason is not None:
            staged.ignored.append(f"{relpath} ({reason})")
            continue
        if module in chosen:
            old_rank, old_path, _ = chosen[module]
            if rank >= old_rank:
                staged.ignored.append(f"{relpath} (duplicate of {old_path})")
                continue
            staged.ignored.append(f"{old_path} (duplicate of {relpath})")
        chosen[module] = (rank, relpath, read())
    target = Path(dest) / "assignment"
    target.mkdir(parents=True, exist_ok=True)
    (target / "__init__.py").write_text("")
    for module, (_, _, data) in sorted(chosen.items()):
        (target / f"{module}.py").write_bytes(data)
        staged.files[module] = hashlib.sha256(data).hexdigest()
    staged.missing = [m for m in MODULES if m not in chosen]
    return staged


def _module_of(relpath: str) -> tuple[str | None, int]:
    """(module, preference) when relpath is an allow-listed location; lower preference wins."""
    parts = PurePosixPath(relpath).parts
    if not parts or not parts[-1].endswith(".py") or parts[-1][:-3] not in MODULES:
        return None, 0
    module, folders = parts[-1][:-3], parts[:-1]
    layouts = [("assignment",), (), (None, "assignment"), (None,)]   # None: one wrapper folder
    for rank, layout in enumerate(layouts):
        if len(layout) == len(folders) and all(a in (None, b) for a, b in zip(layout, folders)):
            return module, rank
    return None, 0


def _folder_entries(root: Path):
    """(relative path, reason to ignore or None, reader) for every file below a folder; links are
    listed and never followed."""
    for path in sorted(root.rglob("*")):
        relpath = path.relative_to(root).as_posix()
        if path.is_symlink():
            yield relpath, "symbolic link", None
        elif path.is_file():
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                yield relpath, f"{size} bytes, over the {MAX_FILE_BYTES}-byte cap", None
            else:
                yield relpath, None, (lambda p=path: _read_capped(p.open("rb"), relpath))


def _archive_entries(path: Path):
    """Like _folder_entries for an archive, after checking the whole archive is safe to read."""
    try:
        if path.name.lower().endswith(".zip"):
            return _zip_entries(zipfile.ZipFile(path))
        return _tar_entries(tarfile.open(path, "r:*"))
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as error:
        raise BadSubmission(f"{path.name}: unreadable archive ({error})") from None


def _zip_entries(archive: zipfile.ZipFile):
    infos = archive.infolist()
    _check_archive(archive.filename, [(i.filename, i.file_size, _zip_is_link(i)) for i in infos])
    entries = []
    for info in infos:
        if info.is_dir():
            continue
        reason = _size_reason(info.file_size)
        entries.append((_clean(info.filename), reason,
                        lambda i=info: _read_capped(archive.open(i), i.filename)))
    return entries


def _zip_is_link(info: zipfile.ZipInfo) -> bool:
    mode = info.external_attr >> 16
    return stat.S_ISLNK(mode)


def _tar_entries(archive: tarfile.TarFile):
    members = []
    total = 0
    for member in archive:                # streams: stops early on a bomb instead of listing it all
        members.append(member)
        total += max(member.size, 0)
        if len(members) > MAX_ENTRIES or total > MAX_TOTAL_BYTES:
            break
    _check_archive(archive.name or "archive",
                   [(m.name, m.size, not (m.isfile() or m.isdir())) for m in members])
    entries = []
    for member in members:
        if member.isfile():
            entries.append((_clean(member.name), _size_reason(member.size),
                            lambda m=member: _read_capped(archive.extractfile(m), m.name)))
    return entries


def _check_archive(name, entries):
    """Refuse the whole archive on traversal, links/devices, too many entries or too much data."""
    label = Path(str(name)).name
    if len(entries) > MAX_ENTRIES:
        raise BadSubmission(f"{label}: more than {MAX_ENTRIES} entries; refusing to unpack")
    total = 0
    for entry, size, special in entries:
        posix = PurePosixPath(entry.replace("\\", "/"))
        if posix.is_absolute() or ".." in posix.parts or re.match(r"^[A-Za-z]:", entry):
            raise BadSubmission(f"{label}: entry {entry!r} escapes the archive (path traversal)")
        if special:
            raise BadSubmission(f"{label}: entry {entry!r} is a link or device; only plain files allowed")
        total += max(size, 0)
    if total > MAX_TOTAL_BYTES:
        raise BadSubmission(f"{label}: unpacks to more than {MAX_TOTAL_BYTES} bytes; refusing (zip bomb?)")


def _clean(name: str) -> str:
    cleaned = name.replace("\\", "/")
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    return cleaned


def _size_reason(size: int) -> str | None:
    return f"{size} bytes, over the {MAX_FILE_BYTES}-byte cap" if size > MAX_FILE_BYTES else None


def _read_capped(handle: io.BufferedIOBase, name: str) -> bytes:
    """Read at most the cap; the declared size of an archive entry is not trusted."""
    with handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise BadSubmission(f"{name}: larger than {MAX_FILE_BYTES} bytes once unpacked")
    return data
