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
the gate then asks a person rather than let it by (``boards.gates.matching``).

Programs are read as they read themselves: long options by their unambiguous prefixes
(``rm --rec``, ``git reset --har``, as getopt and git accept them), variables set on the
line followed into every word (``f=-rf; rm $f x``), deletes by other tools given as the
``rm -r`` they amount to (``rsync --delete``, ``git rm -r``, ``tar --remove-files``,
``xargs rm`` over a listing, ``shred -u``, a one-liner's ``unlink``), the commands other
commands run read as commands (``ssh host '…'``, ``docker run … CMD``, ``tar
--to-command``, ``script -c``, ``at``, ``systemd-run``…), git's spellings of the same
operation given in the rules' words (an alias, ``send-pack``, ``checkout -- PATH``,
``switch --discard-changes``…), and writes followed through links the line makes. Code
built at run time and run (a decoded payload piped into a shell, ``exec`` of what is not
a literal) cannot be read: the reading is unsure.

Besides its texts, a reading lists the line's *commands* (``Command``): each simple
command as written, with the texts read from it, so an allow rule can be held to what it
covers (every command of the line, SPEC §13); its ``runs`` (each command's words at each
level) for the gate's own checks; and ``opaque``, the programs on the line that write
files the reader cannot list (git plumbing, archive extraction, interpreters' code…).
"""

from __future__ import annotations

import functools
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
    "systemd-run": {"-u", "--unit", "-p", "--property", "--description", "--slice", "-E"}
    | {"--setenv", "--uid", "--gid", "-M", "--machine", "--working-directory", "-H", "--host"},
    "flatpak-spawn": set(),
    "nsenter": {"-t", "--target", "-S", "--setuid", "-G", "--setgid", "-w", "--wd", "-r"},
    "unshare": {"--map-user", "--map-group", "-S", "--setuid", "-G", "--setgid", "-R", "-w"},
    "chronic": set(),
    "entr": set(),
    "firejail": set(),
    "torsocks": set(),
    "proxychains": {"-f"},
    "proxychains4": {"-f"},
    "strace": {"-e", "-o", "-p", "-s", "-u", "-E"},
    "ltrace": {"-e", "-o", "-p", "-s", "-u"},
    "taskset": {"-c", "--cpu-list"},
    "faketime": set(),
    "dbus-run-session": set(),
    "xvfb-run": {"-n", "-s", "-f", "-e"},
    "sg": set(),
}
# Wrappers that take positional words before the command (timeout's duration, flock's lock).
WRAPPER_POSITIONALS = {"timeout": 1, "flock": 1, "chroot": 1, "faketime": 1, "sg": 1}
# What each interpreter names its one-liner option.
CODE_FLAGS = {
    "python": {"-c"},
    "node": {"-e", "--eval", "-p", "--print"},
    "bun": {"-e", "--eval", "-p", "--print"},
    "perl": {"-e", "-E"},
    "ruby": {"-e"},
    "php": {"-r"},
}
# Programs that list a tree's files (what ``xargs rm`` fed by one deletes).
LISTERS = {"find", "fd", "fdfind", "ls", "git", "rg", "locate", "tree", "du"}
SQL_CLIENTS = {"psql", "mysql", "mariadb", "sqlite3", "duckdb", "mongosh", "mongo", "redis-cli"}
INTERPRETER_ALIASES = {"nodejs": "node", "pypy": "python", "pypy3": "python"}
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "in"}
RESERVED |= {"case", "esac", "{", "}", "!", "[[", "]]", "function", "select", "coproc"}
# Programs that only move the line's folder or do nothing: an allow rule need not cover
# them (``cd build && npm test`` is ``npm test`` for a rule that allows it).
HARMLESS = {"cd", "pushd", "popd", "true", ":"}


def _options(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Long options by program (or ``git <subcommand>``), the ones that decide what a command
# does first: an abbreviation is read as the first one it can stand for.
LONG_OPTIONS: dict[str, tuple[str, ...]] = {
    "rm": _options(
        "--recursive --force --dir --interactive --one-file-system "
        "--no-preserve-root --preserve-root --verbose --help --version"
    ),
    "cp": _options(
        "--recursive --archive --force --target-directory --link "
        "--no-target-directory --remove-destination --symbolic-link --parents"
    ),
    "mv": _options("--force --target-directory --no-target-directory --update --verbose"),
    "ln": _options("--symbolic --force --no-dereference --target-directory --verbose"),
    "shred": _options("--remove --zero --iterations --force --exact --size"),
    "tar": _options(
        "--remove-files --to-command --use-compress-program --extract "
        "--checkpoint-action --info-script --new-volume-script --directory "
        "--file --create --get --overwrite --verbose"
    ),
    "sed": _options("--in-place --expression --file --quiet --silent --regexp-extended"),
    "pkill": _options(
        "--full --exact --signal --ignore-case --inverse --euid --uid --group "
        "--parent --pgroup --session --newest --oldest"
    ),
    "script": _options("--command --quiet --append --return --flush"),
    "git reset": _options("--hard --soft --mixed --merge --keep --quiet --patch"),
    "git push": _options(
        "--force --force-with-lease --force-if-includes --delete --mirror --all "
        "--tags --prune --set-upstream --dry-run --verbose"
    ),
    "git clean": _options("--force --dry-run --quiet --interactive --exclude"),
    "git checkout": _options(
        "--force --quiet --merge --detach --orphan --track --ours --theirs "
        "--patch --conflict --overlay --no-overlay"
    ),
    "git restore": _options(
        "--worktree --staged --source --ours --theirs --merge --conflict "
        "--patch --quiet --progress --overlay --no-overlay"
    ),
    "git switch": _options(
        "--discard-changes --force --force-create --create --detach --guess "
        "--merge --conflict --quiet --track --orphan"
    ),
    "git branch": _options(
        "--delete --force --move --copy --list --all --remotes --verbose "
        "--quiet --track --set-upstream-to --show-current"
    ),
    "git rm": _options("--recursive --force --cached --dry-run --quiet --ignore-unmatch"),
    "git gc": _options("--prune --aggressive --auto --quiet --force --no-prune"),
    "git config": _options(
        "--global --system --local --worktree --file --add --unset --unset-all "
        "--replace-all --get --get-all --get-regexp --list --edit --type --bool "
        "--int --path --show-origin"
    ),
    "git stash": _options("--keep-index --include-untracked --all --quiet --patch"),
}
LONG_OPTIONS["pgrep"] = LONG_OPTIONS["pkill"]
# git's commands that write the working tree from its objects (or an archive, or a patch):
# what they write is not on the line.
GIT_TREE_WRITERS = {"update-index", "checkout-index", "read-tree", "apply", "am", "stash"}
GIT_TREE_WRITERS |= {"checkout", "restore", "reset", "merge", "pull", "cherry-pick", "rebase"}
GIT_TREE_WRITERS |= {"revert", "switch", "worktree", "clone", "submodule", "unpack-objects"}
GIT_TREE_WRITERS |= {"hash-object", "mv", "replace", "fast-import", "archive"}
# git config keys that move, add or switch off what runs around git (hooks, includes, the
# monitor, shell aliases, filters).
GIT_HOOK_KEYS = re.compile(
    r"^(core\.hookspath|include\.path|includeif\..*|core\.fsmonitor|filter\..+\.(clean|smudge|process))$",
    re.I,
)
# Programs that turn their input into other bytes: a shell fed by one runs what no one
# can read on the line.
DECODERS = {"base64", "base32", "basenc", "xxd", "rev", "tr", "openssl", "gzip", "gunzip"}
DECODERS |= {"zcat", "bzcat", "xzcat", "zstdcat", "bunzip2", "unxz", "uudecode", "iconv"}
DECODERS |= {"sed", "awk", "gawk", "perl", "ruby", "python", "node", "php", "cut", "od"}
# tar's options that name a command tar runs.
TAR_COMMANDS = _options(
    "--to-command -I --use-compress-program --info-script -F --new-volume-script"
)
# Archive tools, and the forms of each that extract.
EXTRACTORS = {"unzip", "7z", "7za", "7zr", "cpio", "unrar", "bsdtar", "ar", "jar", "pax"}
# Interpreters' one-liners: code run from what is not a literal, decoders, downloads.
CODE_EXEC = re.compile(
    r"(?<![.\w$])(exec|eval|Function|compile|instance_eval|class_eval|module_eval|execfile)"
    r"\s*[(\s]"
)
CODE_DECODE = re.compile(
    r"b64decode|base64|fromhex|unhexlify|Buffer\.from|atob\b|fromCharCode|decompress|rot_?13"
    r"|\[::-1\]|\.reverse\(|\bpack\s*\(|\bchr\s*\(|decode64|unpack\b|codecs\.decode"
)
CODE_RUN = re.compile(
    r"\b(system|popen|Popen|spawn|spawnSync|execSync|execFileSync|exec[lv]p?e?|run|call"
    r"|check_output|check_call|getoutput|getstatusoutput|eval|exec|Function|qx|`)\b"
)
CODE_DOWNLOAD = re.compile(
    r"urlopen|urllib|requests\.(get|post)|httpx|http\.client|\bfetch\s*\(|Net::HTTP|LWP"
    r"|\bget\s*\(\s*['\"]https?:|file_get_contents\s*\(\s*['\"]https?:|open-uri|URI\.open"
    r"|https?\.get\s*\("
)
CODE_KILL = re.compile(
    r"\b(os\.kill|killpg|process\.kill|Process\.kill)\b|\.kill\s*\(|psutil\b.*\.(kill|terminate"
    r"|send_signal)\s*\("
)
# Calls that delete a file (many of them, with a glob or a loop: a tree).
CODE_UNLINK = re.compile(
    r"\b(os\.remove|os\.unlink|unlinkSync|unlink|fs\.rm|fs\.promises\.rm|File\.delete"
    r"|FileUtils\.rm|Files\.delete|send2trash)\b"
)
CODE_MANY = re.compile(
    r"\b(glob|walk|listdir|scandir|readdirSync|readdir|iterdir|rglob|map|each|for|find)\b"
    r"|<[^>]*\*|\*"
)
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
class Command:
    """One simple command of a line as written (its assignments, words and
    redirections: ``head``), with every text read from it (``texts``: its wrappers'
    levels and what it amounts to); ``exempt``: it needs no allow rule (``HARMLESS``, or
    a shell whose code is read as commands of its own)."""

    head: str
    texts: list[str] = field(default_factory=list)
    exempt: bool = False
    # Its redirections, as the line spells them (part of what an allow rule must cover).
    spelled: str = ""


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
    # Each simple command (at any depth) and what was read from it (see the docstring).
    commands: list[Command] = field(default_factory=list)
    # Every command's words at every level of its wrappers, its program named.
    runs: list[list[str]] = field(default_factory=list)
    # Programs that write what the line does not name (git plumbing, archives, code…).
    opaque: list[str] = field(default_factory=list)
    # ``git config`` of a key that moves what runs around git (``GIT_HOOK_KEYS``).
    hooks_moved: bool = False
    # An interpreter's one-liner that sends signals to processes.
    signals: bool = False


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
    env = {**_env_of(cwd), **(env or {})}
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


def _env_of(cwd: str) -> dict[str, str]:
    # The session's temporary folder is read as /tmp: what matters is that it is one.
    return {"HOME": home_of(cwd) or "", "PWD": cwd, "TMPDIR": "/tmp"}  # noqa: S108 - a name, not a file


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
        self.env: dict[str, str] = _env_of(cwd)
        self.commands = 0
        self.downloaded: set[str] = set()
        self.heredocs: dict[str, str] = {}
        # The command whose texts are being read (innermost last); strings in a one-liner
        # read as commands (``quiet``) belong to the command that holds them.
        self.stack: list[Command] = []
        self.quiet = 0
        # Variables the line itself assigns (followed into every word), links it makes
        # (followed by the paths written through them), git aliases it defines.
        self.assigned: set[str] = set()
        self.links: dict[str, str] = {}
        self.git_aliases: dict[str, str] = {}
        # The text bashlex parsed (its nodes' positions are in it).
        self.source = ""

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
        source, self.source = self.source, text
        try:
            for tree in trees:
                self._node(tree, depth)
        finally:
            self.source = source

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
                words.append(self._escaped(part))
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

    def _escaped(self, part: Any) -> str:
        """A word as the shell reads it where bashlex reads it otherwise: ``"\\x72"`` keeps
        its backslashes (for printf to decode), ``'a "b c"'`` its inner quotes, and
        ``$'\\x72'`` is decoded (ANSI-C quoting)."""
        start, end = getattr(part, "pos", (0, 0))
        raw = self.source[start:end]
        if not re.search(r"[\\'\"]", raw) or "$(" in raw or "`" in raw:
            return str(part.word)
        if (quoted := re.fullmatch(r"\$'((?:[^'\\]|\\.)*)'", raw)) is not None:
            return _decoded(quoted.group(1))
        if "$" in raw or not _splits(raw):
            return str(part.word)
        split = shlex.split(raw)
        return split[0] if len(split) == 1 else str(part.word)

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
            listing = [w for w in runs if _program(w[0]) in LISTERS]
            for words in runs[1:]:
                if listing and words[0] in {"rm", "unlink", "shred"}:
                    # Each file a listing names, deleted: the tree it lists.
                    self._text(_words_text(["rm", "-r", *_roots(listing[0])]))
            # A download read by a shell or an interpreter from its standard input.
            for n, words in enumerate(runs[1:], start=1):
                if self._reads_stdin_code(words):
                    if any(_program(before[0]) in DECODERS for before in runs[:n]):
                        # Decoded, reversed or generated on the way: what runs is not on
                        # the line.
                        self.reading.unsure = True
                    elif _program(runs[n - 1][0]) in {"echo", "printf"}:
                        # A command written out and piped into a shell runs as well.
                        said = _said(runs[n - 1])
                        if _program(words[0]) in SHELLS | {"at", "batch"}:
                            self.script(said, depth + 1)
                        else:
                            self._code(said, depth + 1)
                    for before in runs[:n]:
                        if _program(before[0]) in DOWNLOADERS:
                            self._text(f"{_program(before[0])} | {_program(words[0])}")

    def _simple(self, words: list[str], redirects: list[tuple[str, str]], depth: int) -> list[str]:
        """Read one simple command; returns its innermost words (wrappers taken off)."""
        self.commands += 1
        if self.commands > COMMANDS_MAX:
            self.reading.unsure = True
            return []
        spelled = []
        for kind, target in redirects:
            writes = kind in {">", ">>", ">|", "&>", "&>>", "<>", ">&"} and not target.isdigit()
            if writes:
                self._write(target)
            if (writes or kind in {"<", "<<<"}) and not QUIET_FILES.match(target):
                spelled.append(f"{kind} {target}")
        # Assignments before the program, and a line of assignments alone.
        assignments = []
        while words and (found := ASSIGNMENT.match(words[0])):
            value = _expand(found.group(2), self.env)
            self.env[found.group(1)] = value if value is not None else ""
            self.assigned.add(found.group(1))
            if value is None:
                self.env.pop(found.group(1))
                self.assigned.discard(found.group(1))
            assignments.append(words[0])
            words = words[1:]
        while words and words[0] in RESERVED:
            words = words[1:]
        if not words:
            return []
        if self.quiet:
            return self._command(words, redirects, depth)
        program = _program(words[0])
        exempt = (program in HARMLESS and not spelled) or (program in SHELLS and _runs_code(words))
        head = " ".join([_words_text(assignments + words), *spelled])
        command = Command(head, exempt=exempt, spelled=" ".join(spelled))
        self.reading.commands.append(command)
        self.stack.append(command)
        try:
            return self._command(words, redirects, depth)
        finally:
            self.stack.pop()

    def _command(self, words: list[str], redirects: list[tuple[str, str]], depth: int) -> list[str]:
        # The command's own text first: it is what an allow rule covers.
        innermost = self._run(words, depth)
        for kind, target in redirects:
            if kind == "<" and target in self.heredocs:
                self._heredoc_read(words, self.heredocs[target], depth)
            elif kind == "<<<":
                self._heredoc_read(words, target, depth)
        return innermost

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
        words = [name, *_long_options(name, self._followed(words[1:]))]
        self.reading.runs.append(words)
        self._text(_words_text(words))
        if depth > DEPTH_MAX:
            self.reading.unsure = True
            return words
        self._effects(name, words, depth)
        inner = self._unwrapped(name, words)
        if inner is not None:
            return self._run(inner, depth + 1) if inner else words
        return words

    def _followed(self, words: list[str]) -> list[str]:
        """Words with the variables the line assigned put in (unquoted, a bare variable
        splits into words: ``f=-rf; rm $f x`` is ``rm -rf x``)."""
        if not self.assigned:
            return words
        out = []
        for word in words:
            if "$" not in word:
                out.append(word)
                continue
            bare = VARIABLE.fullmatch(word)
            if bare and (bare.group(1) or bare.group(2)) in self.assigned:
                out.extend(self.env.get(bare.group(1) or bare.group(2), "").split())
                continue

            def value(found: re.Match[str]) -> str:
                name = found.group(1) or found.group(2)
                return self.env.get(name, "") if name in self.assigned else found.group(0)

            out.append(VARIABLE.sub(value, word))
        return out

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
        if name in {"watch", "entr"} and len(rest) == 1 and " " in rest[0]:
            return ["sh", "-c", rest[0]]  # watch runs its one word through sh -c
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
                        self.assigned.discard(found.group(1))
                    else:
                        self.env[found.group(1)] = value
                        self.assigned.add(found.group(1))
        elif name == "alias":
            for word in args:
                if found := ASSIGNMENT.match(word):
                    self._quietly(found.group(2), depth + 1)
        elif name in SHELLS:
            self._shell(words, depth)
        elif name == "eval" or (name in {"source", "."} and positional):
            if name == "eval":
                self.script(" ".join(args), depth + 1)
            else:
                self._substituted(positional[0], "sh")
            self._downloaded_run(positional[:1], name)
        elif name in CODE_FLAGS or name in {"deno", "awk", "gawk", "mawk", "nawk"}:
            self._interpreter(name, words, depth)
        elif name == "find":
            self._find(words, depth)
        elif name in {"fd", "fdfind"}:
            self._fd(args, depth)
        elif name == "git":
            self._git(words, depth)
        elif name in {"rimraf", "del-cli", "srm", "wipe"}:
            self._text(_words_text(["rm", "-r", *positional]))
            self._writes(positional)
        elif name in {"rm", "rmdir", "unlink", "shred", "touch", "mkdir", "truncate", "tee"}:
            self._writes([a for a in positional if a != "-"] if name != "truncate" else positional)
            if name == "shred" and any(_has_flag(a, "u", "--remove") for a in args):
                # Overwritten, then removed: nothing left to recover, as after rm -r.
                self._text(_words_text(["rm", "-r", *positional]))
        elif name in {"cp", "mv", "install", "ln", "rsync", "scp"}:
            self._copy(name, args, positional, depth)
        elif name in {"chmod", "chown", "chgrp"}:
            self._writes(positional[1:])
        elif name in {"dd", "sponge", "patch"}:
            self._writes([a[3:] for a in args if a.startswith("of=")] if name == "dd" else [])
            self._writes(positional if name == "sponge" else [])
            self.reading.opaque.append(name)
        elif name == "sed" and any(re.fullmatch(r"-[a-zA-Z]*i.*|--in-place.*", a) for a in args):
            script_given = any(a in {"-e", "-f"} or a.startswith("--expression") for a in args)
            self._writes(positional if script_given else positional[1:])
        elif name in DOWNLOADERS:
            self._download(name, args, positional)
        elif name == "tar" or name in EXTRACTORS:
            self._archive(name, args, positional, depth)
        elif name in {"ssh", "su", "script", "runuser"}:
            self._remote(name, args, depth)
        elif name in {"docker", "podman", "nerdctl", "kubectl", "oc", "lxc"}:
            self._container(name, args, depth)
        else:
            self._downloaded_run([words[0]], name)

    def _git(self, words: list[str], depth: int) -> None:
        """git as git reads it: its own options, aliases, abbreviations; each operation
        also given in the words the rules know it by (``send-pack`` is a push)."""
        rest, stripped, aliases = words[1:], False, dict(self.git_aliases)
        while rest and rest[0].startswith("-"):
            if rest[0] == "-c" and len(rest) > 1:
                key, _, value = rest[1].partition("=")
                if key.lower().startswith("alias."):
                    aliases[key[6:].lower()] = value
            rest = rest[2:] if rest[0] in GIT_OPTIONS else rest[1:]
            stripped = True
        if not rest:
            return
        sub = rest[0]
        alias = aliases.get(sub.lower())
        if alias is not None and depth <= DEPTH_MAX:
            if alias.startswith("!"):
                self.script(" ".join([alias[1:], *(shlex.quote(w) for w in rest[1:])]), depth + 1)
            elif _splits(alias):
                self._text(_words_text(["git", *shlex.split(alias), *rest[1:]]))
                self._git(["git", *shlex.split(alias), *rest[1:]], depth + 1)
            return
        args = _long_options(f"git {sub}", rest[1:])
        if stripped or args != rest[1:]:
            self._text(_words_text(["git", sub, *args]))
        paths = args[args.index("--") + 1 :] if "--" in args else []
        flags = [a for a in args if a.startswith("-")]
        if sub == "send-pack":
            self._text(_words_text(["git", "push", *args]))
        elif sub == "checkout" and paths:
            # Files checked out over the working tree lose what was not committed.
            self._text(_words_text(["git", "restore", *paths]))
        elif sub == "restore" and any(_has_flag(a, "W", "--worktree") for a in flags):
            kept = [
                a for a in args if not (a.startswith("-") and re.search("[SW]|staged|worktree", a))
            ]
            self._text(_words_text(["git", "restore", *kept]))
        elif sub == "switch" and any(
            _has_flag(a, "f", "--force") or a == "--discard-changes" for a in flags
        ):
            self._text(_words_text(["git", "checkout", "-f", *args]))
        elif sub == "branch" and (
            any(_has_flag(a, "D") for a in flags)
            or (
                any(_has_flag(a, "d", "--delete") for a in flags)
                and any(_has_flag(a, "f", "--force") for a in flags)
            )
        ):
            self._text(_words_text(["git", "branch", "-D", *args]))
        elif sub == "rm" and any(_has_flag(a, "r", "--recursive") for a in flags):
            if "--cached" not in flags:
                targets = [a for a in args if not a.startswith("-")]
                self._text(_words_text(["rm", "-r", *targets]))
                self._writes(targets)
        elif sub == "clean" and "--force" in args:
            self._text(_words_text(["git", "clean", "-f", *args]))
        elif sub == "config":
            self._git_config(args)
        elif sub == "clone":
            targets = [a for a in args if not a.startswith("-")]
            self._writes(targets[1:2])
        plumbing = sub in GIT_TREE_WRITERS and not (sub == "hash-object" and "-w" not in flags)
        if plumbing and not (sub == "stash" and not {"pop", "apply"} & set(args)):
            self.reading.opaque.append(f"git {sub}")

    def _git_config(self, args: list[str]) -> None:
        words, n = [], 0
        while n < len(args):
            if args[n] in {"-f", "--file", "--blob", "--type", "--default", "--comment"}:
                n += 2
                continue
            words.append(args[n])
            n += 1
        if any(
            w in {"--get", "--get-all", "--get-regexp", "--list", "-l", "-e", "--edit"}
            or w.startswith("--unset")
            for w in words
        ):
            return
        positional = [w for w in words if not w.startswith("-")]
        if positional[:1] == ["set"]:
            positional = positional[1:]
        elif positional[:1] and positional[0] in {"get", "list", "unset", "edit"}:
            return
        if len(positional) < 2:
            return
        key, value = positional[0], positional[1]
        if key.lower().startswith("alias."):
            self.git_aliases[key[6:].lower()] = value
            if value.startswith("!"):
                self.reading.hooks_moved = True
        elif GIT_HOOK_KEYS.match(key):
            self.reading.hooks_moved = True

    def _copy(self, name: str, args: list[str], positional: list[str], depth: int) -> None:
        """cp, mv, install, ln, rsync, scp: the target, and each source as the target
        folder would hold it (``cp -r /tmp/x/.claude .`` writes ``./.claude``)."""
        if name == "rsync":
            for option in ("-e", "--rsh", "--rsync-path"):
                if (command := _option_value(args, {option})) is not None:
                    self._quietly(command, depth + 1)
            positional = [
                a
                for n, a in enumerate(args)
                if not a.startswith("-") and (n == 0 or args[n - 1] not in {"-e", "--rsh"})
            ]
        into = _option_value(args, {"-t", "--target-directory"})
        target = into or (positional[-1] if len(positional) > 1 else None)
        sources = [a for a in positional if a != target and a != "-"]
        remote = re.compile(r"^[^/]*:")
        if target is None or remote.match(target):
            return
        if name == "ln" and any(_has_flag(a, "s", "--symbolic") for a in args) and sources:
            self._link(sources[0], target if len(positional) > 1 or into else ".")
            return
        self._write(target)
        if name == "mv":
            self._writes(sources)  # moved away: gone from where they were
        for source in sources:
            base = posixpath.basename(source.rstrip("/"))
            if base and base not in {".", ".."} and not source.endswith("/."):
                self._write(posixpath.join(target, base))
        recursive = any(
            _has_flag(a, "r", "--recursive") or _has_flag(a, "R") or _has_flag(a, "a", "--archive")
            for a in args
        )
        if name == "rsync" or recursive:
            self.reading.opaque.append(name)
        if name == "rsync":
            if any(a.startswith("--del") for a in args):
                self._text(_words_text(["rm", "-r", target]))
            if "--remove-source-files" in args:
                self._text(_words_text(["rm", "-r", *sources]))

    def _link(self, source: str, link: str) -> None:
        """``ln -s source link``: paths written through the link on the line are written
        where it points; a link to outside the folder counts as a write there."""
        at = self._resolve(link)
        if at is None:
            self.reading.writes.append(None)
            return
        if link.endswith("/") or link in {".", ".."}:
            at = posixpath.join(at, posixpath.basename(source.rstrip("/")))
        to = (
            self._resolve(source)
            if source.startswith(("/", "~", "$"))
            else posixpath.normpath(posixpath.join(posixpath.dirname(at), source))
        )
        self.reading.written.append(link)
        self.reading.writes.append(at)
        if to is None:
            self.reading.writes.append(None)
            return
        self.links[at] = to
        cwd = self.cwds[0]
        if not (cwd and (at == cwd or at.startswith(cwd.rstrip("/") + "/"))):
            # A link left outside the folder (in /tmp) is a way to write where it points
            # in a later call: the write is counted now.
            self.reading.written.append(source)
            self.reading.writes.append(to)

    def _download(self, name: str, args: list[str], positional: list[str]) -> None:
        saved = _option_value(args, {"-o", "--output", "-O", "--output-document"})
        urls = [a for a in positional if re.match(r"^(https?|ftp)://", a)]
        if saved is None:
            clustered = next(
                (
                    args[n + 1]
                    for n, a in enumerate(args[:-1])
                    if re.fullmatch(r"-[a-zA-Z]+[oO]", a)
                ),
                None,
            )
            saved = clustered
        remote_name = name == "wget" and saved is None
        remote_name |= name == "curl" and any(_has_flag(a, "O", "--remote-name") for a in args)
        if saved and saved != "-" and not (name == "curl" and saved in urls):
            self._writes([saved])
            self.downloaded.add(saved)
        elif remote_name:
            for url in urls:
                base = posixpath.basename(url.split("?")[0].split("#")[0])
                if base:
                    self.downloaded.add(base)
                    self._write(base)

    def _archive(self, name: str, args: list[str], positional: list[str], depth: int) -> None:
        """An archive tool: extraction writes what the archive holds (not on the line);
        tar runs commands of its own (``--to-command``, ``-I``, checkpoint actions)."""
        if name == "tar":
            mode = args[0] if args and not args[0].startswith("-") else ""
            extracts = "x" in mode or any(
                _has_flag(a, "x", "--extract") or a == "--get" for a in args if a.startswith("-")
            )
            for option in TAR_COMMANDS:
                if (command := _option_value(args, {option})) is not None:
                    self.script(command, depth + 1)
            for arg in args:
                if arg.startswith("--checkpoint-action=exec="):
                    self.script(arg.split("=", 2)[2], depth + 1)
            if "--remove-files" in args:
                files = [a for a in positional if a != mode][1:]
                self._text(_words_text(["rm", "-r", *(files or ["?"])]))
            folder = _option_value(args, {"-C", "--directory"})
        else:
            extracts = (
                name not in {"ar", "jar", "7z", "7za", "7zr", "unrar"}
                or bool(positional and positional[0] in {"x", "e", "-x", "xf"})
                or (name == "cpio" and any(_has_flag(a, "i", "--extract") for a in args))
            )
            folder = _option_value(args, {"-d"}) if name == "unzip" else None
            if name in {"7z", "7za", "7zr"}:
                folder = next((a[2:] for a in args if a.startswith("-o") and len(a) > 2), None)
        if extracts:
            self.reading.opaque.append(name)
            if folder:
                self._write(folder)

    def _remote(self, name: str, args: list[str], depth: int) -> None:
        """The command ssh runs on another machine, su and runuser as another user, script
        under a terminal: read as a command (its effects matter wherever they land)."""
        if name == "ssh":
            n = 0
            while n < len(args) and args[n].startswith("-"):
                takes = re.fullmatch(r"-[a-zA-Z]*[bcDEeFIiJLlmOoPpQRSWw]", args[n])
                n += 2 if takes else 1
            remote = args[n + 1 :]
            if remote:
                self.script(" ".join(remote), depth + 1)
            return
        command = _option_value(args, {"-c", "--command"})
        if command is None:
            command = next(
                (args[n + 1] for n, a in enumerate(args[:-1]) if re.fullmatch(r"-[a-zA-Z]*c", a)),
                None,
            )
        if command is not None:
            self.script(command, depth + 1)

    def _container(self, name: str, args: list[str], depth: int) -> None:
        """The command a container runs (``docker run [options] IMAGE CMD…``, ``docker
        exec … CONTAINER CMD…``, ``kubectl exec … -- CMD…``), read as a command."""
        if name in {"kubectl", "oc", "lxc"}:
            if args[:1] in (["exec"], ["run"]) and "--" in args:
                inner = args[args.index("--") + 1 :]
                if inner:
                    self._simple(inner, [], depth + 1)
            return
        rest = args
        if rest[:1] in (["compose"], ["container"]):
            rest = rest[1:]
        if not rest or rest[0] not in {"run", "exec", "create"}:
            return
        rest, n, flagless = (
            rest[1:],
            0,
            re.compile(
                r"-[dit]+|--(rm|init|privileged|read-only"
                r"|detach|interactive|tty|publish-all|no-deps|service-ports|remove-orphans)"
            ),
        )
        while n < len(rest) and rest[n].startswith("-"):
            n += 1 if flagless.fullmatch(rest[n]) or "=" in rest[n] else 2
        inner = rest[n + 1 :]
        if inner:
            self._simple(inner, [], depth + 1)

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
            self._substituted(script, _program(words[0]))
        self._downloaded_run(scripts[:1], _program(words[0]))

    def _substituted(self, script: str, runner: str) -> None:
        """A script read from a process substitution (``bash <(…)``, ``source <(…)``): a
        download is a download run, a decoded payload cannot be read."""
        if not script.startswith("<("):
            return
        if re.search(r"^<\(\s*(\S*/)?(curl|wget|fetch|aria2c|xh|http)\b", script):
            self._text(f"curl | {runner}")
        elif re.search(r"\b(base64|base32|xxd|rev|openssl|gunzip|zcat|xzcat|uudecode)\b", script):
            self.reading.unsure = True

    def _interpreter(self, name: str, words: list[str], depth: int) -> None:
        args = words[1:]
        flags = CODE_FLAGS.get(name, set())
        code: str | None = None
        for n, arg in enumerate(args):
            short = arg.startswith("-") and not arg.startswith("--")
            # perl -ne, ruby -pe: a cluster ending in e, but not -Mmodule=name, -rlib.
            clustered = short and re.fullmatch(r"-[a-zA-Z]*[eE]", arg) and arg[1] not in "MmIr"
            if arg in flags or (name in {"perl", "ruby"} and clustered):
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
                self._substituted(arg, name)
                self._downloaded_run([arg], name)
                if name == "deno" and arg == "run":
                    urls = [a for a in args[n + 1 :] if re.match(r"^https?://", a)]
                    if urls:
                        self._text(f"curl | {name}")
                    break
                if name == "deno":
                    continue
                break
        if code is not None:
            self.reading.opaque.append(name)
            self._code(code, depth + 1, name)

    def _code(self, code: str, depth: int, name: str = "sh") -> None:
        """An interpreter's one-liner: the shell commands its strings hold, the trees it
        deletes, the files it opens for writing; code it builds and runs cannot be read."""
        if depth > DEPTH_MAX:
            self.reading.unsure = True
            return
        literals = [
            next(g for g in m.groups() if g is not None) for m in CODE_STRING.finditer(code)
        ]
        runs = CODE_RUN.search(code) is not None
        if runs and CODE_DOWNLOAD.search(code):
            self._text(f"curl | {name}")
        elif runs and CODE_DECODE.search(code):
            self.reading.unsure = True
        for found in CODE_EXEC.finditer(code):
            argument = code[found.end() :].lstrip(" (")
            if not argument.startswith(("'", '"', "{", "`")):
                self.reading.unsure = True  # exec of what is not a literal
        if CODE_KILL.search(code):
            self.reading.signals = True
        if CODE_TREE_DELETE.search(code):
            self._text(_words_text(["rm", "-r", *(literals[:1] or ["?"])]))
        elif CODE_UNLINK.search(code):
            many = CODE_MANY.search(code) is not None
            self._text(_words_text(["rm", *(["-r"] if many else []), *(literals[:1] or ["?"])]))
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
        read one says nothing about the line. What it runs belongs to the one-liner's
        command (an allow rule that covers the one-liner covers its strings)."""
        unsure, opaque = self.reading.unsure, len(self.reading.opaque)
        self.quiet += 1
        try:
            self.script(text, depth)
        finally:
            self.quiet -= 1
        self.reading.unsure = unsure
        del self.reading.opaque[opaque:]

    def _heredoc_read(self, words: list[str], body: str, depth: int) -> None:
        name = _program(words[0])
        for level in (self._unwrapped(name, words) or [], words):
            if level and _program(level[0]) in SQL_CLIENTS:
                self._text(_words_text([_program(level[0]), "-c", body]))
                return
            if level and _program(level[0]) in SHELLS | {"at", "batch"}:
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

    def _fd(self, args: list[str], depth: int) -> None:
        """fd's ``-x``/``-X`` run a command on each file it finds: rm over them is a
        delete of the tree."""
        for n, arg in enumerate(args):
            if arg in {"-x", "--exec", "-X", "--exec-batch"} and n + 1 < len(args):
                command = list(args[n + 1 :])
                inner = self._simple(command, [], depth + 1)
                if inner and inner[0] in {"rm", "unlink", "shred"}:
                    self._text(_words_text(["rm", "-r", "."]))
                return

    def _reads_stdin_code(self, words: list[str]) -> bool:
        name = _program(words[0])
        rest = [w for w in words[1:] if w not in {"-", "-s", "--"}]
        if name in SHELLS:
            return not any(not w.startswith("-") for w in rest) and not any(
                w.startswith("-") and "c" in w[1:] for w in rest
            )
        if name in CODE_FLAGS:
            return not rest or all(w.startswith("-") and w not in CODE_FLAGS[name] for w in rest)
        if name in {"at", "batch"}:
            return "-f" not in rest and not any(w in {"-l", "-r", "-d", "-c"} for w in rest)
        return name in {"sudo", "doas"} and bool(rest) and self._reads_stdin_code(rest)

    def _downloaded_run(self, scripts: list[str], runner: str) -> None:
        for script in scripts:
            if script in self.downloaded or posixpath.basename(script) in {
                posixpath.basename(d) for d in self.downloaded
            }:
                self._text(f"curl | {runner if runner in SHELLS else 'sh'}")

    # -- texts and paths ------------------------------------------------------------------

    def _text(self, text: str) -> None:
        if not text:
            return
        if text not in self.reading.texts:
            self.reading.texts.append(text)
        if self.stack and text not in self.stack[-1].texts:
            self.stack[-1].texts.append(text)

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
        full = resolve(path, cwd or "", self.env)
        for link, to in self.links.items():
            if full is not None and (full == link or full.startswith(link + "/")):
                return to + full[len(link) :]
        return full


def _runs_code(words: list[str]) -> bool:
    """Whether a shell is given its code on the line (``bash -lc '…'``), not a script."""
    for word in words[1:]:
        if not word.startswith("-"):
            return False
        if not word.startswith("--") and "c" in word[1:]:
            return True
    return False


def _has_flag(arg: str, short: str, long: str = "") -> bool:
    """Whether the option word gives ``-short`` (alone or among others: ``-rf``) or
    ``long``."""
    if long and (arg == long or arg.startswith(long + "=")):
        return True
    return bool(re.fullmatch(r"-[a-zA-Z0-9]+", arg)) and short in arg[1:]


def _long_options(name: str, args: list[str]) -> list[str]:
    """``args`` with each long option's abbreviation written out (``--rec`` is
    ``--recursive`` to ``rm``, as getopt and git's parser read it)."""
    known = LONG_OPTIONS.get(name)
    if not known:
        return args
    out: list[str] = []
    for arg in args:
        if arg == "--":
            out.extend(args[len(out) :])
            break
        out.append(_long_option(known, arg))
    return out


@functools.lru_cache(maxsize=1024)
def _long_option(known: tuple[str, ...], arg: str) -> str:
    if not arg.startswith("--") or len(arg) < 3:
        return arg
    option, equals, value = arg.partition("=")
    if option in known:
        return arg
    full = next((k for k in known if k.startswith(option)), None)
    return f"{full}{equals}{value}" if full else arg


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


def _roots(words: list[str]) -> list[str]:
    """Where a listing looks (``find src …`` → src; ``git ls-files`` → .)."""
    roots = []
    for word in words[1:]:
        if word.startswith("-") or word in {"(", "!"}:
            break
        roots.append(word)
    if _program(words[0]) == "git":
        roots = []
    return roots or ["."]


def _said(words: list[str]) -> str:
    """What ``echo`` or ``printf`` writes out: escapes decoded (``\\x72``, ``\\162``,
    ``\\n``), printf's ``%s``/``%b`` filled with its arguments."""
    name, args = _program(words[0]), [w for w in words[1:]]
    while args and re.fullmatch(r"-[neE]+", args[0]) and name == "echo":
        args = args[1:]
    if name == "printf" and args:
        fill = iter(args[1:])
        text = re.sub(r"%[sb]", lambda _: next(fill, ""), args[0]) + " ".join(fill)
    else:
        text = " ".join(args)

    return _decoded(text)


def _decoded(text: str) -> str:
    """Backslash escapes as printf and ``$'…'`` decode them."""

    def decoded(found: re.Match[str]) -> str:
        escape = found.group(0)
        if escape[1] == "x" and len(escape) > 2:
            return chr(int(escape[2:], 16))
        if escape[1] in "01234567":
            return chr(int(escape[1:].lstrip("0") or "0", 8))
        return {"n": "\n", "t": "\t", "\\": "\\"}.get(escape[1], escape[1])

    return re.sub(r"\\(x[0-9a-fA-F]{1,2}|0?[0-7]{1,3}|.)", decoded, text, flags=re.S)


def _splits(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True
