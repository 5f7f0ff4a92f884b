"""The package's names say what things are.

- No two modules of the package share a file name, unless they are the
  same concept in each room (``SAME_CONCEPT``, with why): ``settings.py``
  per feature is one idea; two ``figures.py`` of which one is running sums
  and one is plots are two.
- No two public classes of the package share a name, but the ones the two
  offline commands (``obsmask measure`` and ``obsmask report``) each have
  for reading and grouping recorded requests, which one pipeline will
  merge (``TWO_PIPELINES``).
- No benchmark script is named in the package's text: the package is what
  users install, the scripts are the checkout's.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from support.processes import REPO

PACKAGE = REPO / "addons" / "obsmask_core"
SAME_CONCEPT = {
    "settings.py": "each room's settings, declared once",
    "errors.py": "each room's errors",
    "summary.py": "what each feature did to one request or answer, for its flow",
    "explain.py": "what each feature did, for the content view",
    "brake.py": "the provider's brake: its rule (billing/) and its sums (totals/)",
    "run.py": "each offline command's run",
    "figures.py": "each offline command's figures",
    "conversations.py": "each offline command's requests grouped into conversations",
}
TWO_PIPELINES = {"Conversation", "ConversationBill", "RecordedRequest", "SentRequest"}
BENCHMARK_SCRIPT = re.compile(r"\bbench_[a-z_]+")


def package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_modules_of_different_rooms_share_a_file_name_only_for_the_same_concept():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in package_modules():
        if path.name != "__init__.py":
            by_name[path.name].append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert set(shared) <= set(SAME_CONCEPT), {
        name: paths for name, paths in shared.items() if name not in SAME_CONCEPT}
    # A name listed that no longer has a twin is a stale exception.
    assert set(SAME_CONCEPT) <= set(shared), set(SAME_CONCEPT) - set(shared)


def test_no_two_public_classes_of_the_package_share_a_name():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in package_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                by_name[node.name].append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert set(shared) == TWO_PIPELINES, shared


def test_no_benchmark_script_is_named_in_the_packages_text():
    found = [f"{path.relative_to(PACKAGE)}: {match.group(0)}"
             for path in sorted(PACKAGE.rglob("*")) if path.suffix in (".py", ".toml", ".md")
             for match in BENCHMARK_SCRIPT.finditer(path.read_text(encoding="utf-8"))]
    assert not found, found
