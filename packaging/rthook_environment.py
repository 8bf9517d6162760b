"""PyInstaller runtime hook: give the programs we start the user's environment, not the bundle's.

On Linux the bootloader points LD_LIBRARY_PATH at the bundled libraries (keeping the user's value in
LD_LIBRARY_PATH_ORIG). The browser, xdg-open and the like would inherit it and load our copies of
libssl, libz or libexpat instead of their own. Changing the variable here does not affect this
process: the dynamic loader read it when the process started.

A client may start us with no locale at all (no LANG or LC_*). python itself then moves the C locale to
UTF-8 and says so to its children through LC_CTYPE (PEP 538); a frozen program does not, and a browser
started in the C locale cannot save into a folder named in Chinese: it puts the file in its working
directory instead. So the frozen program does what python would.

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

if os.name == "posix" and not os.environ.get("LC_ALL"):
    if (os.environ.get("LC_CTYPE") or os.environ.get("LANG") or "C") in ("C", "POSIX"):
        os.environ["LC_CTYPE"] = "UTF-8" if sys.platform == "darwin" else "C.UTF-8"

os.environ["PYINSTALLER_RESET_ENVIRONMENT"] = "1"
