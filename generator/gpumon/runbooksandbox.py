"""The sandbox a spec's own runbook templates (``runbooks/*.md.j2`` next to the spec) run in.

Those templates come from the spec's repository, which a pull request controls, so besides
Jinja's sandbox (no Python attributes or calls beyond plain data) they are held to:

- **files**: :class:`OwnLoader` reads each template (and every ``include``/``import``/``extends``
  it names) through :func:`gpumon.readers.files.read_text`: regular files only (devices, FIFOs
  and sockets are refused), at most ``--max-input-mib``, UTF-8, and, unless ``--follow-symlinks``
  is given, never through a symlink that leads out of the ``runbooks/`` folder itself (the spec's
  folder is a repository root as often as not, and its ``.git/config`` holds CI tokens) nor
  into version-control metadata, and never a template name with a ``.git`` (``.hg``, ...) part;
- **size**: ``*``, ``**`` and ``+`` on strings, lists and numbers, ``~`` (concatenation),
  ``%`` formatting (and the ``format`` filter) with a huge width or precision (``'%09999999d'``)
  and method calls with a huge count argument (``'x'.center(10**9)``) are refused before they build
  anything over :data:`MAX_OUTPUT` characters (or a number over :data:`MAX_INT_BITS` bits); the
  rendered page is capped at the same size, and, on Linux, the address space the process may
  add while a template renders is capped at :data:`MEMORY_LIMIT` (the net under whatever a
  filter can still build);
- **time**: a template renders within :data:`TIME_LIMIT` seconds, enforced by ``SIGALRM``
  (``setitimer``), which interrupts any loop between two bytecodes; it is armed only in the main
  thread (where the CLI renders), since Python delivers signals only there.

Every breach raises :class:`TemplateLimit` (a ``jinja2.TemplateError``), which
:func:`gpumon.runbooks.render_one` reports as ``FILE:LINE: message`` with exit 2.
"""

from __future__ import annotations

import contextlib
import operator
import re
import signal
import threading
import traceback
from pathlib import Path

import jinja2
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import SandboxedEnvironment

from .oneline import one_line
from .readers import files as inputs

#: characters a rendered runbook (and any string or list a template builds) may hold: the bundled
#: runbooks are under 20 KB
MAX_OUTPUT = 1 << 20
#: bits of an integer a template may compute (``10**10**9`` would take minutes and gigabytes)
MAX_INT_BITS = 4096
#: seconds one runbook template may take to render (the bundled ones take milliseconds)
TIME_LIMIT = 10.0
#: bytes of address space the process may add while one template renders (Linux)
MEMORY_LIMIT = 512 << 20
#: characters of a template's error message shown (escaped): the text is the template's to choose
MAX_MESSAGE = 300


class TemplateLimit(jinja2.TemplateError):
    """A template broke one of the sandbox's bounds (size, time, a refused file)."""


def _sized(value) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def _check_size(size: int) -> None:
    if size > MAX_OUTPUT:
        raise TemplateLimit(f"the template builds a value of {size} items, over the cap of {MAX_OUTPUT}")


#: a printf-style conversion of ``%`` formatting: its width and precision (``*``: from the arguments)
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?.")


def _check_percent(fmt: str) -> None:
    """Refuse ``fmt % args`` whose widths and precisions add up past :data:`MAX_OUTPUT` (checked
    before formatting: ``'%0300000000d' % 1`` builds 300 MB), or take one from the arguments."""
    total = 0
    for width, precision in _PERCENT.findall(fmt):
        if "*" in (width, precision):
            raise TemplateLimit("a '*' width or precision in % formatting; write the number out")
        total += int(width or 0) + int(precision or 0)
    _check_size(total)


def _bounded_binop(op: str, left, right):
    """``left op right``, refused when the result would be too big (checked before computing)."""
    if op == "*":
        for seq, count in ((left, right), (right, left)):
            if _sized(seq) is not None and isinstance(count, int):
                _check_size(len(seq) * max(count, 0))
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise TemplateLimit(f"the template computes a number over {MAX_INT_BITS} bits")
    elif op == "**":
        if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and \
                right > 0 and left.bit_length() * right > MAX_INT_BITS:
            raise TemplateLimit(f"the template computes a number over {MAX_INT_BITS} bits")
    elif op == "+" and _sized(left) is not None and _sized(right) is not None:
        _check_size(len(left) + len(right))
    elif op == "%" and isinstance(left, str):
        _check_percent(left)
    return {"*": operator.mul, "**": operator.pow, "+": operator.add, "%": operator.mod}[op](left, right)


def _bounded_format(value, *args, **kwargs) -> str:
    """Jinja's ``format`` filter (``value % args``) with :func:`_check_percent` first."""
    _check_percent(str(value))
    return _format_filter(value, *args, **kwargs)


_format_filter = jinja2.filters.FILTERS["format"]


def _bounded_concat(parts) -> str:
    """``a ~ b``: Jinja's ``str_join``, refused past :data:`MAX_OUTPUT` characters."""
    parts = [str(p) for p in parts]
    _check_size(sum(len(p) for p in parts))
    return "".join(parts)


class _Generator(CodeGenerator):
    """Compiles ``~`` to :func:`_bounded_concat` (Jinja's own ``str_join`` cannot be intercepted)."""

    def visit_Concat(self, node, frame) -> None:
        self.write("environment.gpumon_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(SandboxedEnvironment):
    """Jinja's sandbox with the size bounds of this module (time and memory: :func:`bounded`)."""

    intercepted_binops = frozenset(["*", "**", "+", "%"])
    code_generator_class = _Generator

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gpumon_concat = _bounded_concat
        self.filters["format"] = _bounded_format

    def call_binop(self, context, op, left, right):
        return _bounded_binop(op, left, right)

    def call(self, __context, __obj, *args, **kwargs):
        # a count argument makes a str or list method build that much (center, ljust, zfill, ...)
        if getattr(__obj, "__self__", None) is not None and _sized(__obj.__self__) is not None:
            for arg in (*args, *kwargs.values()):
                if isinstance(arg, int) and not isinstance(arg, bool):
                    _check_size(arg)
        result = super().call(__context, __obj, *args, **kwargs)
        if _sized(result) is not None:
            _check_size(len(result))
        return result


class OwnLoader(jinja2.BaseLoader):
    """Templates of the spec's ``runbooks/`` folder ``own``, read within ``limits`` (see the
    module docstring), then the bundled ones (``fallback``, trusted). Without
    ``--follow-symlinks`` a template must resolve inside ``own`` as the spec's folder names it
    (resolved up to the spec's folder, not through a symlinked ``runbooks/`` itself)."""

    def __init__(self, own: Path, limits: inputs.Limits, fallback: jinja2.BaseLoader):
        self.own, self.limits, self.fallback = own, limits, fallback
        # the spec's folder is resolved (it may sit under a symlinked home), runbooks/ is not: a
        # runbooks/ linked to ".." would make the whole repository, .git included, "inside"
        self.root = own.parent.resolve() / own.name

    def get_source(self, environment, template):
        pieces = jinja2.loaders.split_template_path(template)     # refuses ".." (TemplateNotFound)
        if inputs.VCS_DIRS.intersection(pieces):
            # a runbooks/ folder may be a checkout of its own; its metadata is never a template
            raise self._refused(self.own.joinpath(*pieces), "names version-control metadata, "
                                                            "which is never read as a template")
        path = self.own.joinpath(*pieces)
        if not (path.exists() or path.is_symlink()):
            return self.fallback.get_source(environment, template)
        if not self.limits.follow_symlinks:
            try:
                target = path.resolve(strict=True)
            except (OSError, RuntimeError):
                raise self._refused(path, "a symlink loop or a symlink to a missing file") from None
            if self.root not in target.parents:
                raise self._refused(path, f"leads (through a symlink) to {target}, outside the spec's runbooks/ "
                                          f"folder {self.root}; pass --follow-symlinks to read it")
        try:
            text = inputs.read_text(path, inputs.Limits(self.limits.follow_symlinks, self.limits.max_bytes,
                                                         (self.root,)))
        except inputs.Refused as exc:
            raise self._refused(path, str(exc)) from None
        except OSError as exc:
            raise self._refused(path, f"cannot read: {exc.strerror or exc}") from None
        return text, str(path), lambda: False     # never reloaded: one render reads each once

    @staticmethod
    def _refused(path: Path, why: str) -> TemplateLimit:
        exc = TemplateLimit(why)
        exc.filename = str(path)
        return exc


class _Timeout(Exception):
    """Raised by the alarm inside the template's frame (so Jinja's traceback names its line)."""


@contextlib.contextmanager
def bounded(seconds: float = None, memory: int = None):
    """Run the block with :data:`TIME_LIMIT` and :data:`MEMORY_LIMIT` (module docstring). A
    timeout surfaces as :class:`TemplateLimit` from :func:`explain`."""
    seconds = TIME_LIMIT if seconds is None else seconds
    memory = MEMORY_LIMIT if memory is None else memory
    with contextlib.ExitStack() as stack:
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            def alarm(_signum, _frame):
                raise _Timeout(f"took longer than {seconds:g} s to render (the cap per runbook template)")
            previous = signal.signal(signal.SIGALRM, alarm)
            signal.setitimer(signal.ITIMER_REAL, seconds)

            def disarm():
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            stack.callback(disarm)
        stack.enter_context(_address_space(memory))
        yield


@contextlib.contextmanager
def _address_space(extra: int):
    """Cap the process' address space at its current size plus ``extra`` (Linux; elsewhere a
    no-op), so a filter that builds gigabytes fails with MemoryError instead of swapping."""
    limit = _cap(extra)
    if limit is None:
        yield
        return
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _cap(extra: int) -> int | None:
    """The address-space limit :func:`_address_space` sets (bytes), or None where it sets none:
    not Linux, unreadable, or a lower limit already in force (``ulimit -v``)."""
    try:
        import resource
        with open("/proc/self/statm", encoding="ascii") as fh:
            current = int(fh.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    cap = current + extra if hard == resource.RLIM_INFINITY else min(current + extra, hard)
    return None if soft != resource.RLIM_INFINITY and soft <= cap else cap


def explain(exc: BaseException) -> tuple[str | None, int | None, str] | None:
    """``(file, line, message)`` for an exception a spec's template raised while loading or
    rendering (Jinja rewrites its tracebacks so that the template's frames carry its file name and
    line), or None for one that is not the template's doing. The file and message are one line
    each, escaped and the message cut at :data:`MAX_MESSAGE` characters
    (:func:`gpumon.oneline.one_line`): a template chooses the text of what it raises
    (``"x".encode("\\n::add-mask::...")``), and CI runners read lines of the log as commands."""
    found = _explained(exc)
    if found is None:
        return None
    file, line, message = found
    return (one_line(file) if file else file), line, one_line(message, MAX_MESSAGE)


def _explained(exc: BaseException) -> tuple[str | None, int | None, str] | None:
    """:func:`explain` before escaping."""
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return exc.filename or exc.name, exc.lineno, exc.message or str(exc)
    if isinstance(exc, _Timeout):
        message = str(exc)
    elif isinstance(exc, (MemoryError, RecursionError, OverflowError)):
        message = {MemoryError: f"needs more than {MEMORY_LIMIT >> 20} MiB of memory to render",
                   RecursionError: "recurses too deeply"}.get(type(exc), f"a value too large ({exc})")
    elif isinstance(exc, jinja2.TemplateNotFound):
        message = f"no template {exc.name!r} in the spec's runbooks/ folder or gpumon's bundled ones"
    elif isinstance(exc, jinja2.TemplateError):
        message = exc.message or str(exc)
    elif isinstance(exc, (TypeError, ValueError, ArithmeticError, LookupError, AttributeError)):
        message = f"{type(exc).__name__}: {exc}"
    else:
        return None
    file, line = getattr(exc, "filename", None), None
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename and frame.filename.endswith(".j2"):
            file, line = frame.filename, frame.lineno
            break
    return file, line, message
