"""Compiled kernels: numba's JIT, or the same kernels compiled ahead of time.

Every hot loop of ``ubpe`` and ``signals`` is a Python function decorated with
this module's :func:`njit` (never numba's directly). They run in one of two modes:

* **JIT**, the default: :func:`njit` is ``numba.njit``. A process pays ``import
  numba`` (about 0.3 s and 90 MB) and loads each kernel it calls from numba's
  on-disk cache (about 0.4 s and 100 MB more for a CSV round trip).
* **AOT**, once ``ubpe aot build`` has run: the kernels, for the argument types
  that a workload over real and synthetic data called them with, are compiled by
  ``numba.pycc`` (numba's ahead-of-time compiler, see "Compiling code ahead of
  time" in numba's documentation) into extension modules under ``ubpe/_aot/``
  (or ``$UBPE_AOT_DIR``). A process that finds them imports no numba: each
  kernel is a :class:`Kernel` that checks its arguments' types (class, dtype,
  dimensions, contiguity, alignment, writeability) against the compiled
  signatures and calls the match. :func:`bind` fixes a kernel's last arguments
  (a model's parameters), checked once; each call checks only its own.

The modes give the same results. Every kernel releases the GIL while it runs,
in both modes (numba's ``nogil``; the build exports the compiled wrappers with
the same flag), so that threads run kernels in parallel. A call that no
compiled signature matches, a kernel that was not compiled, and compiled modules
built from other sources (the manifest holds a SHA-256 of every source file and
of every module), against another numpy or by an older build switch the whole
process to JIT for good: numba is imported, and every kernel (and every module
attribute that holds one) becomes its numba dispatcher. ``UBPE_AOT=0`` keeps a
process in JIT from the start.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, overload

AOT_DIR = Path(os.environ.get("UBPE_AOT_DIR") or Path(__file__).with_name("_aot"))
MANIFEST = "manifest.json"
MANIFEST_FORMAT, MANIFEST_VERSION = "ubpe-aot-manifest", 2  # 2: the wrappers release the GIL
PACKAGES = ("ubpe", "signals")  # the packages whose modules hold kernels

_LOCK = threading.RLock()  # loading the modules and switching to JIT happen once, in one thread
_REGISTRY: list[Any] = []  # every kernel defined so far: Kernel objects, or numba dispatchers in JIT
_STATE: dict[str, Any] = {
    "jit": os.environ.get("UBPE_AOT", "1") == "0" or not (AOT_DIR / MANIFEST).is_file(),
    "why": "UBPE_AOT=0" if os.environ.get("UBPE_AOT", "1") == "0" else "no compiled kernels",
    "modules": None,  # module name -> {export name: compiled function}, each once loaded
    "owners": None,  # export name -> the name of the module that holds it
    "manifest": None,
}


def mode() -> str:
    """``"aot"`` while the compiled modules serve every call, else ``"jit"``."""
    return "jit" if _STATE["jit"] else "aot"


def jit_reason() -> str:
    """Why the process runs in JIT (empty in AOT)."""
    return _STATE["why"] if _STATE["jit"] else ""


def _key(fn: Callable) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


F = TypeVar("F", bound=Callable)


@overload
def njit(fn: F) -> F: ...


@overload
def njit(**options: Any) -> Callable[[F], F]: ...


def njit(fn: Any = None, **options: Any) -> Any:
    """``numba.njit`` in JIT mode; a :class:`Kernel` in AOT mode. Used as ``@njit`` or
    ``@njit(cache=True, ...)`` with numba's options, ``nogil=True`` unless told. (Typed as
    the function itself, so that mypy checks the kernels' bodies and calls.)"""
    if fn is not None:
        return _make(fn, {})
    return lambda f: _make(f, options)


def _make(fn: Callable, options: dict) -> Any:
    options = {"nogil": True, **options}
    if _STATE["jit"]:
        import numba
        d = numba.njit(**options)(fn)
        _REGISTRY.append(d)
        return d
    k = Kernel(fn, options)
    _REGISTRY.append(k)
    return k


class LazyRef:
    """A module attribute that only compiled numba code uses (an intrinsic): imported when
    the process switches to JIT. Calling it from Python is an error in both modes."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def resolve(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)


def numba_ref(module: str, name: str) -> Any:
    """``module.name`` (a numba intrinsic or extension) in JIT mode; a :class:`LazyRef`
    in AOT mode, so that importing the caller does not import numba."""
    return LazyRef(module, name).resolve() if _STATE["jit"] else LazyRef(module, name)


class Kernel:
    """A kernel in AOT mode: the compiled function of the first signature that the
    arguments match, else (after switching the process to JIT) numba's dispatcher.

    Attributes ``py_func`` and ``targetoptions`` are those of a numba dispatcher.
    """

    def __init__(self, fn: Callable, options: dict) -> None:
        self.py_func = fn
        self.targetoptions = dict(options)
        self.key = _key(fn)
        self.__name__, self.__qualname__ = fn.__name__, fn.__qualname__
        self.__module__, self.__doc__, self.__wrapped__ = fn.__module__, fn.__doc__, fn
        self._n = fn.__code__.co_argcount
        self._defaults = fn.__defaults__ or ()  # of the last parameters
        self._variants: list[tuple[Callable, Callable]] | None = None
        self._specs: list[list] = []  # the compiled signature of each variant
        self._dispatcher: Any = None

    def __repr__(self) -> str:
        return f"<ubpe kernel {self.key} ({mode()})>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self._dispatcher
        if d is not None:
            return d(*args, **kwargs)
        variants = self._variants
        if variants is None:
            variants = self._load()
        full: tuple | None = args
        if kwargs or len(args) != self._n:
            full = self._bind(args, kwargs)
        if full is not None:
            for check, fn in variants:
                if check(full):
                    return fn(*full)
        use_jit(f"no compiled signature of {self.key} matches its arguments ({_describe(args)})")
        return self._dispatcher(*args, **kwargs)

    def _bind(self, args: tuple, kwargs: dict) -> tuple | None:
        """The positional arguments with the defaults filled in, or None if they cannot be."""
        missing = self._n - len(args)
        if not kwargs and 0 < missing <= len(self._defaults):
            return args + self._defaults[len(self._defaults) - missing:]
        try:
            b = inspect.signature(self.py_func).bind(*args, **kwargs)
        except TypeError:
            return None
        b.apply_defaults()
        return tuple(b.arguments.values())

    def _load(self) -> list:
        if not _open():
            self._variants = []
            return []
        found, specs = [], []
        for name, spec in _STATE["manifest"]["kernels"].get(self.key, []):
            fns = _module_functions(_owner(name))
            if fns is None:  # (the process switched to JIT)
                self._variants = []
                return []
            fn = fns.get(name)
            if fn is not None:
                found.append((_checker(spec), fn))
                specs.append(spec)
        self._specs = specs
        self._variants = found
        return found

    def _head_variants(self, n_head: int, tail: tuple) -> list[tuple[Callable, Callable]]:
        """(check of the first ``n_head`` arguments, compiled function) of each variant whose
        last arguments ``tail`` match (:class:`_Bound`)."""
        variants = self._load() if self._variants is None else self._variants
        return [(_checker(spec[:n_head]), fn) for spec, (_, fn) in zip(self._specs, variants)
                if len(spec) == n_head + len(tail) and _checker(spec[n_head:])(tail)]


class _Bound:
    """A kernel with its last arguments fixed (:func:`bind`)."""

    __slots__ = ("kernel", "tail", "variants")

    def __init__(self, kernel: Kernel, tail: tuple) -> None:
        self.kernel, self.tail = kernel, tail
        self.variants: list[tuple[Callable, Callable]] | None = None

    def __call__(self, *head: Any) -> Any:
        k = self.kernel
        if k._dispatcher is None:
            variants = self.variants
            if variants is None:
                variants = self.variants = k._head_variants(len(head), self.tail)
            for check, fn in variants:
                if check(head):
                    return fn(*head, *self.tail)
        return k(*head, *self.tail)  # (JIT, or no compiled signature matches: as a call)


def bind(kernel: Callable, *tail: Any) -> Callable:
    """``kernel`` with its last arguments fixed to ``tail``: a function of the first ones.

    In AOT mode the fixed arguments are checked against the compiled signatures once (at
    the first call) and each call checks only its own (a call of the packet decoder, 36
    arguments, spent about 4 us in the checks); in JIT mode, the kernel called with all of
    them. The fixed arguments must keep their types (arrays: dtype, layout, flags): the
    model parameters of a batch coder, built once."""
    if isinstance(kernel, Kernel):
        return _Bound(kernel, tail)
    return lambda *head: kernel(*head, *tail)


# ---------------------------------------------------------------- argument checks
_FLAG_C, _FLAG_F, _FLAG_ALIGNED, _FLAG_WRITEABLE = 0x1, 0x2, 0x100, 0x400
_INT64 = 1 << 63


def _checker(spec: list[list]) -> Callable[[tuple], bool]:
    """A function of the argument tuple: whether each argument is of the type that numba
    would infer for the compiled signature ``spec`` (one entry per argument), made once per
    signature."""
    key = json.dumps(spec)
    check = _CHECKERS.get(key)
    if check is None:
        check = _CHECKERS[key] = _make_checker(spec)
    return check


_CHECKERS: dict[str, Callable[[tuple], bool]] = {}


def _make_checker(spec: list[list]) -> Callable[[tuple], bool]:
    import numpy as np
    env: dict[str, Any] = {"nd": np.ndarray, "M": _INT64, "pyint": int, "pyfloat": float, "pybool": bool,
                           "pytuple": tuple, "i64": np.int64, "f64": np.float64, "b_": np.bool_}

    def term(x: str, s: list) -> str:
        kind = s[0]
        if kind == "array":
            _, dtype, ndim, layout, readonly = s
            d = f"d{len(env)}"
            env[d] = np.dtype(dtype)
            mask = _FLAG_ALIGNED | {"C": _FLAG_C, "F": _FLAG_F}.get(layout, 0)
            mask |= 0 if readonly else _FLAG_WRITEABLE
            return (f"({x}.__class__ is nd and {x}.ndim == {ndim} and ({x}.dtype is {d} or "
                    f"{x}.dtype == {d}) and {x}.flags.num & {mask} == {mask})")
        if kind == "tuple":
            items = s[1]
            return "(" + " and ".join([f"{x}.__class__ is pytuple", f"len({x}) == {len(items)}"] + [
                term(f"{x}[{j}]", t) for j, t in enumerate(items)]) + ")"
        if kind == "int64":
            return f"({x}.__class__ is i64 or ({x}.__class__ is pyint and -M <= {x} < M))"
        if kind == "float64":
            return f"({x}.__class__ is pyfloat or {x}.__class__ is f64)"
        if kind == "bool":
            return f"({x}.__class__ is pybool or {x}.__class__ is b_)"
        if kind == "uint64":  # numba types a Python int of 2**63 .. 2**64 - 1 as uint64
            env["u64"] = np.uint64
            return f"({x}.__class__ is u64 or ({x}.__class__ is pyint and M <= {x} < 2 * M))"
        t = f"t{len(env)}"  # another numpy scalar type: its class exactly
        env[t] = getattr(np, kind)
        return f"{x}.__class__ is {t}"

    names = [f"a{i}" for i in range(len(spec))]
    terms = [term(x, s) for x, s in zip(names, spec)] or ["True"]
    unpack = f"    {''.join(x + ', ' for x in names)}= a\n" if names else ""
    src = (f"def check(a):\n    if len(a) != {len(spec)}:\n        return False\n"
           f"{unpack}    return " + " and ".join(terms) + "\n")
    exec(src, env)
    return env["check"]


def _describe(args: tuple) -> str:
    """The arguments' types, as the checks see them."""
    out = []
    for a in args:
        if type(a).__name__ == "ndarray":
            f = a.flags
            out.append(f"{a.dtype}[{a.ndim}d{',C' if f.c_contiguous else ''}{'' if f.writeable else ',ro'}]")
        else:
            out.append(type(a).__name__)
    return ", ".join(out)


# ---------------------------------------------------------------- loading, switching
def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _sources(files: list[str]) -> dict[str, str]:
    """SHA-256 of each file (relative to the folder that holds the packages); "" if unreadable."""
    root = Path(__file__).resolve().parent.parent
    return {rel: _sha256(root / rel) for rel in files}


def _open() -> bool:
    """Load the manifest and the compiled modules if they match the sources; else switch
    to JIT. Whether the process stays in AOT."""
    with _LOCK:
        if _STATE["jit"]:
            return False
        if _STATE["modules"] is not None:
            return True
        return _open_locked()


def _refuse(why: str) -> bool:
    """Switch to JIT because the compiled modules cannot serve (``why``); False."""
    use_jit(why)
    return False


def _open_locked() -> bool:
    try:
        man = json.loads((AOT_DIR / MANIFEST).read_text())
        if man.get("format") != MANIFEST_FORMAT or man.get("version") != MANIFEST_VERSION:
            return _refuse("the compiled kernels' manifest is of another format")
        if _sources(list(man["sources"])) != man["sources"]:
            return _refuse("the compiled kernels were built from other sources")
        import numpy as np
        if man.get("numpy") != np.__version__:  # their C code was built against numpy's headers
            return _refuse(f"the compiled kernels were built with numpy {man.get('numpy')}")
        owners = {name: mod for mod in sorted(man["modules"], key=len)
                  for entries in man["kernels"].values() for name, _ in entries
                  if name.startswith(mod + "__")}  # (the longest prefix wins: sorted by length)
    except (OSError, ValueError, KeyError, ImportError, TypeError) as e:
        return _refuse(f"the compiled kernels cannot be loaded ({e})")
    _STATE["manifest"], _STATE["modules"], _STATE["owners"] = man, {}, owners
    return True


def _owner(name: str) -> str:
    """The compiled module that exports ``name`` ("" if none does)."""
    return _STATE["owners"].get(name, "")


def _module_functions(mod_name: str) -> dict[str, Callable] | None:
    """The compiled functions of module ``mod_name``, loaded on first use (each module is
    about 1 MB: a command loads only those it calls), its file checked against the
    manifest's SHA-256 first; None, after switching the process to JIT, if it cannot be."""
    with _LOCK:
        if _STATE["jit"]:
            return None
        fns = _STATE["modules"].get(mod_name)
        if fns is not None:
            return fns
        try:
            path = next(AOT_DIR.glob(f"{mod_name}.*"), None) if mod_name else None
            if path is None or _sha256(path) != _STATE["manifest"]["files"].get(path.name):
                _refuse(f"compiled module {mod_name or '?'} is missing or damaged")
                return None
            loader = importlib.machinery.ExtensionFileLoader(mod_name, str(path))
            spec = importlib.util.spec_from_file_location(mod_name, path, loader=loader)
            assert spec is not None
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
        except (OSError, ValueError, KeyError, ImportError, TypeError) as e:
            _refuse(f"the compiled kernels cannot be loaded ({e})")
            return None
        fns = {k: v for k, v in vars(mod).items() if callable(v)}
        _STATE["modules"][mod_name] = fns
        return fns


def load() -> None:
    """Load every compiled module now, if the process runs them (before forking workers,
    so that each inherits them); nothing in JIT."""
    if _open():
        for mod_name in _STATE["manifest"]["modules"]:
            if _module_functions(mod_name) is None:
                return


def use_jit(why: str) -> bool:
    """Switch the process to JIT: import numba, give every kernel its dispatcher, and put
    the dispatchers (and the intrinsics) in place of the kernels in every module of
    ``PACKAGES``, so that compiled code sees numba objects. Returns True."""
    with _LOCK:
        return _use_jit(why)


def _use_jit(why: str) -> bool:
    if _STATE["jit"]:
        return True
    import numba
    _STATE["jit"], _STATE["why"] = True, why
    for k in _REGISTRY:
        if isinstance(k, Kernel) and k._dispatcher is None:
            k._dispatcher = numba.njit(**k.targetoptions)(k.py_func)
    for name, mod in list(sys.modules.items()):
        if mod is None or name.split(".")[0] not in PACKAGES:
            continue
        d = vars(mod)
        for attr, v in list(d.items()):
            if isinstance(v, Kernel):
                d[attr] = v._dispatcher
            elif isinstance(v, LazyRef):
                d[attr] = v.resolve()
    return True
