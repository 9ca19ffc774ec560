"""Canvas's bulk download ("Download Submissions"): one flat folder of files named
`<name>[_LATE]_<user id>_<file id>_<file name>`, grouped per student before intake reads them.

Each student becomes one submission `<name>_<user id>` (the user id is the ID column of Canvas's
gradebook, which the roster matches): a folder of their files under their own names, or their one
archive. Canvas renames a file uploaded again as `matmul-1.py`, `matmul-2.py`: the suffix is dropped
and the latest upload (the highest file id) of each name is kept; earlier ones are listed as skipped.
`_LATE_` marks the submission late (grader.grade.submission.read_metadata takes it; metadata.csv, where
given, says more). Only bytes are copied here, under the archive cap: nothing is parsed or run, and
the per-submission intake that follows reads the copies as it reads any submission.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.grade import archives

PATTERN = re.compile(r"^(?P<name>[A-Za-z0-9-]+?)(?P<late>_LATE)?_(?P<user>\d+)_(?P<file>\d+)_(?P<original>.+)$")
RESUBMITTED = re.compile(r"^(?P<stem>.+?)-(?P<copy>\d+)(?P<suffix>\.[A-Za-z0-9]+(?:\.gz)?)$")
ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz")


@dataclass(frozen=True)
class CanvasFile:
    path: Path
    student: str          # "<name>_<user id>"
    late: bool
    file_id: int
    own_name: str         # the name the student gave it, Canvas's "-N" dropped

    @property
    def order(self) -> tuple[int, int]:
        copy = RESUBMITTED.match(PATTERN.match(self.path.name)["original"])
        return self.file_id, int(copy["copy"]) if copy else 0


@dataclass
class Grouped:
    paths: dict[str, Path]            # submission id -> its folder or archive, made here
    consumed: set[str]                # names in the download folder that were grouped
    skipped: list[str]                # "name (why)", for the batch's list of skipped entries


def canvas_file(path: Path) -> CanvasFile | None:
    match = PATTERN.match(path.name)
    if match is None or path.is_symlink() or not path.is_file():
        return None
    original = match["original"]
    copy = RESUBMITTED.match(original)
    own = f"{copy['stem']}{copy['suffix']}" if copy else original
    return CanvasFile(path, f"{match['name']}_{match['user']}", bool(match["late"]), int(match["file"]), own)


def group(root: Path) -> Grouped:
    """Group the Canvas files directly in `root`; other entries are left to intake as they are."""
    files = _canvas_files(root)
    grouped = Grouped({}, {f.path.name for f in files}, [])
    if not files:
        return grouped
    by_student: dict[str, list[CanvasFile]] = {}
    for item in files:
        by_student.setdefault(item.student, []).append(item)
    home = Path(tempfile.mkdtemp(prefix="grader-canvas-"))
    atexit.register(shutil.rmtree, home, True)
    for student, items in sorted(by_student.items()):
        latest: dict[str, CanvasFile] = {}
        for item in sorted(items, key=lambda f: f.order):
            if item.own_name in latest:
                grouped.skipped.append(f"{archives.printable(latest[item.own_name].path.name)} (Canvas: "
                                       f"superseded by a later upload, {archives.printable(item.path.name)})")
            latest[item.own_name] = item
        kept = [item for item in latest.values() if _fits(item, grouped.skipped)]
        if not kept:
            continue
        grouped.paths[student] = _materialize(home, student, kept)
    return grouped


def _fits(item: CanvasFile, skipped: list[str]) -> bool:
    size = item.path.stat().st_size
    if size > archives.MAX_ARCHIVE_BYTES:
        skipped.append(f"{archives.printable(item.path.name)} ({size} bytes, over the "
                       f"{archives.MAX_ARCHIVE_BYTES}-byte cap)")
        return False
    return True


def _materialize(home: Path, student: str, kept: list[CanvasFile]) -> Path:
    """One archive alone stays an archive (`<id>.zip`); anything else becomes a folder `<id>/`."""
    if len(kept) == 1:
        suffix = next((s for s in ARCHIVES if kept[0].own_name.lower().endswith(s)), None)
        if suffix is not None:
            target = home / f"{student}{suffix}"
            shutil.copyfile(kept[0].path, target)
            return target
    folder = home / student
    folder.mkdir()
    for item in kept:
        shutil.copyfile(item.path, folder / item.own_name)
    return folder


def late_ids(root: Path) -> set[str]:
    """Submission ids whose kept Canvas files are marked `_LATE_` (no copying: names only)."""
    latest: dict[tuple[str, str], CanvasFile] = {}
    for item in sorted(_canvas_files(root), key=lambda f: f.order):
        latest[item.student, item.own_name] = item
    return {item.student for item in latest.values() if item.late}


def _canvas_files(root: Path) -> list[CanvasFile]:
    if not Path(root).is_dir():
        return []
    return [f for f in map(canvas_file, sorted(Path(root).iterdir())) if f is not None]
