#!/usr/bin/env python3
r"""List the error codes declared in Sources/ that no test in Tests/ triggers.

Usage:
    scripts/untested-codes.py [--root DIR] [--all] [--verbose]

With no uncovered code it prints nothing and exits 0. Otherwise it prints one
line per uncovered code and exits 1:

    code<TAB>declared at Sources/Path/File.swift:LINE[, other/File.swift:LINE ...]

    --root DIR   the package root (default: the parent of this script's folder)
    --all        print every declared code as `code<TAB>covered|uncovered|allowed<TAB>sites<TAB>evidence`
                 and exit 0 (for inspecting the heuristic)
    --verbose    print a summary (codes found, covered, allowed, uncovered) on standard error

Only the Python 3 standard library is used; nothing is built or run.

What counts as a declared error code
------------------------------------
Every Stowage error has one shape (Sources/StowageCore/StowageError.swift): a stable snake_case `code` and a
message. The script reads Sources/**/*.swift with comments removed (so examples in `///` docs are not
declarations) and collects code strings from these declaration sites only:

  1. Raw-value enums that give a `code`: a `var code: String { X.rawValue }` whose property X is declared as
     `let/var X: SomeEnum`, where `enum SomeEnum: String` is in the same file or anywhere in Sources (the private
     `Code` enums of PlaylistError, CryptoError, KeyStoreError...; LeaseError.Reason,
     KeyServerSetupError.Code, ExportError.Code, KeyProtocolErrorCode via KeyServerError.protocolCode). Also a stored
     `var code: SomeEnum` of a String enum (VerificationProblem.Code, whose codes `stowage verify` reports as errors).
     Each case gives a code: its raw value, or its name when it has none (KeyProtocolErrorCode's ``case `internal` = "internal"``).
  2. Computed codes: `var code: String { switch self { case .a, .b: "some_code" ... default: "x" } }` (each case
     name is mapped to its literal) and the single-code form `var code: String { "some_code" }`.
  3. Explicit code arguments: a string literal at the top level of the argument of a `code:` label
     (`ReportedError(code: "service_not_running", ...)`, `DownloadError.keys(code: "no_key_server", ...)`,
     `Self(code: "invalid_payload", ...)`, `CommandOutput.fail(code: ...)`, `.init(code: x ?? "failed", ...)`,
     `code: flag ? "output_failed" : "unreadable"`; not `code: row["code"]`), except in calls listed in
     NOT_ERROR_CALLEES (TransferFailure: the download transfer log's internal `domain/code` pairs such as
     `not_found` or `network_down`, which never become an error's code).
  4. Positional codes: for a type with `init(_ code: String, ...)` (DemoError), a literal first argument of
     `TypeName("some_code", ...)`.

A code string must match [a-z][a-z0-9_]* (single words such as "unreadable", "released", "internal" count when
they come from these sites). Codes built at run time (`"http_\(status)"`) and codes merely passed on
(`code: error.code`) are not declarations. JSON field names, SQL, log fields and event kinds are never read,
because only the sites above are. Deliberately not read: String enums that are not error codes even where they
look alike (AuditVerification.Problem, AuditRecord.Event, PlaybackEnd.Reason, LeaseState, DownloadState...).

What counts as triggered by a test
----------------------------------
Tests/**/*.swift are read with comments removed. A code is covered when any of these holds:

  a. A string literal in Tests contains the code. A code with an underscore counts anywhere in a literal as a token
     bounded by characters that are not [A-Za-z0-9_] (`"no_lease"`, `"[no_lease]"`, `#"{"code":"no_lease"}"#`,
     `contains("error: ... [no_lease]")`). A single-word code (unreadable, released, internal, failed...) is also a
     state or plain word, so it counts only as `[word]` in a literal, as `"code":"word"` in a literal (JSON), or as
     the whole literal `"word"` on a line that also says `code` (`#expect(error.code == "released")`).
  b. A case name mapped to the code (sites 1 and 2) appears in Tests as a type-qualified member
     (`LeaseError.noLease`, `LeaseError.Reason.noLease`, `CryptoError.badPadding`, `DownloadError.notFound(...)`) of
     a type that owns it (a top-level enum itself; a nested `Code`/`Reason` enum's outer type; the error type whose
     `code` it gives), or as an implicit member (`== .noLease`, `throws: .badPadding`, `[.fileMissing]`; not
     `value.busy`) either in a test file that also names an owning type, or on a line that says code, reason, kind,
     error, problem or throws (`#expect(report.problems.map(\.code) == [.fileMissing])`). Private code enums are
     reached through the error's static constructors of the same name (`SegmentCryptoError.invalidIV`).
  c. For a type with exactly one code (`var code: String { "invalid_proxy" }`), the type is asserted in Tests:
     `ProxyError.self`, `as? ProxyError`, `as! ProxyError`, `as ProxyError`, `is ProxyError`.

Allowlist
---------
scripts/untested-codes.allow (optional): one code per line, `code  # why no test can trigger it`; blank lines and
`#` lines are ignored. Allowlisted codes are never reported; an allowlisted code that is no longer declared is
reported as `code<TAB>allowlisted but not declared` (exit 1) so the list does not rot.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

# Calls whose `code:` argument is not an error code (see site 3 in the docstring).
NOT_ERROR_CALLEES = {"TransferFailure"}

# A line that compares an error's code or kind: `problems.map(\\.code) == [.fileMissing]`, `error.reason == .noLease`.
ASSERTING_LINE = re.compile(r"code|reason|kind|error|problem|throws", re.IGNORECASE)
CODE_RE = re.compile(r"^[a-z][a-z0-9_]*$")
STRING_START = re.compile(r'(#*)("""|")')
TYPE_DECL = re.compile(r"\b(struct|enum|class|actor|extension|protocol)\s+([A-Za-z_][\w.]*)")
IDENT = r"[A-Za-z_]\w*"


# ----------------------------------------------------------------------------------------------------------------
# A small Swift lexer: comments blanked, string literals found (with interpolations, raw and multi-line strings).
# ----------------------------------------------------------------------------------------------------------------

class Lexed:
    """`code`: the text with comments replaced by spaces (newlines kept, so offsets and lines stay).
    `bare`: `code` with string contents also replaced by spaces (for structure: braces, parentheses).
    `strings`: (start of the opening delimiter, start of content, end of content) of each literal."""

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self._code = list(text)
        self._bare = list(text)
        self.strings: list[tuple[int, int, int]] = []
        i = 0
        while i < self.n:
            i = self._lex_code(i, nested=False)
        self.code = "".join(self._code)
        self.bare = "".join(self._bare)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def _blank(self, buf, a, b):
        for k in range(a, b):
            if buf[k] != "\n":
                buf[k] = " "

    def _lex_code(self, i: int, nested: bool) -> int:
        text, n = self.text, self.n
        depth = 0
        while i < n:
            c = text[i]
            if text.startswith("//", i):
                j = text.find("\n", i)
                j = n if j < 0 else j
                self._blank(self._code, i, j)
                self._blank(self._bare, i, j)
                i = j
                continue
            if text.startswith("/*", i):
                j, d = i + 2, 1
                while j < n and d:
                    if text.startswith("/*", j):
                        d, j = d + 1, j + 2
                    elif text.startswith("*/", j):
                        d, j = d - 1, j + 2
                    else:
                        j += 1
                self._blank(self._code, i, j)
                self._blank(self._bare, i, j)
                i = j
                continue
            if c in "#\"":
                m = STRING_START.match(text, i)
                if m:
                    i = self._lex_string(i, m)
                    continue
            if c == "(":
                depth += 1
            elif c == ")":
                if nested and depth == 0:
                    return i + 1
                depth -= 1
            i += 1
        return i

    def _lex_string(self, start: int, m: re.Match) -> int:
        text, n = self.text, self.n
        hashes, delim = m.group(1), m.group(2)
        close, escape = delim + hashes, "\\" + hashes
        j = content = m.end()
        blank_from = content
        while j < n:
            if text.startswith(close, j):
                self.strings.append((start, content, j))
                self._blank(self._bare, blank_from, j)
                return j + len(close)
            if text.startswith(escape, j):
                k = j + len(escape)
                if k < n and text[k] == "(":
                    self._blank(self._bare, blank_from, k + 1)
                    j = self._lex_code(k + 1, nested=True)
                    blank_from = j - 1
                    continue
                j = k + 1
                continue
            if delim == '"' and text[j] == "\n":
                break  # unterminated single-line literal: give up on it
            j += 1
        self.strings.append((start, content, j))
        self._blank(self._bare, blank_from, j)
        return j

    def line(self, offset: int) -> int:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def literals_in(self, a: int, b: int) -> list[str]:
        return [self.text[c:e] for (s, c, e) in self.strings if a <= s < b]

    def match_brace(self, open_index: int) -> int:
        """Index just past the `}` matching the `{` at open_index (in `bare`)."""
        depth = 0
        for k in range(open_index, self.n):
            ch = self.bare[k]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return k + 1
        return self.n


# ----------------------------------------------------------------------------------------------------------------
# Declarations
# ----------------------------------------------------------------------------------------------------------------

class Code:
    def __init__(self, code: str):
        self.code = code
        self.sites: list[str] = []  # "path:line"
        self.cases: set[tuple[str, frozenset[str]]] = set()  # (case name, owning type names)
        self.single_types: set[str] = set()  # types whose only code this is


class SwiftFile:
    def __init__(self, root: str, path: str):
        self.path = path
        self.rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            self.lex = Lexed(f.read())
        # (start, end, name) of each type body, for "which type is this offset in".
        self.types: list[tuple[int, int, str]] = []
        for m in TYPE_DECL.finditer(self.lex.bare):
            brace = self.lex.bare.find("{", m.end())
            if brace < 0:
                continue
            self.types.append((brace, self.lex.match_brace(brace), m.group(2).split(".")[-1]))

    def enclosing(self, offset: int) -> list[str]:
        """Type names around offset, innermost first."""
        inside = [(s, name) for (s, e, name) in self.types if s < offset < e]
        return [name for (s, name) in sorted(inside, reverse=True)]


def string_enums(files: list[SwiftFile]) -> dict[str, list[tuple[SwiftFile, int, int, str]]]:
    """name -> [(file, body start, body end, enclosing type or '')] for every `enum X: String`."""
    found: dict[str, list] = defaultdict(list)
    pattern = re.compile(r"\benum\s+(" + IDENT + r")\s*:\s*String\b")
    for f in files:
        for m in pattern.finditer(f.lex.bare):
            brace = f.lex.bare.find("{", m.end())
            if brace < 0:
                continue
            outer = f.enclosing(m.start())
            found[m.group(1)].append((f, brace, f.lex.match_brace(brace), outer[0] if outer else ""))
    return found


def enum_cases(f: SwiftFile, start: int, end: int) -> list[tuple[str, str, int]]:
    """(case name, raw value, offset) of a String enum's body; nested types' bodies are skipped."""
    result = []
    body = f.lex.code
    depth = 0
    k = start + 1
    case_re = re.compile(r"\bcase\s+")
    item_re = re.compile(r"\s*`?(" + IDENT + r")`?\s*(?:=\s*(#*)\"([^\"]*)\"\2)?\s*(,)?")
    while k < end - 1:
        ch = f.lex.bare[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            m = case_re.match(body, k)
            if m and (k == 0 or not (body[k - 1].isalnum() or body[k - 1] in "_.")):
                p = m.end()
                while True:
                    item = item_re.match(body, p)
                    if not item:
                        break
                    name, raw = item.group(1), item.group(3)
                    result.append((name, raw if raw is not None else name, p))
                    p = item.end()
                    if not item.group(4):
                        break
                k = p
                continue
        k += 1
    return result


def nesting(bare: str, start: int, end: int) -> int:
    """Bracket depth at `end`, counted from `start`."""
    depth = 0
    for ch in bare[start:end]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


def collect(root: str) -> tuple[dict[str, Code], list[str]]:
    sources = []
    for dirpath, _, names in os.walk(os.path.join(root, "Sources")):
        for name in sorted(names):
            if name.endswith(".swift"):
                sources.append(SwiftFile(root, os.path.join(dirpath, name)))
    sources.sort(key=lambda f: f.rel)
    enums = string_enums(sources)
    codes: dict[str, Code] = {}
    notes: list[str] = []

    def add(code: str, f: SwiftFile, offset: int, case: str | None = None, owners=(), single: str | None = None):
        entry = codes.setdefault(code, Code(code))
        site = f"{f.rel}:{f.lex.line(offset)}"
        if site not in entry.sites:
            entry.sites.append(site)
        if case:
            entry.cases.add((case, frozenset(o for o in owners if o)))
        if single:
            entry.single_types.add(single)

    def add_enum(enum_name: str, f: SwiftFile, owners: list[str]):
        candidates = enums.get(enum_name, [])
        same_file = [c for c in candidates if c[0] is f]
        chosen = same_file or candidates
        if len(chosen) != 1:
            notes.append(f"{f.rel}: cannot resolve enum {enum_name} ({len(chosen)} candidates)")
            return
        ef, s, e, outer = chosen[0]
        for name, raw, off in enum_cases(ef, s, e):
            if CODE_RE.match(raw):
                # A nested enum (`Code`, `Reason`) is named through its outer type; a top-level one by itself.
                add(raw, ef, off, case=name, owners=[outer or enum_name, *owners])

    var_code = re.compile(r"\bvar\s+code\s*:\s*(" + IDENT + r")\s*(\?)?")
    for f in sources:
        bare, code = f.lex.bare, f.lex.code
        # Sites 1 and 2: `var code: ...`.
        for m in var_code.finditer(bare):
            owners = f.enclosing(m.start())
            owner = owners[0] if owners else ""
            type_name, optional = m.group(1), m.group(2)
            rest = bare[m.end():]
            stripped = rest.lstrip()
            if type_name != "String":
                if not optional and type_name in enums and not stripped.startswith("{"):
                    add_enum(type_name, f, [owner])  # stored `var code: SomeEnum`
                continue
            if optional or not stripped.startswith("{"):
                continue  # stored String (codes come from call sites) or an optional pass-through
            brace = m.end() + (len(rest) - len(stripped))
            end = f.lex.match_brace(brace)
            body_bare = bare[brace + 1:end - 1].strip()
            via = re.fullmatch(r"(" + IDENT + r")\.rawValue", body_bare)
            if via:
                prop = re.search(r"\b(?:let|var)\s+" + via.group(1) + r"\s*:\s*(" + IDENT + r")\b", bare)
                if prop:
                    add_enum(prop.group(1), f, [owner])
                else:
                    notes.append(f"{f.rel}:{f.lex.line(m.start())}: code from {via.group(1)}.rawValue, type not found")
                continue
            literals = f.lex.literals_in(brace, end)
            if re.fullmatch(r'(#*)"\s*"\1', body_bare) and len(literals) == 1:
                if CODE_RE.match(literals[0]):
                    add(literals[0], f, brace, single=owner, owners=[owner])
                continue
            # switch: `case .a, .b(let x): "code"` / `default: "code"`.
            body = code[brace + 1:end - 1]
            clause = re.compile(r"\b(case|default)\b((?:[^:\"()]|\([^()]*\)|\"[^\"]*\")*?):\s*(#*)\"([^\"\\]*)\"\3")
            found_any = False
            for c in clause.finditer(body):
                value = c.group(4)
                if not CODE_RE.match(value):
                    continue
                found_any = True
                names = re.findall(r"\.\s*(" + IDENT + r")", c.group(2)) if c.group(1) == "case" else []
                offset = brace + 1 + c.start()
                if names:
                    for name in names:
                        add(value, f, offset, case=name, owners=[owner])
                else:
                    add(value, f, offset, owners=[owner])
            if not found_any and literals:
                notes.append(f"{f.rel}:{f.lex.line(m.start())}: `var code` body with literals not understood")

        # Site 3: `code:` argument literals.
        for m in re.finditer(r"(?<![\w.])code\s*:", bare):
            # Skip declarations (`code: String`, `let code: ...`): an argument is inside an unmatched `(`.
            depth, k = 0, m.start() - 1
            while k >= 0:
                ch = bare[k]
                if ch in ")]}":
                    depth += 1
                elif ch in "([{":
                    if depth == 0:
                        break
                    depth -= 1
                k -= 1
            if k < 0 or bare[k] != "(":
                continue
            callee_m = re.search(r"([\w.]+)\s*$", bare[:k])
            callee = callee_m.group(1) if callee_m else ""
            if callee == "init" or re.search(r"\bfunc\s+\w+\s*(<[^>]*>)?\s*$", bare[max(0, k - 120):k]):
                continue  # a parameter list (a default value is not a declaration site)
            if callee.split(".")[-1] in NOT_ERROR_CALLEES:
                continue
            # The argument runs to the first `,` or `)` at depth 0.
            depth, j = 0, m.end()
            while j < len(bare):
                ch = bare[j]
                if ch in "([{":
                    depth += 1
                elif ch in ")]}":
                    if depth == 0:
                        break
                    depth -= 1
                elif ch == "," and depth == 0:
                    break
                j += 1
            # Literals at the argument's top level only: `x ?? "failed"`, `c ? "a" : "b"`, not `row["code"]`.
            for (s, c, e) in f.lex.strings:
                if m.end() <= s < j and nesting(bare, m.end(), s) == 0 and CODE_RE.match(f.lex.text[c:e]):
                    add(f.lex.text[c:e], f, m.start())

    # Site 4: positional `TypeName("code", ...)` for types with `init(_ code: String`.
    positional = set()
    for f in sources:
        for m in re.finditer(r"\binit\s*\(\s*_\s+code\s*:\s*String\b", f.lex.bare):
            owners = f.enclosing(m.start())
            if owners:
                positional.add(owners[0])
    for f in sources:
        for type_name in positional:
            for m in re.finditer(r"(?<![\w.])" + re.escape(type_name) + r"\s*\(\s*", f.lex.bare):
                for (s, c, e) in f.lex.strings:
                    if s == m.end():
                        lit = f.lex.text[c:e]
                        if CODE_RE.match(lit):
                            add(lit, f, m.start(), single=None)
    return codes, notes


# ----------------------------------------------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------------------------------------------

class TestCorpus:
    def __init__(self, root: str):
        self.files: list[tuple[str, Lexed]] = []
        for dirpath, _, names in os.walk(os.path.join(root, "Tests")):
            for name in sorted(names):
                if name.endswith(".swift"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        self.files.append((os.path.relpath(path, root), Lexed(fh.read())))
        self.literals = [(rel, lx.text[c:e]) for rel, lx in self.files for (s, c, e) in lx.strings]

    def literal_evidence(self, code: str) -> str | None:
        b = r"(?<![A-Za-z0-9_])" + re.escape(code) + r"(?![A-Za-z0-9_])"
        if "_" in code:
            pattern = re.compile(b)
            for rel, lit in self.literals:
                if pattern.search(lit):
                    return f"{rel}: literal"
            return None
        esc = re.escape(code)
        bracketed = re.compile(r"\[" + esc + r"\]|\"code\\?\"\s*:\s*\\?\"" + esc + r"\\?\"")
        for rel, lit in self.literals:
            if bracketed.search(lit):
                return f"{rel}: literal"
        exact = re.compile(r"(#*)\"" + esc + r"\"\1")
        for rel, lx in self.files:
            for line in lx.code.splitlines():
                if "code" in line.lower() and exact.search(line):
                    return f"{rel}: literal beside `code`"
        return None

    def case_evidence(self, case: str, owners: frozenset[str]) -> str | None:
        if not owners:
            return None
        owner_alt = "|".join(re.escape(o) for o in sorted(owners))
        qualified = re.compile(r"(?<![\w.])(?:" + owner_alt + r")(?:\.\w+)?\.\s*" + re.escape(case) + r"(?!\w)")
        implicit = re.compile(r"(?<![\w)\]?!>\"'])\." + re.escape(case) + r"(?!\w)")
        mentions = re.compile(r"(?<![\w.])(?:" + owner_alt + r")(?!\w)")
        for rel, lx in self.files:
            code = lx.bare
            if qualified.search(code):
                return f"{rel}: {case} (qualified)"
            if implicit.search(code) and mentions.search(code):
                return f"{rel}: .{case}"
            for line in code.splitlines():
                if implicit.search(line) and ASSERTING_LINE.search(line):
                    return f"{rel}: .{case} (asserting line)"
        return None

    def type_evidence(self, type_name: str) -> str | None:
        t = re.escape(type_name)
        pattern = re.compile(r"(?<![\w.])" + t + r"\s*\.\s*self\b|\b(?:as[?!]?|is)\s+" + t + r"(?!\w)")
        for rel, lx in self.files:
            if pattern.search(lx.bare):
                return f"{rel}: {type_name} asserted"
        return None


def read_allowlist(path: str) -> dict[str, str]:
    allowed = {}
    if not os.path.exists(path):
        return allowed
    with open(path, encoding="utf-8") as f:
        for line in f:
            body, _, why = line.partition("#")
            body = body.strip()
            if body:
                allowed[body.split()[0]] = why.strip()
    return allowed


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    root = os.path.abspath(args.root)

    codes, notes = collect(root)
    tests = TestCorpus(root)
    allowed = read_allowlist(os.path.join(root, "scripts", "untested-codes.allow"))

    rows, uncovered = [], []
    for name in sorted(codes):
        entry = codes[name]
        evidence = tests.literal_evidence(name)
        if evidence is None:
            for case, owners in sorted(entry.cases, key=lambda c: (c[0], sorted(c[1]))):
                evidence = tests.case_evidence(case, owners)
                if evidence:
                    break
        if evidence is None:
            for type_name in sorted(entry.single_types):
                evidence = tests.type_evidence(type_name)
                if evidence:
                    break
        sites = ", ".join(entry.sites)
        if evidence:
            status = "covered"
        elif name in allowed:
            status, evidence = "allowed", allowed[name] or "allowlisted"
        else:
            status = "uncovered"
            uncovered.append(f"{name}\tdeclared at {sites}")
        rows.append(f"{name}\t{status}\t{sites}\t{evidence or ''}")
    stale = [f"{code}\tallowlisted but not declared" for code in sorted(allowed) if code not in codes]

    if args.verbose:
        counts = defaultdict(int)
        for row in rows:
            counts[row.split("\t")[1]] += 1
        print(
            f"{len(codes)} codes declared: {counts['covered']} covered by tests, {counts['allowed']} allowlisted, "
            f"{counts['uncovered']} uncovered",
            file=sys.stderr,
        )
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    if args.all:
        print("\n".join(rows))
        return 0
    out = uncovered + stale
    if out:
        print("\n".join(out))
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `| head`
        sys.stderr.close()
        sys.exit(1)
