"""Rules every module of the package keeps, checked on the tree itself.

- No module-level mutable state: what obsmask keeps between requests (caches,
  counters, pools, locks) belongs to an object an addon owns, so that a new
  policy, a second proxy in one process or the next test starts from
  nothing. At module level (and in a class body, which every instance
  shares) a value may not be a dict, list or set (written out, by
  comprehension, or made by a call), nor a weak or ordered dict, a deque, a
  counter, a lock, a thread pool or an ``itertools.count``; no function
  says ``global``, and nothing is memoised with ``functools.cache`` or
  ``lru_cache``. A read-only table is a ``MappingProxyType``, a tuple or a
  frozenset.
- Every module is at most MAX_LINES lines: a module has one job.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.processes import REPO

PACKAGE_DIR = REPO / "addons" / "obsmask_core"
MAX_LINES = 300
MUTABLE_MAKERS = frozenset({
    "dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "deque", "Counter",
    "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "Lock", "RLock", "Condition",
    "Semaphore", "ThreadPoolExecutor", "ProcessPoolExecutor", "count", "local",
})
MEMOISERS = frozenset({"cache", "lru_cache"})
MUTABLE_DISPLAYS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _called_name(node: ast.expr) -> str | None:
    """``f`` for ``f(...)`` and ``a.b.f(...)``; None for anything else."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _is_mutable(value: ast.expr | None) -> bool:
    if value is None:
        return False
    if isinstance(value, MUTABLE_DISPLAYS):
        return True
    return isinstance(value, ast.Call) and _called_name(value) in MUTABLE_MAKERS


def _shared_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run once for the module or the class: its body, and
    the bodies of its module-level ``if``, ``try`` and ``with`` blocks."""
    out: list[ast.stmt] = []
    for statement in body:
        out.append(statement)
        if isinstance(statement, ast.If | ast.With):
            out.extend(_shared_statements(statement.body))
            if isinstance(statement, ast.If):
                out.extend(_shared_statements(statement.orelse))
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody,
                          *(handler.body for handler in statement.handlers)):
                out.extend(_shared_statements(block))
    return out


def state_problems(source: str) -> list[str]:
    """One line per piece of module-level mutable state in ``source``."""
    tree = ast.parse(source)
    problems: list[str] = []
    bodies = [("module", tree.body)] + [
        (f"class {node.name}", node.body) for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)]
    for where, body in bodies:
        for statement in _shared_statements(body):
            value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) \
                else None
            if _is_mutable(value):
                problems.append(f"line {statement.lineno}: a mutable value in the {where} body")
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            problems.append(f"line {node.lineno}: global {', '.join(node.names)}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                if _called_name(decorator) in MEMOISERS:
                    problems.append(f"line {node.lineno}: {node.name} memoised in the module")
    return sorted(problems, key=lambda problem: int(problem.split()[1].rstrip(":")))


def modules() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def test_the_package_keeps_no_state_at_module_level():
    problems = [f"{path.relative_to(PACKAGE_DIR)}: {problem}" for path in modules()
                for problem in state_problems(path.read_text(encoding="utf-8"))]
    assert problems == []


def test_the_state_check_finds_each_kind_of_module_level_state():
    source = '''
import functools, threading
from types import MappingProxyType
from weakref import WeakKeyDictionary
TABLE = MappingProxyType({"a": 1})
NAMES = ("a", "b")
SEEN = {}
if True:
    KEPT: list[int] = []
_lock = threading.Lock()
_by_policy = WeakKeyDictionary()
class Holder:
    shared = set()
    def __init__(self):
        self.mine = {}
def counter():
    global SEEN
@functools.lru_cache(maxsize=8)
def patterns(limit):
    return limit
'''
    assert state_problems(source) == [
        "line 7: a mutable value in the module body",
        "line 9: a mutable value in the module body",
        "line 10: a mutable value in the module body",
        "line 11: a mutable value in the module body",
        "line 13: a mutable value in the class Holder body",
        "line 17: global SEEN",
        "line 19: patterns memoised in the module",
    ]


def test_every_module_is_at_most_three_hundred_lines():
    long = {str(path.relative_to(PACKAGE_DIR)): lines for path in modules()
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
