#!/usr/bin/env python3
"""Production Rust functions over N lines and files over M lines (issue 22's bars).

Production: src/ and crates/*/src/ files, minus *_tests.rs, tests.rs, tests/ folders
and the `#[cfg(test)] mod ... { }` blocks inside files. A function's length runs from
its `fn` line to its closing brace, comments included (what a reader scrolls through).
A brace inside a string, char or comment is skipped. FN_MAX=N in the environment
lists functions over N lines instead.
"""
import pathlib, re, sys

FN_MAX, FILE_MAX = int(__import__("os").environ.get("FN_MAX", 100)), 800
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")

def production(p):
    s = p.as_posix()
    return not (p.name.endswith("_tests.rs") or p.name == "tests.rs" or "/tests/" in s
                or "/benches/" in s or "/examples/" in s)

def code_only(text):
    """The text with strings, chars and comments blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == "r" and re.match(r'r#*"', text[i:i+10]) and not (i and (text[i-1].isalnum() or text[i-1] == "_")):
            m = re.match(r'r(#*)"', text[i:]); hashes = m.group(1)
            j = text.find('"' + hashes, i + len(m.group(0))); j = n if j < 0 else j + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0))); i += len(m.group(0))
            else:
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return "".join(out)

def match_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{": depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0: return j
    return len(code) - 1

long_fns, long_files = [], []
files = sorted(list(root.glob("src/**/*.rs")) + list(root.glob("crates/*/src/**/*.rs")))
for p in files:
    if not production(p): continue
    text = p.read_text()
    lines = text.count("\n")
    if lines > FILE_MAX: long_files.append((lines, p))
    code = code_only(text)
    # Test modules inside the file.
    skip = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", code):
        skip.append((m.start(), match_brace(code, m.end() - 1)))
    for m in re.finditer(r"\bfn\s+(\w+)[^;{]*\{", code):
        if any(a <= m.start() <= b for a, b in skip): continue
        end = match_brace(code, m.end() - 1)
        a = code.count("\n", 0, m.start()) + 1
        b = code.count("\n", 0, end) + 1
        if b - a + 1 > FN_MAX:
            long_fns.append((b - a + 1, f"{p}:{a}", m.group(1)))
long_fns.sort(reverse=True)
print(f"production functions over {FN_MAX} lines: {len(long_fns)}")
for n, where, name in long_fns: print(f"  {n:4} {where} {name}")
print(f"production files over {FILE_MAX} lines: {len(long_files)}")
for n, p in sorted(long_files, reverse=True): print(f"  {n:5} {p}")
