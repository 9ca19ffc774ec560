"""The write-up students read: one section per problem, rendered from `handout/` templates.

What each section says comes from the sources that already hold it, never retyped:
- background: `handout/problems/<module>.md` (the lecture's ideas in the course's words);
- what to implement: signatures and docstrings read with `ast` from `solutions/<module>.py`
  (the functions holding a solution region are the ones students write);
- points and perf ladders: `grader.points` (the same table the grader scores with).
The Markdown is also rendered to one standalone HTML page by a small converter below (jinja2 is the only
templating dependency the project allows).
"""

from __future__ import annotations

import ast
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from grader.handout.stubs import BEGIN, find_regions, gates
from grader.handout.where_checks_run import points_by_place
from grader.interpreter_limits import LIMITS
from grader.points import LEVEL_CREDIT, SLOW_CREDIT, Check, PointsTable, load_points
from grader.worker.allowed_imports import ALLOWED_TEXT

TEMPLATES = "handout"


@dataclass
class FunctionDoc:
    name: str
    signature: str            # "def name(args) -> ret:" as written in the reference
    decorators: list[str]
    docstring: str
    to_implement: bool        # holds a solution region: the student writes its body
    members: list["FunctionDoc"] = field(default_factory=list)   # a class's methods that hold regions

    @property
    def is_kernel(self) -> bool:
        return any("jit" in decorator for decorator in self.decorators)


@dataclass
class ProblemDoc:
    id: str
    title: str
    order: int
    background: str                         # Markdown
    module_doc: str
    functions: list[FunctionDoc] = field(default_factory=list)
    public_checks: list[Check] = field(default_factory=list)
    hidden_checks: list[Check] = field(default_factory=list)
    perf_checks: list[Check] = field(default_factory=list)
    has_module: bool = True
    gates: dict[str, list[str]] = field(default_factory=dict)   # helper to write first -> who calls it

    @property
    def to_implement(self) -> list[FunctionDoc]:
        """What students write, the helpers that gate other functions' tests first."""
        functions = [f for f in self.functions if f.to_implement]
        return sorted(functions, key=lambda f: f.name not in self.gates)

    @property
    def gate_notes(self) -> list[str]:
        """One sentence per gating helper: write it first, and why."""
        return [f"`{name}` first: {_and([f'`{c}`' for c in callers])} {'calls' if len(callers) == 1 else 'call'} "
                f"it, so {'its' if len(callers) == 1 else 'their'} tests fail until it is written"
                for name, callers in self.gates.items()]

    @property
    def provided(self) -> list[FunctionDoc]:
        return [f for f in self.functions if not f.to_implement and not f.name.startswith("_")]

    @property
    def public_points(self) -> float:
        return sum(c.points for c in self.public_checks)

    @property
    def hidden_points(self) -> float:
        return sum(c.points for c in self.hidden_checks)

    @property
    def perf_points(self) -> float:
        return sum(c.points for c in self.perf_checks)

    @property
    def total(self) -> float:
        return self.public_points + self.hidden_points + self.perf_points


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# --- reading the sources --------------------------------------------------------------------------------


def module_functions(source: str) -> tuple[str, list[FunctionDoc]]:
    """(module docstring, module-level functions and classes in file order) of one reference module."""
    tree = ast.parse(source)
    lines = source.splitlines()
    documents = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            documents.append(_document(source, lines, node))
    return ast.get_docstring(tree) or "", documents


def _document(source: str, lines: list[str], node: ast.AST) -> FunctionDoc:
    end = node.end_lineno or node.lineno
    holds_region = any(line.strip() == BEGIN for line in lines[node.lineno - 1: end])
    members = []
    if isinstance(node, ast.ClassDef):
        members = [_document(source, lines, item) for item in node.body
                   if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
        members = [member for member in members if member.to_implement]
    return FunctionDoc(
        name=node.name,
        signature=_signature(source, node),
        decorators=["@" + ast.unparse(d) for d in node.decorator_list],
        docstring=ast.get_docstring(node) or "",
        to_implement=holds_region,
        members=members,
    )


def _signature(source: str, node: ast.AST) -> str:
    """The def line(s) exactly as written, up to the colon that opens the body."""
    lines = source.splitlines()
    body_line = node.body[0].lineno
    text = "\n".join(lines[node.lineno - 1: body_line - 1]) if body_line > node.lineno else lines[node.lineno - 1]
    # A one-line function keeps only its header; a docstring on the def line is cut at the colon.
    header = text[: _header_end(text) + 1]
    return header.strip()


def _header_end(text: str) -> int:
    """Index of the colon ending a def header (the last ':' at bracket depth 0)."""
    depth, last = 0, len(text) - 1
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == ":" and depth == 0:
            last = index
            break
    return last


def collect_problems(root: Path, points: PointsTable | None = None) -> list[ProblemDoc]:
    """Every problem in points order, then any solutions module that has no points file yet."""
    points = points or load_points(root / "grader" / "points", root / "grader" / "calibration.json")
    modules = {p.stem: p for p in sorted((root / "solutions").glob("*.py")) if p.name != "__init__.py"}
    entries = [(p.id, p.title, p.order, list(p.checks)) for p in points.problems]
    entries += [(name, name.replace("_", " ").capitalize(), 99, []) for name in modules
                if name not in {p.id for p in points.problems}]
    problems = []
    for problem_id, title, order, checks in entries:
        path = modules.get(problem_id)
        module_doc, functions = module_functions(path.read_text()) if path else ("", [])
        source = path.read_text() if path else ""
        gated = gates(ast.parse(source), find_regions(source.splitlines(), str(path))) if path else {}
        background = root / TEMPLATES / "problems" / f"{problem_id}.md"
        problems.append(ProblemDoc(
            id=problem_id, title=title, order=order,
            background=background.read_text() if background.exists() else "",
            module_doc=module_doc, functions=functions, has_module=path is not None, gates=gated,
            public_checks=[c for c in checks if c.suite == "public"],
            hidden_checks=[c for c in checks if c.suite == "hidden" and not c.perf],
            perf_checks=[c for c in checks if c.suite == "hidden" and c.perf],
        ))
    return problems


def forbidden_ops() -> dict[str, tuple[str, ...]]:
    """The op sets the guards forbid inside kernels ({} if torch is unavailable at build time)."""
    try:
        from grader.guards import OP_SETS
    except ImportError:
        return {}
    return dict(OP_SETS)


# --- rendering --------------------------------------------------------------------------------------------


def environment(root: Path) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(root / TEMPLATES)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["pts"] = format_points
    env.filters["toml_str"] = lambda text: json.dumps(text, ensure_ascii=False)   # JSON strings are TOML strings
    env.filters["indent_block"] = lambda text, prefix="    ": "\n".join(
        (prefix + line) if line.strip() else "" for line in text.splitlines())
    return env


def format_points(value: float) -> str:
    return f"{value:g}"


def render_markdown(root: Path, problems: list[ProblemDoc]) -> str:
    context = {
        "problems": problems,
        "public_total": sum(p.public_points for p in problems),
        "hidden_total": sum(p.hidden_points for p in problems),
        "perf_total": sum(p.perf_points for p in problems),
        "grand_total": sum(p.total for p in problems),
        "level_credit": LEVEL_CREDIT,
        "slow_credit": SLOW_CREDIT,
        "forbidden": forbidden_ops(),
        "interpreter_limits": [what for _, what in LIMITS],
        "allowed_imports": ALLOWED_TEXT,
        "by_place": points_by_place(root, load_points(root / "grader" / "points",
                                                      root / "grader" / "calibration.json")),
    }
    return environment(root).get_template("writeup.md.j2").render(**context)


def render_html(root: Path, markdown_text: str, title: str) -> str:
    body = markdown_to_html(markdown_text)
    return environment(root).get_template("writeup.html.j2").render(title=title, body=body)


def write_writeup(root: Path, out: Path) -> tuple[Path, Path]:
    """Write WRITEUP.md and WRITEUP.html into `out`; returns their paths."""
    problems = collect_problems(root)
    markdown_text = render_markdown(root, problems)
    title = markdown_text.splitlines()[0].lstrip("# ").strip() if markdown_text else "Assignment"
    md_path, html_path = out / "WRITEUP.md", out / "WRITEUP.html"
    md_path.write_text(markdown_text)
    html_path.write_text(render_html(root, markdown_text, title))
    return md_path, html_path


# --- a small Markdown converter (headings, paragraphs, lists, tables, code, emphasis, links) ---------------

_INLINE_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EMPH = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _inline(text: str) -> str:
    """Escape, then apply inline markup; code spans are protected from the other rules."""
    codes: list[str] = []

    def stash(match):
        codes.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = _INLINE_CODE.sub(stash, text)
    text = html.escape(text, quote=False)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    text = _EMPH.sub(r"<em>\1</em>", text)
    text = _LINK.sub(lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', text)
    return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], text)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def markdown_to_html(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            language = stripped[3:].strip()
            block = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            css = f' class="language-{html.escape(language)}"' if language else ""
            out.append(f"<pre><code{css}>{html.escape(chr(10).join(block), quote=False)}</code></pre>")
            i += 1
        elif not stripped:
            i += 1
        elif re.match(r"#{1,6} ", stripped):
            level = len(stripped) - len(stripped.lstrip("#"))
            title = stripped[level:].strip()
            out.append(f'<h{level} id="{_slug(title)}">{_inline(title)}</h{level}>')
            i += 1
        elif stripped.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append([cell.strip() for cell in lines[i].strip().strip("|").split("|")])
                i += 1
            out.append(_table(rows))
        elif re.match(r"([-*]|\d+\.) ", stripped):
            items: list[tuple[int, str]] = []        # (indentation, text)
            while i < len(lines) and lines[i].strip():
                item = lines[i].strip()
                if re.match(r"([-*]|\d+\.) ", item):
                    items.append((len(lines[i]) - len(lines[i].lstrip()), item.split(" ", 1)[1]))
                else:                              # continuation line of the previous item
                    items[-1] = (items[-1][0], items[-1][1] + " " + item)
                i += 1
            out.append(_list(items, ordered=stripped[0].isdigit()))
        elif stripped.startswith(">"):
            quote = []
            while i < len(lines) and lines[i].strip().startswith(">"):
                quote.append(lines[i].strip()[1:].strip())
                i += 1
            out.append(f"<blockquote><p>{_inline(' '.join(quote))}</p></blockquote>")
        else:
            paragraph = []
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i].strip()):
                paragraph.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    return "\n".join(out) + "\n"


def _starts_block(stripped: str) -> bool:
    return (stripped.startswith(("```", "|", ">")) or bool(re.match(r"#{1,6} ", stripped))
            or bool(re.match(r"([-*]|\d+\.) ", stripped)))


def _list(items: list[tuple[int, str]], ordered: bool) -> str:
    """Items indented deeper than the first become a nested list inside the item before them."""
    tag = "ol" if ordered else "ul"
    base = items[0][0]
    parts, index = [f"<{tag}>"], 0
    while index < len(items):
        indent, text = items[index]
        nested_end = index + 1
        while nested_end < len(items) and items[nested_end][0] > base:
            nested_end += 1
        inner = _list(items[index + 1: nested_end], ordered=False) if nested_end > index + 1 else ""
        parts.append(f"<li>{_inline(text)}{inner}</li>")
        index = nested_end
    parts.append(f"</{tag}>")
    return "".join(parts)


def _table(rows: list[list[str]]) -> str:
    header, body = rows[0], rows[1:]
    if body and all(re.fullmatch(r":?-{3,}:?", cell) for cell in body[0]):
        body = body[1:]
    head = "".join(f"<th>{_inline(cell)}</th>" for cell in header)
    rows_html = "".join("<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in row) + "</tr>" for row in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>"
