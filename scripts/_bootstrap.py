"""Create and fill the project's virtual environments, using only the stdlib.

The README's commands run with a bare ``python3`` (3.11 or newer): this module
makes ``.venv/<name>-py<X.Y>`` with ``venv`` and installs what pyproject.toml
lists into it with pip, once; a stamp file remembers what was installed, so
later runs start at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_STAMP = "obsmask-installed.txt"


def requirements(*groups: str) -> list[str]:
    """Requirement lines from pyproject.toml: "base" is [project].dependencies,
    any other name an optional-dependencies group."""
    with open(REPO / "pyproject.toml", "rb") as file:
        project = tomllib.load(file)["project"]
    lines: list[str] = []
    for group in groups:
        if group == "base":
            lines += project["dependencies"]
        else:
            lines += project["optional-dependencies"][group]
    return lines


def venv_dir(name: str) -> Path:
    return REPO / ".venv" / f"{name}-py{sys.version_info.major}.{sys.version_info.minor}"


def venv_bin(name: str, program: str) -> Path:
    return venv_dir(name) / "bin" / program


def ensure_venv(name: str, *groups: str) -> Path:
    """The venv ``name`` with ``groups`` installed; returns its python."""
    home = venv_dir(name)
    python = home / "bin" / "python"
    wanted = requirements(*groups)
    stamp = home / _STAMP
    installed = set(stamp.read_text().splitlines()) if stamp.exists() else set()
    if python.exists() and set(wanted) <= installed:
        return python
    if not python.exists():
        print(f"obsmask: creating {home.relative_to(REPO)}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    print(
        f"obsmask: installing {', '.join(groups)} into {home.relative_to(REPO)}",
        file=sys.stderr,
        flush=True,
    )
    subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *wanted],
        check=True,
    )
    stamp.write_text("\n".join(sorted(installed | set(wanted))) + "\n")
    return python


def run_inside(name: str, *groups: str) -> None:
    """Re-run the current script with the venv's python, unless already there."""
    python = ensure_venv(name, *groups)
    if Path(sys.prefix).resolve() == venv_dir(name).resolve():
        return
    os.execv(str(python), [str(python), *sys.argv])
