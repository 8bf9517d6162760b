"""PyInstaller runtime hook: give the programs we start the user's environment, not the bundle's.

On Linux the bootloader points LD_LIBRARY_PATH at the bundled libraries (keeping the user's value in
LD_LIBRARY_PATH_ORIG). The browser, xdg-open and the like would inherit it and load our copies of
libssl, libz or libexpat instead of their own. Changing the variable here does not affect this
process: the dynamic loader read it when the process started.

PYINSTALLER_RESET_ENVIRONMENT makes a copy of this executable that we start (the MCP self-check in
setup and doctor) set itself up from scratch instead of reusing this process's unpacked files.
"""

import os
import sys

bundle = getattr(sys, "_MEIPASS", None)
for name in ("LD_LIBRARY_PATH", "LIBPATH"):
    original = os.environ.pop(f"{name}_ORIG", None)
    if bundle and bundle in os.environ.get(name, ""):
        if original is not None:
            os.environ[name] = original
        else:
            os.environ.pop(name, None)

os.environ["PYINSTALLER_RESET_ENVIRONMENT"] = "1"
