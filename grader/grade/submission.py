"""Submission intake: find one submission per student, and copy only the files that count.

A submission is a folder or an archive (.zip, .tar, .tar.gz, .tgz) named after the student. Which of
its files count is grader.submission_files' rule, the one the local checks and `make submission` use
too: the five module files at any depth, and the helper modules beside them. Nothing from the
submission is ever executed or imported here: those files are read as bytes with a size cap and written
into a fresh staging tree `<dest>/assignment/<name>.py`; every other entry is ignored and listed with
its reason, and archives with path traversal, links or too much data are refused whole.
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
from pathlib import Path

from grader import submission_files
from grader.course import canvas_download
from grader.errors import BadSubmission
from grader.grade import archives

MODULES = submission_files.MODULES
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
    """What intake copied: module (and helper module) -> sha256 of its bytes, where each came from, plus
    everything it left out and why."""

    id: str
    files: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)      # "path (reason)"
    missing: list[str] = field(default_factory=list)      # allow-listed modules not submitted
    helpers: dict[str, str] = field(default_factory=dict)
    found: dict[str, str] = field(default_factory=dict)    # module or helper -> its path in the submission
    missing_reasons: dict[str, str] = field(default_factory=dict)   # missing module -> why, when known

    @property
    def content_hash(self) -> str:
        """Hash of the staged files only: unchanged modules and helpers mean an unchanged grade."""
        digest = hashlib.sha256()
        for module in sorted(self.files):
            digest.update(f"{module}\0{self.files[module]}\0".encode())
        for helper in sorted(self.helpers):
            digest.update(f"helper {helper}\0{self.helpers[helper]}\0".encode())
        return digest.hexdigest()

    def to_json(self) -> dict:
        return {"files": self.files, "ignored": self.ignored, "missing": self.missing, "helpers": self.helpers,
                "found": self.found, "missing_reasons": self.missing_reasons}

    @classmethod
    def from_json(cls, student: str, reply: dict) -> Staged:
        return cls(student, dict(reply["files"]), list(reply["ignored"]), list(reply["missing"]),
                   dict(reply["helpers"]), dict(reply["found"]), dict(reply["missing_reasons"]))

    def nothing_reason(self) -> str:
        """Why nothing could be graded: the near misses and tied copies found, else what was looked for."""
        known = "; ".join(self.missing_reasons.values())
        wanted = ", ".join(f"{module}.py" for module in MODULES)
        return f"no assignment module files found ({known})" if known else \
            f"no assignment module files found (looked for {wanted} at any depth)"


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
    return Staged.from_json(source.id, reply)


def _child_main() -> None:
    """Entry of the staging child: limits first, then the hostile input; one JSON line on stdout."""
    student, path, dest, memory, cpu = sys.argv[2:7]
    resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 * archives.MAX_FILE_BYTES, 2 * archives.MAX_FILE_BYTES))
    try:
        reply = stage_here(Source(student, Path(path)), Path(dest)).to_json()
    except BadSubmission as error:
        reply = {"error": str(error)}
    except MemoryError:
        reply = {"error": f"{Path(path).name}: unpacking it needs over {int(memory) >> 20} MiB; refusing it"}
    except Exception as error:  # noqa: BLE001 - whatever the input did, it concerns this submission only
        reply = {"error": f"{Path(path).name}: unreadable ({type(error).__name__}: {str(error)[:200]})"}
    sys.stdout.write(json.dumps(reply))


def stage_here(source: Source, dest: Path) -> Staged:
    """Copy what counts of `source` (grader.submission_files) into `dest/assignment/`; raise BadSubmission
    for an unsafe or unreadable archive. An empty result (no module) is for the caller to judge."""
    if source.kind == "folder":
        entries = _folder_entries(source.path)
    else:
        entries = archives.archive_entries(source.path, lambda name: name.endswith(".py"))
    unreadable = [(relpath, reason) for relpath, reason, _ in entries if reason is not None]
    counted = submission_files.count([relpath for relpath, reason, _ in entries if reason is None])
    wanted = {path: name for name, path in [*counted.modules.items(), *counted.helpers.items()]}
    data = _read_counted(source, entries, wanted)
    staged = Staged(source.id)
    left_out = dict(unreadable) | dict(counted.left_out)
    staged.ignored = _bounded_listing([f"{path} ({left_out[path]})" for path in sorted(left_out)])
    target = Path(dest) / "assignment"
    target.mkdir(parents=True, exist_ok=True)
    (target / "__init__.py").write_text("")
    for path, name in sorted(wanted.items(), key=lambda item: item[1]):
        (target / f"{name}.py").write_bytes(data[path])
        digest = hashlib.sha256(data[path]).hexdigest()
        (staged.files if name in MODULES else staged.helpers)[name] = digest
        staged.found[name] = path
    staged.missing = counted.missing
    staged.missing_reasons = counted.missing_reasons()
    return staged


def _read_counted(source: Source, entries, wanted: dict[str, str]) -> dict[str, bytes]:
    """The bytes of the counted files: archives carry them in their entries; folders are read now."""
    if source.kind != "folder":
        return {relpath: data for relpath, _, data in entries if relpath in wanted}
    found = {}
    for relpath, _, path in entries:
        if relpath not in wanted:
            continue
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise BadSubmission(f"{relpath}: larger than {MAX_FILE_BYTES} bytes once read")
        found[relpath] = data
    return found


def _bounded_listing(lines: list[str]) -> list[str]:
    """At most MAX_LISTED lines of at most MAX_LISTED_CHARS each: the report lists, it does not copy."""
    shown = [line if len(line) <= MAX_LISTED_CHARS else line[:MAX_LISTED_CHARS] + "..." for line in lines[:MAX_LISTED]]
    if len(lines) > MAX_LISTED:
        shown.append(f"... and {len(lines) - MAX_LISTED} more files")
    return shown


def _folder_entries(root: Path):
    """(relative path, reason to ignore or None, the file) for every file below a folder; links are
    listed and never followed; nothing is read yet (only what counts is, by `_read_counted`)."""
    entries = []
    for count, path in enumerate(sorted(root.rglob("*")), start=1):
        if count > archives.MAX_ENTRIES:
            raise BadSubmission(f"{root.name}: more than {archives.MAX_ENTRIES} entries; refusing it")
        relpath = archives.printable(path.relative_to(root).as_posix())
        if path.is_symlink():
            entries.append((relpath, "symbolic link", path))
        elif path.is_file():
            size = path.stat().st_size
            reason = f"{size} bytes, over the {MAX_FILE_BYTES}-byte cap" if size > MAX_FILE_BYTES else None
            entries.append((relpath, reason, path))
    return entries
