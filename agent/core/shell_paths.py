"""Which files a simple command reads and writes, as the shell would find them: tildes (`~`, `~+`, `~user`)
and globs expanded from the command's directory, symlinks resolved; what we cannot follow is None."""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from agent.core.shell_parse import Part

# Commands that change the files named by their non-option words (beyond `>`, `>>` and tee).
_EDITS_ALL_ARGS = frozenset({"tee", "touch", "truncate", "rm", "rmdir", "mkdir", "unlink", "shred", "chmod", "chown",
                             "chgrp", "chattr", "setfacl"})
_EDITS_LAST_ARG = frozenset({"cp", "mv", "install", "ln", "rsync", "scp"})
_IN_PLACE = {"sed": re.compile(r"-[a-zA-Z]*i|--in-place"), "perl": re.compile(r"-[a-zA-Z]*i"),
             "ruby": re.compile(r"-[a-zA-Z]*i")}
# Recursive readers and whether they follow symlinks inside the tree.
_RECURSIVE = {"rg": False, "find": False, "tree": False, "du": False, "tar": False, "zip": False}
_WALK_LIMIT = 20_000


def expand_word(word: str, cwd: Path) -> list[Path] | None:
    """The resolved paths a shell word names; None for what we cannot follow ($, backquote, braces, `~-`)."""
    if not word or any(c in word for c in "$`{") or word.startswith("~-"):
        return None
    if word == "~+" or word.startswith("~+/"):
        word = str(cwd) + word[2:]
    elif word.startswith("~"):
        try:
            word = os.path.expanduser(word)
        except (KeyError, RuntimeError):
            pass
    base = word if os.path.isabs(word) else os.path.join(cwd, word)
    if any(c in word for c in "*?["):
        matches = [Path(m).resolve() for m in sorted(glob.glob(base))]
        if any(seg.startswith(".") and any(g in seg for g in "*?[") for seg in word.split("/")):
            # `.*` matches `..` in older shells: count the parent of the pattern's directory as reached too
            matches.append(Path(os.path.dirname(base)).parent.resolve())
        if matches:
            return matches
    return [Path(base).resolve()]


def command_dirs(parts: list[Part], cwd: Path) -> list[Path] | None:
    """Every directory a part of the command may run in: cwd and each `cd`/`pushd` target; None when a
    target cannot be followed. Subshells and order are ignored: checking paths from all of them is safe."""
    dirs = [cwd]
    for part in parts:
        if part.argv[:1] in (["cd"], ["pushd"]):
            words = [w for w in part.argv[1:] if not w.startswith("-")] or ["~"]
            found = expand_word(words[0], cwd) if not any(part.dynamic) else None
            if found is None or len(found) != 1:
                return None
            dirs.append(found[0])
        elif part.argv[:1] == ["popd"]:
            return None
    return list(dict.fromkeys(dirs))


def write_words(part: Part) -> list[str]:
    """Words naming files the part writes: output redirections and in-place editors' files."""
    words = []
    for op, target in part.redirects:
        bare = op.lstrip("0123456789")
        if bare.startswith("<<") or bare in ("<", "<&"):
            continue
        if bare in (">&", "&>", "&>>") and re.fullmatch(r"\d+|-", target) or bare == ">&-":
            continue
        if target in ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty") or target.startswith("/dev/fd/"):
            continue
        words.append(target)
    if not part.argv:
        return words
    head, args = os.path.basename(part.argv[0]), part.argv[1:]
    plain = [a for a in args if not a.startswith("-") or a == "-"]
    if head in _EDITS_ALL_ARGS:
        words += plain if head not in ("chmod", "chown", "chgrp") else plain[1:]
    elif head in _EDITS_LAST_ARG and len(plain) >= 2:
        target = next((a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")), None)
        words.append(target or (args[args.index("-t") + 1] if "-t" in args[:-1] else plain[-1]))
    elif head == "dd":
        words += [a[3:] for a in args if a.startswith("of=")]
    elif head in _IN_PLACE and any(_IN_PLACE[head].fullmatch(a) for a in args):
        has_script = any(a in ("-e", "-f", "--expression", "--file") or a.startswith("--expression=") for a in args)
        words += plain if has_script else plain[1:]
    return words


def read_words(part: Part) -> list[str]:
    """Words that may name files the part reads: its arguments, option values (`--file=x`) and `<` targets."""
    words = [target for op, target in part.redirects if op.lstrip("0123456789") in ("<", "<>")]
    if part.argv[:1] in (["echo"], ["printf"]):
        return words  # they print their words, they read no files
    for arg in part.argv[1:]:
        if arg.startswith("-"):
            value = arg.partition("=")[2]
            if value:
                words.append(value)
        else:
            words.append(arg)
    return words


def recursive_roots(part: Part) -> tuple[list[str], bool]:
    """(directories a recursive reader walks, whether it follows symlinks inside them); ([], False) otherwise."""
    if not part.argv:
        return [], False
    head, args = os.path.basename(part.argv[0]), part.argv[1:]
    plain = [a for a in args if not a.startswith("-")]
    if head == "grep" or head == "egrep" or head == "fgrep":
        follow = any(a == "--dereference-recursive" or re.fullmatch(r"-[a-zA-Z]*R[a-zA-Z]*", a) for a in args)
        if follow or any(a == "--recursive" or re.fullmatch(r"-[a-zA-Z]*r[a-zA-Z]*", a) for a in args):
            return (plain[1:] or ["."]), follow
        return [], False
    if head == "ls" and any(re.fullmatch(r"-[a-zA-Z]*R[a-zA-Z]*", a) or a == "--recursive" for a in args):
        return plain or ["."], False
    if head in ("cp", "chmod", "chown") and any(re.fullmatch(r"-[a-zA-Z]*[rR][a-zA-Z]*", a) for a in args):
        return plain, False
    if head in _RECURSIVE:
        follow = head == "find" and "-L" in args or head == "rg" and ("-L" in args or "--follow" in args)
        return (plain if head != "rg" else plain[1:]) or ["."], follow
    return [], False


def walk(root: Path, follow: bool):
    """Every path under `root` (resolved when following symlinks), at most _WALK_LIMIT; None past the limit."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=follow):
        for name in dirnames + filenames:
            count += 1
            if count > _WALK_LIMIT:
                yield None
                return
            path = Path(dirpath) / name
            yield path.resolve() if follow or path.is_symlink() else path
