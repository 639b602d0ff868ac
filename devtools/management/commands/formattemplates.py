"""``python manage.py formattemplates [--check] [PATH ...]``: every start tag longer than 100
characters in the templates goes one attribute per line (devtools/templatefmt.py says how,
and what it never touches). ``--check`` changes nothing and fails if a tag would be
rewritten or a line is longer than 200 characters (CI runs it beside ``ruff format --check``).
"""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.templatefmt import LINE_LIMIT, format_template, long_lines

# Lines allowed past LINE_LIMIT, each with why: (template, a piece of the line) -> why.
LONG_LINES_KEPT: dict[tuple[str, str], str] = {
    ("boards/connect.html", '<code data-snippet="claude-code">'): (
        "a command inside <pre>, copied as written: a line break there would be one in the command"
    ),
}


def template_files(paths: list[str]) -> list[Path]:
    roots = [Path(p) for p in paths] or [Path(settings.BASE_DIR) / "templates"]
    files: list[Path] = []
    for root in roots:
        files.extend(sorted(root.rglob("*.html")) if root.is_dir() else [root])
    return files


def problems(path: Path, text: str) -> list[str]:
    """What --check reports of one template: tags to rewrite, lines too long."""
    result = format_template(text)
    found = [
        f"{path}:{line}: a start tag to write one attribute per line" for line in result.rewritten
    ]
    lines = text.splitlines()
    for number in long_lines(text):
        kept = any(
            path.as_posix().endswith("/" + name) and piece in lines[number - 1]
            for name, piece in LONG_LINES_KEPT
        )
        if not kept:
            found.append(
                f"{path}:{number}: {len(lines[number - 1])} characters (at most {LINE_LIMIT})"
            )
    return found


class Command(BaseCommand):
    help = (
        "Write long HTML start tags in the templates one attribute per line (--check: only report)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", help="templates or folders (default: templates/)")
        parser.add_argument(
            "--check", action="store_true", help="change nothing; fail if anything would change"
        )

    def handle(self, *args: object, paths: list[str], check: bool, **options: object) -> None:
        found: list[str] = []
        changed = 0
        for path in template_files(paths):
            text = path.read_text(encoding="utf-8")
            result = format_template(text)
            for line, why in result.skipped:
                self.stderr.write(f"{path}:{line}: a long tag left as written ({why})")
            if check:
                found.extend(problems(path, text))
            elif result.text != text:
                path.write_text(result.text, encoding="utf-8")
                changed += 1
                self.stdout.write(f"{path}: {len(result.rewritten)} tag(s) rewritten")
        if check and found:
            for problem in found:
                self.stderr.write(problem)
            raise CommandError(
                f"{len(found)} template problem(s); run python manage.py formattemplates"
            )
        if not check:
            self.stdout.write(f"{changed} template(s) changed")
