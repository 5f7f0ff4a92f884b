"""Create and fill the project's virtual environments, using only the stdlib.

The README's commands run with a bare ``python3`` (3.11 or newer): this module
makes ``.venv/<name>-py<X.Y>`` with ``venv`` and installs what pyproject.toml
lists into it, once; a stamp file remembers what was installed, so later runs
start at once.

The installer is uv, itself installed from PyPI with pip into
``.venv/uv-py<X.Y>`` (pyproject.toml's [tool.obsmask] pins it): it fetches in
parallel and resolves in a second where pip takes minutes (mini-swe-agent's
litellm: 21 s against 83 s, bytecode compiled alike). Where uv cannot be
installed, or fails, pip installs as before.
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 11):  # noqa: UP036 - the check must run on older Pythons
    sys.exit(f"obsmask needs Python 3.11 or newer; this is Python "
             f"{sys.version_info[0]}.{sys.version_info[1]}")

import os
import shutil
import subprocess
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


def _installed(name: str) -> set[str]:
    stamp = venv_dir(name) / _STAMP
    return set(stamp.read_text().splitlines()) if stamp.exists() else set()


def venv_ready(name: str, *groups: str) -> bool:
    """Is the venv ``name`` there with ``groups`` installed?"""
    return (venv_dir(name) / "bin" / "python").exists() \
        and set(requirements(*groups)) <= _installed(name)


def ensure_venv(name: str, *groups: str) -> Path:
    """The venv ``name`` with ``groups`` installed; returns its python."""
    home = venv_dir(name)
    python = home / "bin" / "python"
    if venv_ready(name, *groups):
        return python
    wanted = requirements(*groups)
    stamp = home / _STAMP
    installed = _installed(name)
    uv = ensure_uv()
    if not python.exists():
        print(f"obsmask: creating {home.relative_to(REPO)}", file=sys.stderr, flush=True)
        # uv installs into a venv without pip of its own (ensurepip takes
        # seconds); pip is added only if pip has to install after all.
        subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if uv else []),
                        str(home)], check=True)
    print(
        f"obsmask: installing {', '.join(groups)} into {home.relative_to(REPO)}",
        file=sys.stderr,
        flush=True,
    )
    # Bytecode compiled at install, as pip does: with PYTHONDONTWRITEBYTECODE
    # set, every process would compile the packages it imports again.
    if uv is None or subprocess.run(
            [str(uv), "pip", "install", "-q", "--python", str(python), "--compile-bytecode",
             *wanted], check=False).returncode != 0:
        if uv is not None:
            print("obsmask: uv failed; installing with pip", file=sys.stderr, flush=True)
        if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True,
                          check=False).returncode != 0:
            subprocess.run([str(python), "-m", "ensurepip", "-q"], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *wanted],
            check=True,
        )
    stamp.write_text("\n".join(sorted(installed | set(wanted))) + "\n")
    return python


def ensure_uv() -> Path | None:
    """uv, as pyproject.toml's [tool.obsmask] pins it, installed once with pip
    into .venv/uv-pyX.Y; None (pip installs instead) if that fails."""
    with open(REPO / "pyproject.toml", "rb") as file:
        wanted: str = tomllib.load(file)["tool"]["obsmask"]["uv"]
    home = venv_dir("uv")
    uv = home / "bin" / "uv"
    stamp = home / _STAMP
    if uv.exists() and stamp.exists() and stamp.read_text().split() == [wanted]:
        return uv
    print(f"obsmask: installing {wanted} into {home.relative_to(REPO)}", file=sys.stderr,
          flush=True)
    python = home / "bin" / "python"
    made = python.exists() or subprocess.run(
        [sys.executable, "-m", "venv", str(home)], check=False).returncode == 0
    if not made or subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", wanted],
            check=False).returncode != 0 or not uv.exists():
        print("obsmask: uv could not be installed; pip installs instead", file=sys.stderr,
              flush=True)
        return None
    stamp.write_text(wanted + "\n")
    return uv


def run_inside(name: str, *groups: str) -> None:
    """Re-run the current script with the venv's python, unless already there."""
    python = ensure_venv(name, *groups)
    if Path(sys.prefix).resolve() == venv_dir(name).resolve():
        return
    os.execv(str(python), [str(python), *sys.argv])


def ensure_npm_agents() -> tuple[Path | None, str | None]:
    """The ``node_modules/.bin`` folder of the npm agents that pyproject.toml
    pins, installed once into .venv/agents-node; or None and why not (no npm
    on PATH, or the install failed: the tests that need them then skip,
    giving this reason)."""
    with open(REPO / "pyproject.toml", "rb") as file:
        wanted: list[str] = tomllib.load(file)["tool"]["obsmask"]["npm-agents"]
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return None, "node and npm are not on PATH"
    home = REPO / ".venv" / "agents-node"
    stamp = home / _STAMP
    installed = set(stamp.read_text().splitlines()) if stamp.exists() else set()
    if not set(wanted) <= installed:
        print(f"obsmask: installing {', '.join(wanted)} into {home.relative_to(REPO)}",
              file=sys.stderr, flush=True)
        home.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [npm, "install", "--prefix", str(home), "--no-audit", "--no-fund",
             "--loglevel=error", *wanted],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
        )
        if result.returncode != 0:
            tail = " ".join(result.stdout.strip().splitlines()[-3:])
            print(f"obsmask: npm install failed: {tail}", file=sys.stderr, flush=True)
            return None, f"npm install {' '.join(wanted)} failed: {tail}"
        stamp.write_text("\n".join(sorted(installed | set(wanted))) + "\n")
    return home / "node_modules" / ".bin", None


if __name__ == "__main__":
    # python3 scripts/_bootstrap.py NAME GROUP...: make one venv and stop
    # (.ci/run makes the second pass's while the first one runs).
    ensure_venv(sys.argv[1], *sys.argv[2:])
