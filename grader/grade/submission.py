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
import json
import re
import resource
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.course import canvas_download
from grader.errors import BadSubmission
from grader.grade import archives

MODULES = ("accounting", "mixed_precision", "softmax", "matmul", "flash_attention")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip", ".tar")
MAX_FILE_BYTES = archives.MAX_FILE_BYTES
MAX_LISTED, MAX_LISTED_CHARS = 100, 300   # ignored files named in a report, and each line's length
STAGING_MEMORY_BYTES = 512 << 20   # address space of the staging child (Python itself takes ~30 MiB)
STAGING_CPU_S = 20
STAGING_TIMEOUT_S = 60
REPO_ROOT = Path(__file__).resolve().parents[2]
# What the runner writes beside the students' folders (and their temporary names while written).
CLASS_FILES = {name + suffix for name in ("grades.csv", "index.html", "leaderboard.html", "course.toml")
               for suffix in ("", ".tmp")}
METADATA_FILE = "metadata.csv"      # optional, beside the submissions: id, submitted_at, late
_SAFE_ID = re.compile(r"[^A-Za-z0-9._@+-]+")


@dataclass(frozen=True)
class Source:
    """One student's submission as found on disk (not yet read)."""

    id: str
    path: Path
    problem: str = ""      # why it cannot be graded before it is even read (a clash of names)

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
    """Every submission under `root`, sorted by id; plus entries skipped (links, stray files).

    Two entries with one id (`x/` and `x.zip`) become one not-gradable submission naming both, and an
    id that is a class output's name (`grades.csv`) is graded as `_<id>`, never a real id (ids do not
    start with `_`), and not gradable: its outputs must not replace the class files."""
    canvas = canvas_download.group(Path(root))        # a Canvas bulk download's flat files, per student first
    found: dict[str, list[Path]] = {student: [path] for student, path in canvas.paths.items()}
    skipped = list(canvas.skipped)
    for path in sorted(Path(root).iterdir()):
        if path.name.startswith(".") or path.name == METADATA_FILE or path.name in canvas.consumed:
            continue
        if path.is_symlink():
            skipped.append(f"{archives.printable(path.name)} (a symbolic link; submissions must be real "
                           "folders or files)")
            continue
        student = submission_id(path)
        if student is None:
            skipped.append(f"{archives.printable(path.name)} (not a folder or a .zip/.tar/.tar.gz/.tgz archive)")
        else:
            found.setdefault(student, []).append(path)
    sources = []
    for student, paths in found.items():
        names = " and ".join(archives.printable(p.name) for p in paths)
        problem = ""
        if len(paths) > 1:
            problem = f"{names} both stand for the id {student!r}: keep exactly one of them and grade again"
        if student.lower() in CLASS_FILES:
            problem = (f"{names}: the id {student!r} is the name of a class output file; rename the "
                       "submission and grade again")
            student = "_" + student
        sources.append(Source(student, paths[0], problem))
    return sorted(sources, key=lambda source: source.id), skipped


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
    """Optional `metadata.csv` beside the submissions (written by staff, never by students): columns
    `id`, `submitted_at` (ISO 8601; without an offset, the course file's time zone) and `late` (yes/no).
    Submissions a Canvas bulk download marks `_LATE_` are late unless metadata.csv says otherwise."""
    path = Path(root) / METADATA_FILE
    rows = {student: {"late": True, "submitted_at": ""} for student in canvas_download.late_ids(Path(root))}
    if not path.exists():
        return rows
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            student = (row.get("id") or "").strip()
            if student:
                late = (row.get("late") or "").strip().lower()
                rows[student] = {"late": late in ("1", "true", "yes", "y"),
                                 "submitted_at": (row.get("submitted_at") or "").strip()}
    return rows


def stage(source: Source, dest: Path) -> Staged:
    """`stage_here` in a child process with memory, CPU-time and file-size limits, so no archive can
    stall or exhaust the grader itself; BadSubmission for an unsafe, unreadable or too costly one."""
    if source.problem:
        raise BadSubmission(source.problem)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from grader.grade.submission import _child_main; _child_main()")
    command = [sys.executable, "-I", "-S", "-c", code, str(REPO_ROOT), source.id, str(source.path), str(dest),
               str(STAGING_MEMORY_BYTES), str(STAGING_CPU_S)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=STAGING_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BadSubmission(f"{source.path.name}: unpacking took over {STAGING_TIMEOUT_S} s; refusing it") from None
    try:
        reply = json.loads(done.stdout.decode("utf-8", "replace") or "null")
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise BadSubmission(f"{source.path.name}: unpacking it failed (exit code {done.returncode}; over the "
                            f"{STAGING_MEMORY_BYTES >> 20} MiB or {STAGING_CPU_S} s limits?)")
    if "error" in reply:
        raise BadSubmission(str(reply["error"]))
    return Staged(source.id, dict(reply["files"]), list(reply["ignored"]), list(reply["missing"]))


def _child_main() -> None:
    """Entry of the staging child: limits first, then the hostile input; one JSON line on stdout."""
    student, path, dest, memory, cpu = sys.argv[2:7]
    resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 * archives.MAX_FILE_BYTES, 2 * archives.MAX_FILE_BYTES))
    try:
        staged = stage_here(Source(student, Path(path)), Path(dest))
        reply = {"files": staged.files, "ignored": staged.ignored, "missing": staged.missing}
    except BadSubmission as error:
        reply = {"error": str(error)}
    except MemoryError:
        reply = {"error": f"{Path(path).name}: unpacking it needs over {int(memory) >> 20} MiB; refusing it"}
    except Exception as error:  # noqa: BLE001 - whatever the input did, it concerns this submission only
        reply = {"error": f"{Path(path).name}: unreadable ({type(error).__name__}: {str(error)[:200]})"}
    sys.stdout.write(json.dumps(reply))


def stage_here(source: Source, dest: Path) -> Staged:
    """Copy the allow-listed module files of `source` into `dest/assignment/`; raise BadSubmission
    for an unsafe or unreadable archive. An empty result (no module) is for the caller to judge."""
    entries = _folder_entries(source.path) if source.kind == "folder" else \
        archives.archive_entries(source.path, _is_module_path)
    staged = Staged(source.id)
    chosen: dict[str, tuple[int, str, bytes]] = {}
    ignored = []
    for relpath, reason, data in entries:
        module, rank = _module_of(relpath)
        if reason is None and module is None:
            reason = "not an assignment module file"
        if reason is not None:
            ignored.append(f"{relpath} ({reason})")
            continue
        if module in chosen:
            old_rank, old_path, _ = chosen[module]
            if rank >= old_rank:
                ignored.append(f"{relpath} (duplicate of {old_path})")
                continue
            ignored.append(f"{old_path} (duplicate of {relpath})")
        chosen[module] = (rank, relpath, data)
    staged.ignored = _bounded_listing(ignored)
    target = Path(dest) / "assignment"
    target.mkdir(parents=True, exist_ok=True)
    (target / "__init__.py").write_text("")
    for module, (_, _, data) in sorted(chosen.items()):
        (target / f"{module}.py").write_bytes(data)
        staged.files[module] = hashlib.sha256(data).hexdigest()
    staged.missing = [m for m in MODULES if m not in chosen]
    return staged


def _bounded_listing(lines: list[str]) -> list[str]:
    """At most MAX_LISTED lines of at most MAX_LISTED_CHARS each: the report lists, it does not copy."""
    shown = [line if len(line) <= MAX_LISTED_CHARS else line[:MAX_LISTED_CHARS] + "..." for line in lines[:MAX_LISTED]]
    if len(lines) > MAX_LISTED:
        shown.append(f"... and {len(lines) - MAX_LISTED} more files")
    return shown


def _is_module_path(relpath: str) -> bool:
    return _module_of(relpath)[0] is not None


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
    """(relative path, reason to ignore or None, bytes or None) for every file below a folder; links
    are listed and never followed; only module candidates are read."""
    count = 0
    for path in sorted(root.rglob("*")):
        count += 1
        if count > archives.MAX_ENTRIES:
            raise BadSubmission(f"{root.name}: more than {archives.MAX_ENTRIES} entries; refusing it")
        relpath = archives.printable(path.relative_to(root).as_posix())
        if path.is_symlink():
            yield relpath, "symbolic link", None
        elif path.is_file():
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                yield relpath, f"{size} bytes, over the {MAX_FILE_BYTES}-byte cap", None
            elif _module_of(relpath)[0] is None:
                yield relpath, None, None
            else:
                with path.open("rb") as handle:
                    data = handle.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:
                    raise BadSubmission(f"{relpath}: larger than {MAX_FILE_BYTES} bytes once read")
                yield relpath, None, data
