"""Where the wheel's binaries are: installed beside the Python scripts of this environment.

`SIM_OLLAMA_BIN` and `SIM_OLLAMA_HARNESS_BIN` override the search (a binary built from source,
say); otherwise the scripts directory of this interpreter's install scheme, then the user
scheme, then PATH.
"""
from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

_OVERRIDES = {"sim-ollama": "SIM_OLLAMA_BIN", "harness": "SIM_OLLAMA_HARNESS_BIN"}


class BinaryNotFound(RuntimeError):
    """The wheel's binary is not where pip installs it, nor on PATH."""


def find_binary(name: str) -> str:
    """The path of the wheel's `sim-ollama` or `harness` binary."""
    if name not in _OVERRIDES:
        raise ValueError(f"unknown binary {name!r}: sim-ollama or harness")
    override = os.environ.get(_OVERRIDES[name])
    if override:
        if not os.access(override, os.X_OK):
            raise BinaryNotFound(f"{_OVERRIDES[name]}={override!r} is not an executable file")
        return override
    exe = name + (".exe" if sys.platform == "win32" else "")
    places = [sysconfig.get_path("scripts")]
    user_scheme = f"{os.name}_user" if os.name != "posix" else "posix_user"
    try:
        places.append(sysconfig.get_path("scripts", scheme=user_scheme))
    except KeyError:
        pass
    places.append(str(Path(sys.executable).parent))
    for place in places:
        candidate = Path(place) / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(exe)
    if found:
        return found
    raise BinaryNotFound(
        f"the {name} binary was not found in {', '.join(dict.fromkeys(places))} nor on PATH: "
        f"install the sim-ollama wheel into this environment, or set {_OVERRIDES[name]}"
    )


def run(name: str) -> "None":
    """Replace this process with the binary, passing the command line on (`python -m`)."""
    path = find_binary(name)
    args = [path, *sys.argv[1:]]
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call(args))
    os.execv(path, args)
