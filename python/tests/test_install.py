"""The wheel, built from the repository with Debian's tools, installs into a
fresh virtualenv and runs the README's example against batond."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import Store

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
REPO = os.path.dirname(PACKAGE)


def readme_example() -> str:
    """The Python example of the repository's README ("## In Python")."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    m = re.search(r"^## In Python\n.*?```python\n(.*?)```", text, re.S | re.M)
    assert m, "README.md has no Python example under '## In Python'"
    return m.group(1)


def run(cmd: list, **kw: object) -> str:  # type: ignore[type-arg]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)  # type: ignore[call-overload]
    assert p.returncode == 0, f"{cmd} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return str(p.stdout)


@pytest.mark.needs_batond
def test_wheel_installs_in_fresh_venv_and_runs_readme_example(batond: Store, tmp_path: object) -> None:
    lib = os.environ.get("BATON_LIBRARY")
    if not lib:
        pytest.skip("BATON_LIBRARY (the libbaton.so.0 to bundle) is not set")
    tmp = str(tmp_path)
    # Built from a copy, so the source tree gets no build/ or egg-info.
    src = os.path.join(tmp, "src")
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns(
        "tests", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache"))
    env = dict(os.environ, BATON_LIBRARY=lib)
    run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir",
         os.path.join(tmp, "dist"), src], env=env)
    wheels = os.listdir(os.path.join(tmp, "dist"))
    assert len(wheels) == 1 and re.fullmatch(r"baton-0\.1\.0-py3-none-linux_\w+\.whl", wheels[0]), wheels
    wheel = os.path.join(tmp, "dist", wheels[0])
    listing = run([sys.executable, "-m", "zipfile", "-l", wheel])
    assert "baton/_native/libbaton.so.0" in listing and "baton/py.typed" in listing

    venv = os.path.join(tmp, "venv")
    run([sys.executable, "-m", "venv", venv])
    clean = {k: v for k, v in os.environ.items() if k not in ("BATON_LIBRARY", "PYTHONPATH")}
    run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--quiet", wheel], env=clean)

    example = readme_example().replace("baton://127.0.0.1:7420", batond.url)
    program = (
        "import baton\n"
        "def write(token):\n    print('token', token)\n"
        + example
        + "import baton._lib as L\nprint('library', L.path)\nprint('module', baton.__file__)\n"
    )
    out = run([os.path.join(venv, "bin", "python"), "-c", program], env=clean, cwd=tmp)
    assert re.search(r"^token [1-9][0-9]*$", out, re.M), out
    site = os.path.join(venv, "lib")
    assert re.search(rf"^library {re.escape(site)}.*/baton/_native/libbaton\.so\.0$", out, re.M), out
    assert re.search(rf"^module {re.escape(site)}.*/baton/__init__\.py$", out, re.M), out
