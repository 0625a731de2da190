"""Builds the wheel of the Python package with libbaton.so.0 inside it.

The library comes from, in order: the file named by BATON_LIBRARY (a
libbaton.so.0 built by CMake, target baton_c); else a Release build of the
target baton_c made here with CMake in <repository>/build/python-wheel
(CMAKE_CXX_COMPILER_LAUNCHER=ccache in the environment speeds it up).
It is copied to baton/_native/ without its debug info. The package itself
is pure Python over ctypes, so the wheel is tagged py3-none-<platform>:
any CPython 3.10+ on the platform the library was built for (it links the
store client libraries of that system: libpq5, libhiredis0.14, ...).
"""

import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SONAME = "libbaton.so.0"


def built_library() -> str:
    given = os.environ.get("BATON_LIBRARY")
    if given:
        if not os.path.isfile(given):
            sys.exit(f"setup.py: BATON_LIBRARY={given} is not a file")
        return given
    if not os.path.isfile(os.path.join(REPO, "CMakeLists.txt")):
        sys.exit("setup.py: set BATON_LIBRARY to a libbaton.so.0 (no repository around this tree)")
    build = os.path.join(REPO, "build", "python-wheel")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.check_call(
        # Warnings are not errors here: a packaging build should not fail
        # on a new compiler's warning (the project's own builds keep -Werror).
        ["cmake", "-S", REPO, "-B", build, *gen, "-DCMAKE_BUILD_TYPE=Release",
         "-DBATON_BUILD_TESTS=OFF", "-DBATON_BUILD_BENCH=OFF", "-DBATON_WERROR=OFF"]
    )
    subprocess.check_call(
        ["cmake", "--build", build, "--target", "baton_c", "-j", str(os.cpu_count() or 2)]
    )
    return os.path.join(build, "src", "capi", SONAME)


class BuildPyWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        dest = os.path.join(self.build_lib, "baton", "_native")
        os.makedirs(dest, exist_ok=True)
        target = os.path.join(dest, SONAME)
        shutil.copyfile(built_library(), target)
        os.chmod(target, 0o755)
        if shutil.which("strip"):
            subprocess.check_call(["strip", "--strip-debug", target])


class WithLibrary(Distribution):
    def has_ext_modules(self) -> bool:
        return True  # it carries a shared library: platform paths and tag


class PlatformWheel(bdist_wheel):
    def get_tag(self):  # type: ignore[no-untyped-def]
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=WithLibrary, cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel})
