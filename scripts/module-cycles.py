#!/usr/bin/env python3
"""Lists module cycles inside each crate of the workspace.

A module depends on a sibling when it (or a module inside it) names that
sibling (or a module inside it) by a `crate::`, `super::` or `self::` path.
Only siblings count: a module reaching into its parent or a child is how
Rust modules nest, not a cycle. A name a module re-exports (`pub use`)
counts as the module it comes from. Exits 1 when any crate has a cycle.

Rust is read as the compiler lexes it (strings with escapes and line
continuations, raw strings, nested block comments, char literals), so a
path inside a string or a comment is no dependency. `--self-test` checks
that on a planted cycle.

Usage: scripts/module-cycles.py [--self-test | CRATE_SRC_DIR ...]  (default: every crate)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def crate_sources():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", ".venv", "node_modules")]
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            yield os.path.join(dirpath, "src")


def module_files(src):
    """Maps module path tuples to their file, from lib.rs or main.rs down."""
    roots = [f for f in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, f))]
    out = {}

    def visit(path, file):
        out[path] = file
        text = strip(open(file).read())
        base = os.path.dirname(file)
        stem = os.path.splitext(os.path.basename(file))[0]
        child_dir = base if stem in ("lib", "main", "mod") else os.path.join(base, stem)
        for m in re.finditer(r'(#\[path\s*=\s*"([^"]+)"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text):
            name = m.group(3)
            if m.group(2):
                candidate = os.path.join(base if stem in ("lib", "main", "mod") else base, m.group(2))
                candidate = os.path.join(os.path.dirname(file), m.group(2))
            else:
                candidate = os.path.join(child_dir, name + ".rs")
                if not os.path.exists(candidate):
                    candidate = os.path.join(child_dir, name, "mod.rs")
            if os.path.exists(candidate):
                visit(path + (name,), candidate)

    for r in roots:
        visit((), os.path.join(src, r))
    return out


RAW_STRING = re.compile(r'b?r(#*)"')
CHAR = re.compile(r"b?'(\\.[^']*|[^'\\\n])'")


def strip(text):
    """The code of `text` without comments and with every string and char
    literal emptied, scanned as Rust lexes it: escapes and line
    continuations inside strings, raw strings (`r#"..."#`), block comments
    that nest, and lifetimes (`'a`) that are no char literal."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (raw := RAW_STRING.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + raw.group(1)
            end = text.find(close, raw.end())
            out.append('""')
            i = n if end < 0 else end + len(close)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and (char := CHAR.match(text, i)):
            out.append("' '")
            i = char.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def reexports(modules):
    """(module, name) -> the module path the name is re-exported from."""
    out = {}
    for path, file in modules.items():
        text = strip(open(file).read())
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+((?:crate|self|super)(?:::\w+)*|\w+(?:::\w+)*)::(\{[^}]*\}|\w+)\s*;", text):
            base_text, names = m.group(1), m.group(2)
            parts = base_text.split("::")
            if parts[0] == "crate":
                base, parts = (), parts[1:]
            elif parts[0] == "super":
                base = path[:-1]
                parts = parts[1:]
                while parts and parts[0] == "super":
                    base, parts = base[:-1], parts[1:]
            elif parts[0] == "self":
                base, parts = path, parts[1:]
            else:
                base = path
            target = base
            for part in parts:
                if target + (part,) in modules:
                    target = target + (part,)
                else:
                    break
            if target == path or target not in modules:
                continue
            for name in re.split(r"[{},\s]+", names):
                name = name.split(" as ")[-1].strip()
                if name and name != "*":
                    out[(path, name)] = target
    return out


def referenced(path, text, modules, exported):
    """Module paths a file names."""
    refs = set()
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)+)", text):
        head, tail = m.group(1), m.group(2).split("::")[1:]
        if head == "crate":
            base = ()
        elif head == "self":
            base = path
        else:
            base = path[:-1]
            while tail and tail[0] == "super":
                base = base[:-1]
                tail = tail[1:]
        target = base
        for part in tail:
            if target + (part,) in modules:
                target = target + (part,)
            else:
                seen = set()
                while (target, part) in exported and (target, part) not in seen:
                    seen.add((target, part))
                    target = exported[(target, part)]
                break
        refs.add(target)
    # groups: `use crate::{a, b::c}`, `use super::{x, y}`
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)*)::\{([^}]*)\}", text):
        head, tail = m.group(1), [t for t in m.group(2).split("::") if t]
        if head == "crate":
            base = ()
        elif head == "self":
            base = path
        else:
            base = path[:-1]
            while tail and tail[0] == "super":
                base = base[:-1]
                tail = tail[1:]
        for part in tail:
            if base + (part,) in modules:
                base = base + (part,)
        for item in re.split(r"[,\s]+", m.group(3)):
            name = item.split("::")[0]
            if name and base + (name,) in modules:
                refs.add(base + (name,))
            elif name and (base, name) in exported:
                refs.add(exported[(base, name)])
    return refs


def cycles(src):
    modules = module_files(src)
    exported = reexports(modules)
    edges = {}
    for path, file in modules.items():
        for ref in referenced(path, strip(open(file).read()), modules, exported):
            # the sibling pair under their nearest common parent
            common = 0
            while common < min(len(path), len(ref)) and path[common] == ref[common]:
                common += 1
            if common == len(path) or common == len(ref):
                continue  # ancestor or descendant
            a, b = path[: common + 1], ref[: common + 1]
            edges.setdefault(a, set()).add(b)
    found = []
    index = {}
    low = {}
    stack = []
    on = set()
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted("::".join(c) for c in comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            strong(v)
    return found


def self_test():
    """Plants a cycle the scan must find: `a` names `b` after a string with
    a line continuation, a raw string and a char literal of a quote, and
    `b` names `a`; names inside strings and comments must not count."""
    import tempfile

    with tempfile.TemporaryDirectory() as src:
        files = {
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": 'const S: &str = "one \\\n  two \\" crate::c";\n'
            "const R: &str = r#\"crate::c \" \"#;\nconst Q: char = '\"';\n"
            "/* crate::c /* nested */ crate::c */\nuse crate::b::f;\n",
            "b.rs": "pub fn f() {}\nuse crate::a;\n",
            "c.rs": "// crate::a\nuse crate::b;\n",
        }
        for name, text in files.items():
            with open(os.path.join(src, name), "w") as f:
                f.write(text)
        found = cycles(src)
    assert found == [["a", "b"]], f"the planted cycle a <-> b alone was expected, found {found}"
    print("module-cycles self-test: the planted cycle is found, names in strings and comments are not")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    srcs = sys.argv[1:] or sorted(crate_sources())
    bad = False
    for src in srcs:
        for comp in cycles(src):
            bad = True
            print(f"{os.path.relpath(src, ROOT)}: cycle among {', '.join(comp)}")
    if not bad:
        print("no module cycles")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
