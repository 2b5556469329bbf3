"""Copies libsrkit_capi.so from the CMake build folder into the package.

The library comes from `cmake --build build --target srkit_capi` in the
repository; SRKIT_LIBRARY names another copy (docs/python.md)."""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithLibrary(build_py):
    def run(self):
        lib = Path(os.environ.get("SRKIT_LIBRARY", HERE.parent / "build" / "lib" /
                                  "libsrkit_capi.so"))
        if not lib.is_file():
            raise SystemExit(f"srkit: {lib} not found: build it first with "
                             "`cmake --build build --target srkit_capi` (or set SRKIT_LIBRARY)")
        shutil.copy2(lib, HERE / "srkit" / "libsrkit_capi.so")
        super().run()


setup(cmdclass={"build_py": BuildWithLibrary})
