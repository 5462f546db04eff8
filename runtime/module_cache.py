"""The on-disk cache of generated modules.

A generated module is named by the hash of its content (source text plus constant arrays):
``<cache_dir>/<hash16>/dslc_<hash16>.py`` with its constants in ``dslc_<hash16>.npz`` beside it. It
is imported under the stable name ``dslc_gen_<hash16>``. Because the file, its path and its
modification time stay the same across processes, Numba's ``cache=True`` finds its compiled code
in ``__pycache__`` next to the file (or under ``NUMBA_CACHE_DIR``) and a new process skips
compilation. One directory per module keeps every lookup of a module's files independent of how
many programs the cache holds (a flat directory made each first load scan all of them).

Files are written atomically (temporary file + ``os.replace``), so a concurrent reader sees the
old file or the new one, never half of one; two processes compiling the same program write the same
bytes. A cached file whose content does not match what its name promises (truncated, edited) is
rewritten; the new modification time makes Numba recompile. Numba's own cache files of a module that
cannot be unpickled are deleted before the module is imported, so Numba recompiles instead of
raising. Under ``NUMBA_DISABLE_JIT`` the module is imported under another name (plain Python).

``DSL_CACHE_DIR`` sets the directory (default ``~/.cache/dslc``).
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import io
import os
import pickle
import pickletools
import sys
import tempfile
import threading
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numba.core import config as numba_config
from numba.core.caching import _CacheLocator

_lock = threading.RLock()  # one import per module name even when two threads compile the same program;
# reentrant: importing a generated module may load the shared kernel library modules it uses


def cache_dir() -> Path:
    return Path(os.environ.get("DSL_CACHE_DIR") or Path.home() / ".cache" / "dslc")


def content_hash(source: str, constants: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(source.encode())
    for name in sorted(constants):
        value = np.ascontiguousarray(constants[name])
        h.update(f"\0{name}:{value.dtype.str}:{value.shape}\0".encode())
        h.update(value.tobytes())
    return h.hexdigest()[:16]


def load_module(source: str, constants: dict[str, np.ndarray]) -> types.ModuleType:
    """Write (if needed) and import the module for ``source``; returns the imported module."""
    digest = content_hash(source, constants)
    directory = cache_dir() / digest
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"dslc_{digest}.py"
    with _lock:
        if constants:
            _ensure_file(path.with_suffix(".npz"), _npz_bytes(constants), _npz_matches(constants))
        _ensure_file(path, source.encode(), lambda data: data == source.encode())
        # Under NUMBA_DISABLE_JIT the module is plain Python: never confuse it with a compiled one.
        name = f"dslc_{'py' if getattr(numba_config, 'DISABLE_JIT', 0) else 'gen'}_{digest}"
        module = sys.modules.get(name)
        if module is None:
            _drop_corrupt_numba_cache(path)
            module = import_module_file(name, path)
    return module


def _ensure_file(path: Path, content: bytes, matches: Callable[[bytes], bool]) -> None:
    """Make ``path`` hold ``content`` unless what it holds already ``matches``."""
    try:
        if matches(path.read_bytes()):
            return
    except OSError:
        pass  # absent or unreadable: (re)write it
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _drop_corrupt_numba_cache(path: Path) -> None:
    """Delete Numba's cache files of the module at ``path`` if any cannot be read back.

    Numba unpickles its index (``.nbi``) and data (``.nbc``) files without a guard, so a truncated
    or garbled one (a full disk, a killed writer on a filesystem without atomic rename) would make
    every later call of the program raise. Numba writes each file atomically and recompiles what is
    missing, so deleting the function's files is always safe. Checked once per module per process.
    """
    pycache = _numba_cache_path(path)
    try:
        indexes = list(pycache.glob(f"{path.stem}.*.nbi"))
    except OSError:
        return
    for index in indexes:
        stem = index.name[: -len(".nbi")]
        try:
            with open(index, "rb") as f:
                pickle.load(f)  # Numba's cache format version
                _, overloads = pickle.loads(f.read())
            for data_name in overloads.values():
                # Data files can only be unpickled once the module is imported: walk the opcodes,
                # which finds truncation and garbage without running anything.
                with open(pycache / data_name, "rb") as f:
                    for _ in pickletools.genops(f.read()):
                        pass
        except FileNotFoundError:
            continue  # removed meanwhile (or a data file never written): Numba recompiles it
        except Exception:  # any unpickling failure: truncated, garbled, from an unknown Numba
            for stale in pycache.glob(f"{glob.escape(stem)}*.nb[ic]"):
                stale.unlink(missing_ok=True)


def _numba_cache_path(path: Path) -> Path:
    """Where Numba keeps the compiled code of the module file ``path``: ``NUMBA_CACHE_DIR``'s
    subdirectory for the file's directory if that is set, else ``__pycache__`` beside the file."""
    root = getattr(numba_config, "CACHE_DIR", "")  # set from the environment at import: no stub
    if root:
        return Path(root) / _CacheLocator.get_suitable_cache_subpath(str(path))
    return path.parent / "__pycache__"


def _npz_bytes(constants: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **constants)  # type: ignore[arg-type]  # the stubs type every keyword as allow_pickle
    return buf.getvalue()


def _npz_matches(constants: dict[str, np.ndarray]) -> Callable[[bytes], bool]:
    """Whether stored npz bytes hold exactly ``constants`` (compared by value, not by zip bytes)."""

    def matches(data: bytes) -> bool:
        try:
            with np.load(io.BytesIO(data)) as stored:
                if sorted(stored.files) != sorted(constants):
                    return False
                return all(_same_array(stored[k], v) for k, v in constants.items())
        except Exception:  # a truncated zip raises anything from BadZipFile to ValueError
            return False

    return matches


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    b = np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def import_module_file(name: str, path: Path) -> types.ModuleType:
    """Import the module file ``path`` as ``name`` (registered in ``sys.modules``: Numba's cache and
    pickling look the module up by it); ``runtime.precompile``'s helpers import a module this way."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Numba's cache and pickling look the module up by this name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
