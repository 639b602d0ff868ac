"""What a shell command runs and writes, read the way a shell reads it (gate rules, SPEC §13).

A gate rule's pattern is matched against the *simple commands* a command line runs, not
only its raw text, so that ordinary shell tricks do not slip past it: ``r''m -rf x``,
``/bin/rm -rf x``, ``bash -c "rm -rf x"``, ``sudo env rm -rf x``, ``find . -delete``,
``xargs rm -rf``, ``python -c "shutil.rmtree('x')"``, ``X=rm; $X -rf x``. Each simple
command is given at every level of its wrappers (``sudo rm -rf x`` and ``rm -rf x``), its
program named without its path, its words without their quotes; pipelines are given
whole as well (``curl … | sh``). The files a command writes (redirections, ``tee``,
``cp``/``mv`` targets, ``rm`` targets, ``sed -i``…) are resolved against the session's
folder, following ``cd``, ``~``, ``$HOME`` and variables assigned on the line.

The line is parsed with ``bashlex``; what it cannot parse (``[[ ]]``, ``case``,
arithmetic) is read again by ``shlex`` with the shell's operators as separators. What
neither can read, a variable that cannot be resolved where a program or a written path
should be, or a line nested or long past the bounds below, makes the reading *unsure*:
the gate then asks a person rather than let it by (``boards.core.gates``).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import bashlex

# Commands inside commands (bash -c inside sudo inside xargs…) are read this deep, and
# one line yields at most this many simple commands: past either, the reading is unsure.
DEPTH_MAX = 6
COMMANDS_MAX = 400

SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash"}
DOWNLOADERS = {"curl", "wget", "fetch", "http", "https", "aria2c", "xh"}
# Option words that take the next word as their argument, for each wrapper that runs
# the rest of its words as a command.
WRAPPERS: dict[str, set[str]] = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group"},
    "doas": {"-u", "-C"},
    "pkexec": {"--user"},
    "run0": {"-u", "--user", "-D"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "--class", "--classdata"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "nohup": set(),
    "setsid": set(),
    "command": set(),
    "builtin": set(),
    "exec": {"-a"},
    "time": {"-f", "-o", "--format", "--output"},
    "stdbuf": {"-i", "-o", "-e"},
    "xargs": {"-n", "-I", "-P", "-d", "-L", "-s", "-E", "-a", "--max-args", "--delimiter"},
    "parallel": {"-j", "-n", "-S"},
    "watch": {"-n", "-d", "--interval"},
    "flock": {"-w", "-E", "--timeout"},
    "chroot": set(),
    "busybox": set(),
    "npx": {"-p", "--package"},
    "bunx": {"-p", "--package"},
    "nocorrect": set(),
    "noglob": set(),
    "unbuffer": set(),
    "caffeinate": set(),
}
# Wrappers that take positional words before the command (timeout's duration, flock's lock).
WRAPPER_POSITIONALS = {"timeout": 1, "flock": 1, "chroot": 1}
# What each interpreter names its one-liner option.
CODE_FLAGS = {
    "python": {"-c"},
    "node": {"-e", "--eval", "-p", "--print"},
    "bun": {"-e", "--eval", "-p", "--print"},
    "perl": {"-e", "-E"},
    "ruby": {"-e"},
    "php": {"-r"},
}
INTERPRETER_ALIASES = {"nodejs": "node", "pypy": "python", "pypy3": "python"}
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "in"}
RESERVED |= {"case", "esac", "{", "}", "!", "[[", "]]", "function", "select", "coproc"}
QUIET_FILES = re.compile(r"^/dev/(null|stdout|stderr|tty|fd/\d+)$")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
ARITHMETIC = re.compile(r"\$?\(\((?:[^()]|\([^()]*\))*\)\)")
GIT_OPTIONS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}
HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_.-]*)\2")
HOME_OF_FOLDER = re.compile(r"^(/home/[^/]+|/Users/[^/]+|/root)(?=/|$)")
# Interpreters' one-liners: calls that delete a tree, and the string literals they hold.
CODE_TREE_DELETE = re.compile(
    r"\b(rmtree|rm_rf|rm_r|remove_tree|rimraf|removedirs|deltree)\b"
    r"|\b(rmSync|rmdirSync|rm|rmdir|remove)\s*\([^)]*recursive",
    re.S,
)
CODE_STRING = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"|`([^`]*)`")
CODE_LIST = re.compile(
    r"[\[(]\s*((?:(?:'[^'\n]*'|\"[^\"\n]*\")\s*,\s*)+(?:'[^'\n]*'|\"[^\"\n]*\"))"
)
CODE_WRITE = re.compile(
    r"\b(?:open|writeFileSync|writeFile|appendFileSync|appendFile|createWriteStream"
    r"|File\.write|IO\.write|Path)\s*\(\s*(?:'([^'\n]*)'|\"([^\"\n]*)\")"
    r"(?:\s*,\s*(?:'([^'\n]*)'|\"([^\"\n]*)\"))?(\)\s*\.\s*write_\w+)?"
)


@dataclass
class Reading:
    """What one command line runs and writes.

    ``texts``: each simple command at each level of its wrappers, and each pipeline, as
    normalised text. ``writes``: the absolute paths it writes (None for one that cannot be
    resolved); ``written``: those paths as the line spells them. ``unsure``: the line
    could not be read (wholly or in part), so what it runs is not known."""

    texts: list[str] = field(default_factory=list)
    writes: list[str | None] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    unsure: bool = False


def home_of(cwd: str) -> str | None:
    """The home folder a session's folder lies in (``/home/ann/app`` → ``/home/ann``)."""
    found = HOME_OF_FOLDER.match(cwd or "")
    return found.group(1) if found else None


def read_command(command: str, cwd: str) -> Reading:
    """Read a shell command line run in ``cwd`` (see the module's docstring)."""
    reader = _Reader(cwd)
    reader.script(command, 0)
    return reader.reading


def resolve(path: str, cwd: str, env: dict[str, str] | None = None) -> str | None:
    """``path`` as an absolute normalised path (``~``, ``$HOME``, ``..`` resolved against
    ``cwd``), or None when it cannot be known (an unknown variable, no folder)."""
    env = {"HOME": home_of(cwd) or "", "PWD": cwd, **(env or {})}
    if path == "~" or path.startswith("~/"):
        path = "$HOME" + path[1:]
    elif path.startswith("~"):
        return None  # another user's home
    expanded = _expand(path, env)
    if expanded is None or not expanded:
        return None
    if not expanded.startswith("/"):
        if not cwd.startswith("/"):
            return None
        expanded = posixpath.join(cwd, expanded)
    return posixpath.normpath(expanded)


def _expand(word: str, env: dict[str, str]) -> str | None:
    unknown = False

    def value(found: re.Match[str]) -> str:
        nonlocal unknown
        name = found.group(1) or found.group(2)
        if not env.get(name):
            unknown = True
            return ""
        return env[name]

    text = VARIABLE.sub(value, word)
    if unknown or "$" in text or "`" in text:
        return None
    return text


def _program(word: str) -> str:
    """A program as named, without its folder, a leading backslash or a version."""
    name = posixpath.basename(word.lstrip("\\")) or word
    if re.fullmatch(r"python[0-9.]*|py", name):
        return "python"
    return INTERPRETER_ALIASES.get(name, name)


def _words_text(words: list[str]) -> str:
    return " ".join(w if w and not re.search(r"\s", w) else shlex.quote(w) for w in words)


class _Reader:
    def __init__(self, cwd: str) -> None:
        self.reading = Reading()
        self.cwds: list[str | None] = [cwd or None]
        self.env: dict[str, str] = {"HOME": home_of(cwd) or "", "PWD": cwd}
        self.commands = 0
        self.downloaded: set[str] = set()
        self.heredocs: dict[str, str] = {}

    # -- lines ----------------------------------------------------------------------------

    def script(self, text: str, depth: int) -> None:
        if depth > DEPTH_MAX:
            self.reading.unsure = True
            return
        # Arithmetic ($((…)), ((…))) computes a number; bashlex cannot parse it.
        text = ARITHMETIC.sub("0", self._lift_heredocs(text))
        try:
            trees = bashlex.parse(text)
        except Exception:  # bashlex raises many kinds on what it does not support
            self._fallback(text, depth)
            return
        for tree in trees:
            self._node(tree, depth)

    def _lift_heredocs(self, text: str) -> str:
        """Here-documents become input from a named placeholder; their bodies are kept
        for a shell or an interpreter that reads them (``bash <<EOF``)."""
        if "<<" not in text:
            return text
        out, at = [], 0
        for found in HEREDOC.finditer(text):
            if found.start() < at or text[found.start() : found.start() + 3] == "<<<":
                continue
            line_end = text.find("\n", found.end())
            if line_end < 0:
                break
            tag, body_at = found.group(3), line_end + 1
            indent = r"\t*" if found.group(1) else ""
            end = re.compile(rf"^{indent}{re.escape(tag)}[ \t]*$", re.M)
            closing = end.search(text, body_at)
            body_end = closing.start() if closing else len(text)
            name = f"__heredoc_{len(self.heredocs)}__"
            self.heredocs[name] = text[body_at:body_end]
            out.append(text[at : found.start()] + f"< {name}" + text[found.end() : body_at])
            at = closing.end() if closing else len(text)
        out.append(text[at:])
        return "".join(out)

    def _node(self, node: Any, depth: int) -> None:
        kind = getattr(node, "kind", "")
        if kind == "pipeline":
            commands = [p for p in node.parts if p.kind == "command"]
            for part in node.parts:
                if part.kind != "command":
                    self._node(part, depth)
            self._pipeline([self._bash_command(c, depth) for c in commands], depth)
            return
        if kind == "command":
            self._pipeline([self._bash_command(node, depth)], depth)
            return
        for attr in ("parts", "list"):
            for child in getattr(node, attr, None) or []:
                self._node(child, depth)
        for attr in ("command", "body"):
            child = getattr(node, attr, None)
            if child is not None and hasattr(child, "kind"):
                self._node(child, depth)

    def _bash_command(self, node: Any, depth: int) -> tuple[list[str], list[tuple[str, str]]]:
        words: list[str] = []
        redirects: list[tuple[str, str]] = []
        for part in node.parts:
            if part.kind == "word":
                words.append(part.word)
                for inner in part.parts:
                    self._node(inner, depth)
            elif part.kind == "assignment":
                words.append(part.word)
                for inner in getattr(part, "parts", []):
                    self._node(inner, depth)
            elif part.kind == "redirect":
                target = part.output
                if hasattr(target, "word"):
                    redirects.append((part.type, target.word))
                    for inner in target.parts:
                        self._node(inner, depth)
            else:
                self._node(part, depth)
        return words, redirects

    def _fallback(self, text: str, depth: int) -> None:
        lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>\n")
        lex.whitespace, lex.whitespace_split, lex.commenters = " \t\r", True, ""
        try:
            tokens = list(lex)
        except ValueError:  # an unclosed quote: what runs cannot be known
            self.reading.unsure = True
            return
        pipeline: list[tuple[list[str], list[tuple[str, str]]]] = []
        words: list[str] = []
        redirects: list[tuple[str, str]] = []
        tokens.append(";")
        pending: str | None = None
        for token in tokens:
            if pending is not None:
                redirects.append((pending, token))
                pending = None
                continue
            if token in {"|", "|&"}:
                pipeline.append((words, redirects))
                words, redirects = [], []
            elif set(token) <= set(";&|()\n"):
                pipeline.append((words, redirects))
                self._pipeline([p for p in pipeline if p[0] or p[1]], depth)
                pipeline, words, redirects = [], [], []
            elif set(token) <= set("<>&"):
                pending = token
                if words and words[-1].isdigit():
                    words.pop()
            else:
                words.append(token)
                for inner in re.findall(r"\$\((.*)\)|`([^`]*)`", token, re.S):
                    self.script(inner[0] or inner[1], depth + 1)

    # -- commands -------------------------------------------------------------------------

    def _pipeline(
        self, commands: list[tuple[list[str], list[tuple[str, str]]]], depth: int
    ) -> None:
        innermost: list[list[str]] = []
        for words, redirects in commands:
            innermost.append(self._simple(words, redirects, depth))
        runs = [w for w in innermost if w]
        if len(runs) > 1:
            self._text(" | ".join(_words_text(w) for w in runs))
            # A download read by a shell or an interpreter from its standard input.
            for n, words in enumerate(runs[1:], start=1):
                if self._reads_stdin_code(words):
                    if _program(runs[n - 1][0]) in {"echo", "printf"}:
                        # A command written out and piped into a shell runs as well.
                        said = [w for w in runs[n - 1][1:] if not w.startswith("-")]
                        if _program(words[0]) in SHELLS:
                            self.script(" ".join(said).replace("\\n", "\n"), depth + 1)
                        else:
                            self._code(" ".join(said), depth + 1)
                    for before in runs[:n]:
                        if _program(before[0]) in DOWNLOADERS:
                            self._text(f"{_program(before[0])} | {_program(words[0])}")

    def _simple(self, words: list[str], redirects: list[tuple[str, str]], depth: int) -> list[str]:
        """Read one simple command; returns its innermost words (wrappers taken off)."""
        self.commands += 1
        if self.commands > COMMANDS_MAX:
            self.reading.unsure = True
            return []
        for kind, target in redirects:
            if kind in {">", ">>", ">|", "&>", "&>>", "<>", ">&"} and not target.isdigit():
                self._write(target)
            if kind == "<" and target in self.heredocs and words:
                self._heredoc_read(words, self.heredocs[target], depth)
        # Assignments before the program, and a line of assignments alone.
        while words and (found := ASSIGNMENT.match(words[0])):
            value = _expand(found.group(2), self.env)
            self.env[found.group(1)] = value if value is not None else ""
            if value is None:
                self.env.pop(found.group(1))
            words = words[1:]
        while words and words[0] in RESERVED:
            words = words[1:]
        if not words:
            return []
        return self._run(words, depth)

    def _run(self, words: list[str], depth: int) -> list[str]:
        program = words[0]
        if "$" in program or "`" in program:
            found = re.fullmatch(r"\$\((?:which|command -v|type -P)\s+([\w./-]+)\)", program)
            expanded = found.group(1) if found else _expand(program, self.env)
            if expanded is None or not expanded.strip():
                self.reading.unsure = True  # the program itself is not known
                return []
            words = shlex.split(expanded) + words[1:] if " " in expanded else [expanded, *words[1:]]
        name = _program(words[0])
        words = [name, *words[1:]]
        self._text(_words_text(words))
        if depth > DEPTH_MAX:
            self.reading.unsure = True
            return words
        self._effects(name, words, depth)
        inner = self._unwrapped(name, words)
        if inner is not None:
            return self._run(inner, depth + 1) if inner else words
        return words

    def _unwrapped(self, name: str, words: list[str]) -> list[str] | None:
        """The command a wrapper runs (``sudo -u x rm`` → ``rm``), [] if none, or None when
        ``name`` is no wrapper."""
        if name == "env":
            rest = words[1:]
            while rest:
                if rest[0] in {"-u", "--unset", "-C", "--chdir"}:
                    rest = rest[2:]
                elif rest[0] in {"-S", "--split-string"} and len(rest) > 1:
                    return [*shlex.split(rest[1]), *rest[2:]] if _splits(rest[1]) else []
                elif rest[0].startswith("-") or ASSIGNMENT.match(rest[0]):
                    rest = rest[1:]
                else:
                    break
            return rest
        if name == "git":
            # git's own options before its subcommand: ``git -C x push`` is ``git push``.
            rest, stripped = words[1:], False
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] in GIT_OPTIONS else rest[1:]
                stripped = True
            if stripped and rest:
                self._text(_words_text(["git", *rest]))
            return None
        options = WRAPPERS.get(name)
        if options is None:
            return None
        if name == "command" and len(words) > 1 and words[1] in {"-v", "-V"}:
            return []
        rest = words[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-":
            if rest[0] == "--":
                rest = rest[1:]
                break
            rest = rest[2:] if rest[0] in options else rest[1:]
        rest = rest[WRAPPER_POSITIONALS.get(name, 0) :]
        if name in {"sudo", "doas", "run0"} and not rest and any(w in {"-s", "-i"} for w in words):
            return ["sh"]
        return rest

    # -- what a command does beyond its text ---------------------------------------------

    def _effects(self, name: str, words: list[str], depth: int) -> None:
        args = words[1:]
        positional = [a for a in args if not a.startswith("-") or a == "-"]
        if name == "cd" or name == "pushd":
            target = positional[0] if positional else "~"
            self.cwds.append(None if target == "-" else self._resolve(target))
            if self.cwds[-1] is not None:
                self.env["PWD"] = self.cwds[-1] or ""
        elif name == "export":
            for word in args:
                if found := ASSIGNMENT.match(word):
                    value = _expand(found.group(2), self.env)
                    if value is None:
                        self.env.pop(found.group(1), None)
                    else:
                        self.env[found.group(1)] = value
        elif name == "alias":
            for word in args:
                if found := ASSIGNMENT.match(word):
                    self._quietly(found.group(2), depth + 1)
        elif name in SHELLS:
            self._shell(words, depth)
        elif name == "eval" or (name in {"source", "."} and positional):
            if name == "eval":
                self.script(" ".join(args), depth + 1)
            self._downloaded_run(positional[:1], name)
        elif name in CODE_FLAGS or name in {"deno", "awk", "gawk", "mawk", "nawk"}:
            self._interpreter(name, words, depth)
        elif name == "find":
            self._find(words, depth)
        elif name in {"rimraf", "del-cli"}:
            self._text(_words_text(["rm", "-r", *positional]))
            self._writes(positional)
        elif name in {"rm", "rmdir", "unlink", "shred", "touch", "mkdir", "truncate", "tee"}:
            self._writes([a for a in positional if a != "-"] if name != "truncate" else positional)
        elif name in {"mv"}:
            self._writes(positional)
        elif name in {"cp", "install", "ln", "rsync", "scp"}:
            into = _option_value(args, {"-t", "--target-directory"})
            targets = [into] if into else positional[-1:] if len(positional) > 1 else []
            self._writes([t for t in targets if not re.match(r"^[^/]*:", t)])
        elif name in {"chmod", "chown", "chgrp"}:
            self._writes(positional[1:])
        elif name == "dd":
            self._writes([a[3:] for a in args if a.startswith("of=")])
        elif name == "sed" and any(re.fullmatch(r"-[a-zA-Z]*i.*|--in-place.*", a) for a in args):
            script_given = any(a in {"-e", "-f"} or a.startswith("--expression") for a in args)
            self._writes(positional if script_given else positional[1:])
        elif name in DOWNLOADERS:
            saved = _option_value(args, {"-o", "--output", "-O", "--output-document"})
            if saved and saved != "-":
                self._writes([saved])
                self.downloaded.add(saved)
        else:
            self._downloaded_run([words[0]], name)

    def _shell(self, words: list[str], depth: int) -> None:
        args = words[1:]
        for n, arg in enumerate(args):
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
                if n + 1 < len(args):
                    code = args[n + 1]
                    self.script(code, depth + 1)
                    if re.search(r"[$<]\(\s*(\S*/)?(curl|wget)\b|`\s*(curl|wget)\b", code):
                        self._text(f"curl | {_program(words[0])}")
                return
            if not arg.startswith("-"):
                break
        scripts = [a for a in args if not a.startswith("-")]
        for script in scripts[:1]:
            if re.search(r"^<\(\s*(\S*/)?(curl|wget)\b", script):
                self._text(f"curl | {_program(words[0])}")
        self._downloaded_run(scripts[:1], _program(words[0]))

    def _interpreter(self, name: str, words: list[str], depth: int) -> None:
        args = words[1:]
        flags = CODE_FLAGS.get(name, set())
        code: str | None = None
        for n, arg in enumerate(args):
            short = arg.startswith("-") and not arg.startswith("--")
            if arg in flags or (short and name in {"perl", "ruby"} and arg[-1] in "eE"):
                code = args[n + 1] if n + 1 < len(args) else None
                if name in {"perl", "ruby"} and any(
                    a.startswith("-") and "i" in a[1:] and not a.startswith("--")
                    for a in args[: n + 1]
                ):
                    self._writes([a for a in args[n + 2 :] if not a.startswith("-")])
                break
            if name == "deno" and arg == "eval":
                code = args[n + 1] if n + 1 < len(args) else None
                break
            if name.endswith("awk") and not arg.startswith("-"):
                code = arg
                break
            if not arg.startswith("-"):
                self._downloaded_run([arg], name)
                break
        if code is not None:
            self._code(code, depth + 1)

    def _code(self, code: str, depth: int) -> None:
        """An interpreter's one-liner: the shell commands its strings hold, the trees it
        deletes, the files it opens for writing."""
        if depth > DEPTH_MAX:
            self.reading.unsure = True
            return
        literals = [
            next(g for g in m.groups() if g is not None) for m in CODE_STRING.finditer(code)
        ]
        if CODE_TREE_DELETE.search(code):
            self._text(_words_text(["rm", "-r", *(literals[:1] or ["?"])]))
        for found in CODE_LIST.finditer(code):
            parts = re.findall(r"'([^'\n]*)'|\"([^\"\n]*)\"", found.group(1))
            self._quietly(_words_text([a or b for a, b in parts]), depth)
        for literal in literals:
            if " " in literal.strip() or literal.strip() in {"sudo", "reboot"}:
                self._quietly(literal, depth)
        for found in CODE_WRITE.finditer(code):
            path = found.group(1) or found.group(2) or ""
            mode = found.group(3) or found.group(4) or ""
            callee = code[found.start() : found.end()].split("(")[0].strip()
            if callee == "open":
                writes = bool(re.search(r"[wax+]", mode))
            else:
                writes = callee != "Path" or bool(found.group(5))
            if writes:
                self._writes([path])

    def _quietly(self, text: str, depth: int) -> None:
        """A string in a one-liner read as a command: most are not, and not being able to
        read one says nothing about the line."""
        unsure = self.reading.unsure
        self.script(text, depth)
        self.reading.unsure = unsure

    def _heredoc_read(self, words: list[str], body: str, depth: int) -> None:
        name = _program(words[0])
        for level in (self._unwrapped(name, words) or [], words):
            if level and _program(level[0]) in SHELLS:
                self.script(body, depth + 1)
                return
            if level and _program(level[0]) in CODE_FLAGS:
                self._code(body, depth + 1)
                return

    def _find(self, words: list[str], depth: int) -> None:
        args = words[1:]
        roots = []
        for arg in args:
            if arg.startswith("-") or arg in {"(", "!", ")"}:
                break
            roots.append(arg)
        if "-delete" in args:
            self._text(_words_text(["rm", "-r", *(roots or ["."])]))
            self._writes(roots or ["."])
        for n, arg in enumerate(args):
            if arg in {"-exec", "-execdir", "-ok", "-okdir"}:
                command = []
                for word in args[n + 1 :]:
                    if word in {";", "+", "\\;"}:
                        break
                    command.append(word)
                if command:
                    inner = self._simple(command, [], depth + 1)
                    if inner and inner[0] in {"rm", "unlink", "shred"}:
                        # rm over what find finds is a delete of the tree.
                        self._text(_words_text(["rm", "-r", *(roots or ["."])]))

    def _reads_stdin_code(self, words: list[str]) -> bool:
        name = _program(words[0])
        rest = [w for w in words[1:] if w not in {"-", "-s", "--"}]
        if name in SHELLS:
            return not any(not w.startswith("-") for w in rest) and not any(
                w.startswith("-") and "c" in w[1:] for w in rest
            )
        if name in CODE_FLAGS:
            return not rest or all(w.startswith("-") and w not in CODE_FLAGS[name] for w in rest)
        return name in {"sudo", "doas"} and bool(rest) and self._reads_stdin_code(rest)

    def _downloaded_run(self, scripts: list[str], runner: str) -> None:
        for script in scripts:
            if script in self.downloaded or posixpath.basename(script) in {
                posixpath.basename(d) for d in self.downloaded
            }:
                self._text(f"curl | {runner if runner in SHELLS else 'sh'}")

    # -- texts and paths ------------------------------------------------------------------

    def _text(self, text: str) -> None:
        if text and text not in self.reading.texts:
            self.reading.texts.append(text)

    def _writes(self, paths: list[str]) -> None:
        for path in paths:
            self._write(path)

    def _write(self, path: str) -> None:
        if not path or QUIET_FILES.match(path) or path in self.heredocs:
            return
        self.reading.written.append(path)
        self.reading.writes.append(self._resolve(path))
        for cwd in self.cwds[:-1]:
            # A cd inside a subshell or a branch may not have run: the path is checked
            # from every folder the line may be in.
            if not path.startswith(("/", "~", "$")):
                self.reading.writes.append(resolve(path, cwd, self.env) if cwd else None)

    def _resolve(self, path: str) -> str | None:
        cwd = self.cwds[-1]
        if cwd is None and not path.startswith(("/", "~", "$")):
            return None
        return resolve(path, cwd or "", self.env)


def _option_value(args: list[str], names: set[str]) -> str | None:
    for n, arg in enumerate(args):
        if arg in names and n + 1 < len(args):
            return args[n + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg[len(name) + 1 :]
            if not name.startswith("--") and arg.startswith(name) and len(arg) > len(name):
                return arg[len(name) :]
    return None


def _splits(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True
