"""`grader similarity`: how alike the class's submissions are, module by module, for the staff.

Each submission is staged as `grader grade` stages it (grader.grade.submission: the same layouts,
Canvas downloads included, only the module files), then each module is fingerprinted with copydetect
(winnowed k-grams of the code with names, strings and comments abstracted away) after removing every
fingerprint of the handout's stub of that module, and every passage much of the class shares
(`common_limit`): what everyone was given, or writes alike, is not a match. A pair's
score is its most similar module's (the mean of the two files' shares of matched code); pairs are
ranked by it, flagged from the threshold, and the top pairs get a side-by-side page with the matched
code highlighted. It only reads: no grade, result or student report changes, and the pages stay in the
staff's output folder.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import BadSubmission, GraderError
from grader.grade.submission import MODULES, find_submissions, stage
from grader.report.atomic import write_atomic

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = ("the similarity check needs copydetect: pip install copydetect "
                "(or pip install -e \".[course]\" in the checkout)")
COMMON_AT_LEAST, COMMON_SHARE = 3, 0.1   # passages in more submissions than this are common code
PAGES_AT_LEAST = 20          # side-by-side pages written: every flagged pair, and at least this many


@dataclass
class ModuleMatch:
    module: str
    share_a: float           # of a's code (after the stubs are taken out), the part found in b
    share_b: float
    tokens: int
    code_a: str = ""         # highlighted HTML (escaped code with <mark> around matches)
    code_b: str = ""

    @property
    def score(self) -> float:
        """The mean of the two shares: high for a copy either way, while a short file's idioms found in
        a long one stay low."""
        return (self.share_a + self.share_b) / 2


@dataclass
class Pair:
    a: str
    b: str
    modules: list[ModuleMatch] = field(default_factory=list)
    page: str = ""

    @property
    def score(self) -> float:
        return max((m.score for m in self.modules), default=0.0)

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.modules)


def load_copydetect():
    try:
        import copydetect
        from copydetect import defaults
    except ImportError:
        raise GraderError(INSTALL_HINT) from None
    return copydetect, defaults


def compare(submissions: Path, stubs: Path | None = None) -> tuple[list[Pair], list[str]]:
    """Every pair of submissions, most similar first; plus lines for what could not be compared."""
    copydetect, defaults = load_copydetect()
    stubs = Path(stubs or REPO_ROOT / "assignment")
    sources, skipped = find_submissions(Path(submissions))
    notes = [f"skipped {line}" for line in skipped]
    files: dict[str, dict[str, Path]] = {}
    with tempfile.TemporaryDirectory(prefix="grader-similarity-") as scratch:
        for source in sources:
            try:
                staged = stage(source, Path(scratch) / source.id)
            except BadSubmission as error:
                notes.append(f"not compared: {source.id} ({error})")
                continue
            files[source.id] = {module: Path(scratch) / source.id / "assignment" / f"{module}.py"
                                for module in staged.files}
        fingerprints = _fingerprints(copydetect, defaults, files, stubs)
    pairs = []
    students = sorted(fingerprints)
    for index, a in enumerate(students):
        for b in students[index + 1:]:
            pair = Pair(a, b)
            for module in MODULES:
                if module in fingerprints[a] and module in fingerprints[b]:
                    pair.modules.append(_match(copydetect, module, fingerprints[a][module], fingerprints[b][module]))
            pairs.append(pair)
    pairs.sort(key=lambda p: (-p.score, -p.tokens, p.a, p.b))
    return pairs, notes


def write_similarity_report(submissions: Path, out: Path, stubs: Path | None = None,
                            threshold: float | None = None) -> str:
    from markupsafe import Markup

    from grader.report import html

    _, defaults = load_copydetect()
    threshold = defaults.DISPLAY_THRESHOLD if threshold is None else threshold
    pairs, notes = compare(submissions, stubs)
    out = Path(out)
    (out / "pairs").mkdir(parents=True, exist_ok=True)
    flagged = [p for p in pairs if p.score >= threshold]
    for rank, pair in enumerate(pairs[:max(len(flagged), PAGES_AT_LEAST)], start=1):
        if pair.score <= 0:
            break
        pair.page = f"pairs/{rank:04d}.html"
        modules = [(m, Markup(m.code_a), Markup(m.code_b)) for m in pair.modules if m.tokens]
        write_atomic(out / pair.page, html.render_page("similarity_pair.html.j2", pair=pair, modules=modules,
                                                       rank=rank))
    write_atomic(out / "index.html", html.render_page("similarity.html.j2", pairs=pairs, flagged=len(flagged),
                                                      threshold=threshold, notes=notes, modules=MODULES))
    linked = _link_from_class_page(out)
    return (f"wrote {out / 'index.html'}: {len(pairs)} pairs, {len(flagged)} flagged at >= {threshold:.0%}"
            + (f"; linked from {linked}" if linked else ""))


def _fingerprints(copydetect, defaults, files: dict[str, dict[str, Path]], stubs: Path) -> dict[str, dict]:
    """id -> module -> fingerprint, without the stub's passages nor those much of the class shares."""
    fingerprints: dict[str, dict] = {student: {} for student in files}
    for module in MODULES:
        owners = {student: paths[module] for student, paths in files.items() if module in paths}
        stub = _boilerplate(copydetect, stubs / f"{module}.py", defaults)
        first = {student: copydetect.CodeFingerprint(str(path), defaults.NOISE_THRESHOLD, 1, stub)
                 for student, path in owners.items()}
        seen: dict[int, int] = {}
        for fingerprint in first.values():
            for value in fingerprint.hashes:
                seen[value] = seen.get(value, 0) + 1
        common = [value for value, count in seen.items() if count > common_limit(len(files))]
        ignored = _union(stub, common)
        for student, path in owners.items():
            fingerprints[student][module] = first[student] if not common else copydetect.CodeFingerprint(
                str(path), defaults.NOISE_THRESHOLD, 1, ignored)
    return fingerprints


def common_limit(submissions: int) -> int:
    """A passage in more submissions than this is common code (the language's idioms, the seams of
    the stubs), not a sign of copying, as MOSS's -m: max(COMMON_AT_LEAST, COMMON_SHARE of the class)."""
    return max(COMMON_AT_LEAST, math.ceil(COMMON_SHARE * submissions))


def _union(first, second):
    import numpy

    return numpy.unique(numpy.concatenate([numpy.asarray(first, dtype=numpy.int64),
                                           numpy.asarray(second, dtype=numpy.int64)]))


def _boilerplate(copydetect, stub: Path, defaults):
    """The stub's fingerprints, as the sorted array copydetect takes out of every submission's."""
    import numpy

    if not stub.is_file():
        return numpy.array([], dtype=numpy.int64)
    return numpy.unique(numpy.array(list(copydetect.CodeFingerprint(str(stub), defaults.NOISE_THRESHOLD, 1).hashes)))


def _match(copydetect, module: str, a, b) -> ModuleMatch:
    from copydetect.utils import highlight_overlap

    tokens, (share_a, share_b), (slices_a, slices_b) = copydetect.compare_files(a, b)
    found = ModuleMatch(module, float(share_a), float(share_b), int(tokens))
    if tokens:
        found.code_a = highlight_overlap(a.raw_code, slices_a, "<mark>", "</mark>", escape_html=True)[0]
        found.code_b = highlight_overlap(b.raw_code, slices_b, "<mark>", "</mark>", escape_html=True)[0]
    return found


def _link_from_class_page(out: Path) -> Path | None:
    """When OUT sits in a graded output folder, rebuild its class page so that it links here."""
    from grader.points import load_points
    from grader.report.class_files import SIMILARITY_INDEX, load_results, write_class_files

    classes = out.parent
    if out.resolve() != (classes / SIMILARITY_INDEX).parent.resolve() or not load_results(classes):
        return None
    write_class_files(classes, load_points())
    return classes / "index.html"
