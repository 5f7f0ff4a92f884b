"""Text that reads (and tokenises) like agent traffic: English words,
identifiers, paths and code-like lines in the shape of each tool's output
(about 4 characters per cl100k token), all drawn from one seeded RNG."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

_WORDS = (
    "the of and to in is that for it with as on be this by are from at or an not which "
    "have has was will can should would could when then than if into only also more most "
    "some any each other all both after before while because between without within "
    "function value result file line module class method test error case data list "
    "string number object field option setting check return call change update fix add "
    "remove handle parse read write load save run build use need make see look find "
    "issue problem behaviour expected actual output input default current new old first "
    "last next previous same different empty missing invalid correct instead now here"
).split()
_IDENTS = (
    "config path value result items parser segment node index buffer name token context "
    "handler request response cache field schema record stream module logger options "
    "state manager session query params header payload encoder decoder template loader "
    "registry factory builder visitor walker lexer grammar dialect rule fixer linter "
    "storage backend engine model view form widget serializer validator reader writer"
).split()
_DIRS = ("src", "lib", "tests", "core", "utils", "api", "parser", "rules", "db", "io")
_EXCEPTIONS = ("ValueError", "KeyError", "TypeError", "AttributeError", "AssertionError",
               "IndexError", "RuntimeError")


class TextMaker:
    """Text that reads (and tokenises) like agent traffic, from one seeded RNG."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def ident(self) -> str:
        first, second = self.rng.choice(_IDENTS), self.rng.choice(_IDENTS)
        return first if self.rng.random() < 0.4 else f"{first}_{second}"

    def path(self) -> str:
        parts = [self.rng.choice(_DIRS) for _ in range(self.rng.randint(1, 3))]
        return "/".join([*parts, self.ident()]) + ".py"

    def sentence(self) -> str:
        words = [self.rng.choice(_WORDS) for _ in range(self.rng.randint(6, 18))]
        if self.rng.random() < 0.3:
            words.insert(self.rng.randrange(len(words)), f"`{self.ident()}`")
        return " ".join(words).capitalize() + "."

    def code_line(self) -> str:
        indent = "    " * self.rng.randint(0, 3)
        a, b, c = self.ident(), self.ident(), self.ident()
        templates = (
            f"def {a}(self, {b}, {c}=None):",
            f"return self.{a}({b}, {c})",
            f"if {a} is None or not {b}:",
            f"{a} = {b}.get('{c}', {self.rng.randint(0, 99)})",
            f"for {a} in self.{b}:",
            f"# {self.sentence()}",
            f"raise {self.rng.choice(_EXCEPTIONS)}(f\"{self.rng.choice(_WORDS)} {{{a}!r}}\")",
            f"{a}.append({b}[{self.rng.randint(0, 9)}])",
            f"from .{a} import {b}, {c}",
            f"class {a.title().replace('_', '')}({b.title().replace('_', '')}):",
            f"self.{a} = {b}",
            "",
        )
        line = self.rng.choice(templates)
        return indent + line if line else line

    def lines(self, size: int, make_line: Callable[[], str]) -> str:
        out: list[str] = []
        length = 0
        while length < size:
            line = make_line()
            out.append(line)
            length += len(line) + 1
        return "\n".join(out)[:size]

    def prose(self, size: int) -> str:
        out: list[str] = []
        length = 0
        while length < size:
            paragraph = " ".join(self.sentence() for _ in range(self.rng.randint(2, 5)))
            out.append(paragraph)
            length += len(paragraph) + 2
        return "\n\n".join(out)[:size]

    def traceback(self, size: int) -> str:
        frames: list[str] = ["Traceback (most recent call last):"]
        body_size = max(size, 300) - 80
        while sum(len(line) + 1 for line in frames) < body_size:
            frames.append(f'  File "/repo/{self.path()}", line {self.rng.randint(1, 900)}, '
                          f"in {self.ident()}")
            frames.append("    " + self.code_line().strip())
        frames.append(f"{self.rng.choice(_EXCEPTIONS)}: {self.sentence()}")
        return "\n".join(frames)

    def tool_output(self, tool: str, size: int) -> str:
        rng = self.rng
        if tool == "read_file":
            start = rng.randint(1, 500)
            counter = iter(range(start, start + 100000))
            return self.lines(size, lambda: f"{next(counter):6}\t{self.code_line()}")
        if tool == "grep":
            return self.lines(size, lambda: f"{self.path()}:{rng.randint(1, 900)}:"
                                            f"{self.code_line()}")
        if tool == "edit_file":
            head = f"The file {self.path()} has been edited. Here is the result:\n"
            return head + self.lines(max(size - len(head), 1), self.code_line)
        if tool == "run_tests":
            outcomes = ("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED")
            body = self.lines(max(size - 60, 1), lambda: (
                f"tests/test_{self.ident()}.py::test_{self.ident()} {rng.choice(outcomes)} "
                f"[{rng.randint(0, 100):3}%]"))
            return body + f"\n===== {rng.randint(1, 300)} passed in {rng.random() * 9:.2f}s ====="
        # bash: a listing, a command's prose output or code, in mini-swe-agent's wrapper.
        kind = rng.random()
        inner = max(size - 45, 1)
        if kind < 0.4:
            text = self.lines(inner, lambda: "./" + self.path())
        elif kind < 0.7:
            text = self.lines(inner, self.code_line)
        else:
            text = self.prose(inner)
        return f"<returncode>0</returncode>\n<output>\n{text}\n</output>"

    def arguments(self, tool: str, size: int) -> str:
        if tool == "bash":
            commands: list[str] = []
            while sum(len(c) + 4 for c in commands) < size:
                commands.append(self.rng.choice((
                    f"grep -rn \"{self.ident()}\" {self.rng.choice(_DIRS)}/ | head -20",
                    f"sed -n '{self.rng.randint(1, 400)},{self.rng.randint(401, 900)}p' "
                    f"{self.path()}",
                    f"python -c \"import {self.ident()}; print({self.ident()})\"",
                    f"cd /repo && ls {self.rng.choice(_DIRS)}",
                )))
            return json.dumps({"command": " && ".join(commands)[:size]})
        if tool == "edit_file":
            return json.dumps({"path": self.path(), "old_text": self.code_line(),
                               "new_text": self.lines(size, self.code_line)})
        if tool == "read_file":
            return json.dumps({"path": self.path(), "view_range": [1, self.rng.randint(20, 400)]})
        if tool == "grep":
            return json.dumps({"pattern": self.ident(), "path": self.rng.choice(_DIRS)})
        return json.dumps({"command": f"python -m pytest -x -q tests/test_{self.ident()}.py"})


    # Two real shapes of tool output at the far ends of characters per token
    # (cl100k): the adversarial sessions use them to tell a rule that counts
    # characters from one that counts tokens.
    def padded_table(self, size: int) -> str:
        """A column-aligned listing padded with spaces (``ls -l``, ``df``, a
        wide report): about 8 characters per token."""
        def row() -> str:
            name = self.path()
            return f"{name:<48}{self.rng.randint(1, 99999):>14}{'':>20}{self.ident():<24}"
        return self.lines(size, row)

    def checksums(self, size: int) -> str:
        """``sha256sum`` output, hex digests and paths: about 2 characters per token."""
        return self.lines(size, lambda: f"{self.rng.getrandbits(256):064x}  {self.path()}")
