"""The documentation names only what exists, and says what is true now rather than where it came from.

Every repo path that README.md, SECURITY.md or a page under docs/ names (in backticks or as a markdown
link) must exist, and every `grader.x.y` name they give must be a module of the grader or a name
defined at the top of one. The measurement logs in docs/history/ and CHANGELOG.md are the record of
their day and are left as written. Nothing outside those logs speaks of work sessions, of time lent on
a device, or of issue numbers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOP_FILES = ("README.md", "SECURITY.md")
# First components of the repo paths a page may name; anything else in backticks is not a repo path.
REPO_TOPS = ("grader", "tests", "tests_public", "tests_hidden", "solutions", "assignment", "handout",
             "docs", "scripts", "examples", ".ci", "Makefile", "pyproject.toml", "CHANGELOG.md", *TOP_FILES)
GENERATED = ("examples/submissions",)   # written by `make install` (examples/make_examples.py), ignored by git
PATH_TOKEN = re.compile(r"^[\w.<>*/-]+$")
BACKTICKS = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
GRADER_NAME = re.compile(r"^grader(\.[A-Za-z_<>][\w<>]*)+")
# Words of how the work went, not of what the code is. "device[ ]time" keeps this file out of its own net.
HISTORY_WORDS = re.compile(r"\bsessions? [0-9]|\((earlier|last|this) session|device[ ](time|budget)"
                           r"|\bissues? [0-9]+\b", re.IGNORECASE)
SWEPT = ("README.md", "SECURITY.md", "docs", "grader", "tests", "tests_public", "tests_hidden", "solutions",
         "assignment", "handout", "scripts")


def documentation_pages(repo: Path = REPO) -> list[Path]:
    pages = [repo / name for name in TOP_FILES if (repo / name).is_file()]
    pages += sorted(p for p in (repo / "docs").rglob("*.md") if (repo / "docs" / "history") not in p.parents)
    return pages


def named_paths(text: str) -> list[str]:
    """Repo paths a page names: the first word of each backtick span that looks like one, and links."""
    found = []
    for span in BACKTICKS.findall(text):
        words = span.split()
        token = words[0].rstrip(".,:;") if words else ""
        if PATH_TOKEN.match(token) and token.split("/")[0] in REPO_TOPS and ("/" in token or token in REPO_TOPS):
            found.append(token)
    found += [target.split("#")[0] for target in LINK.findall(text)
              if not re.match(r"^[a-z]+:", target) and target.split("#")[0]]
    return found


def path_exists(repo: Path, page: Path, name: str) -> bool:
    if any(name == g or name.startswith(g + "/") for g in GENERATED):
        return True
    base = repo if name.split("/")[0] in REPO_TOPS else page.parent
    pattern = re.sub(r"<[^>]+>", "*", name.rstrip("/"))
    if "*" in pattern:
        return any(base.glob(pattern))
    return (base / pattern).exists()


def top_level_names(module: Path) -> set[str]:
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def grader_name_exists(repo: Path, dotted: str) -> bool:
    """`grader.a.b` is a package or module, or `b` is defined at the top of module `grader.a`."""
    parts, here = dotted.split("."), repo
    for index, part in enumerate(parts):
        if "<" in part:
            return True                               # a placeholder: `grader.perf.cases.<kernel>`
        if (here / part / "__init__.py").is_file():
            here = here / part
            continue
        if (here / f"{part}.py").is_file():
            rest = parts[index + 1:]
            return not rest or rest[0] in top_level_names(here / f"{part}.py")
        return index > 0 and part in top_level_names(here / "__init__.py")
    return True


def named_grader_names(text: str) -> list[str]:
    found = []
    for span in BACKTICKS.findall(text):
        match = GRADER_NAME.match(span.strip())
        if match:
            found.append(match.group(0))
    return found


def missing_names(repo: Path = REPO) -> list[str]:
    missing = []
    for page in documentation_pages(repo):
        text, where = page.read_text(), page.relative_to(repo)
        missing += [f"{where}: {name}" for name in named_paths(text) if not path_exists(repo, page, name)]
        missing += [f"{where}: {name}" for name in named_grader_names(text) if not grader_name_exists(repo, name)]
    return missing


def history_words(repo: Path = REPO) -> list[str]:
    found, history = [], repo / "docs" / "history"
    for top in SWEPT:
        root = repo / top
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if history in path.parents or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                continue                              # binary files (screenshots) hold no words
            for number, line in enumerate(text.splitlines(), 1):
                if HISTORY_WORDS.search(line):
                    found.append(f"{path.relative_to(repo)}:{number}: {line.strip()}")
    return found


def test_every_path_and_grader_name_the_docs_give_exists():
    assert missing_names() == []


def test_no_words_of_sessions_device_time_or_issue_numbers_outside_the_logs():
    assert history_words() == []


@pytest.mark.parametrize("named", ["`grader/timing.py`", "[perf](docs/performance.md)",
                                   "`grader/benchmarks/<kernel>.py`", "`grader.perf.timing.measure_ratio`",
                                   "`grader.perf.measure.no_such_function`", "`scripts/bench_grading.py --x`"])
def test_a_page_naming_what_does_not_exist_is_caught(tmp_path, named):
    (tmp_path / "grader" / "perf").mkdir(parents=True)
    for package in ("grader", "grader/perf"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "grader" / "perf" / "measure.py").write_text("def measure_ratio():\n    pass\n")
    (tmp_path / "README.md").write_text(f"See {named} and `grader.perf.measure.measure_ratio`.\n")
    assert missing_names(tmp_path) == [f"README.md: {_core(named)}"]


def test_placeholders_generated_folders_and_commands_are_not_missing(tmp_path):
    (tmp_path / "grader" / "points").mkdir(parents=True)
    (tmp_path / "grader" / "points" / "softmax.toml").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("`grader/points/<problem>.toml`, `examples/submissions/partial`, "
                                            "`grader grade examples/submissions`, `dist/handout/`, [b](b.md)\n")
    (tmp_path / "docs" / "b.md").write_text("")
    assert missing_names(tmp_path) == []


# Each phrase is split in two here, so that this file holds none of them whole.
@pytest.mark.parametrize("line", ["measured in session" " 27", "as issue" " 15 asked", "the device" " time ran out",
                                  "(earlier" " session)", "Issues" " 14 and 17"])
def test_history_words_are_caught_outside_the_logs_only(tmp_path, line):
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "x.py").write_text(f"# {line}\n")
    (tmp_path / "docs" / "history").mkdir(parents=True)
    (tmp_path / "docs" / "history" / "log.md").write_text(f"{line}\n")
    assert history_words(tmp_path) == [f"grader/x.py:1: # {line}"]


def _core(named: str) -> str:
    inner = named.strip("`")
    if inner.startswith("["):
        return inner.split("(", 1)[1].rstrip(")")
    return inner.split()[0]
