"""Every output a command writes, checked before any work: files (``--plot``, ``--csv``,
``--trace``, ``report --out``) and folders (``--out`` of ``run``, ``sweep``, ``demo``,
``cluster``).

A check that only looks (``os.access``) says yes to root on a read-only file system, so
writability is tried for real: a temporary file is made and removed in the folder, or in
its nearest existing ancestor when the folder is still to be made.

An output folder that already holds files is refused unless ``--force``; ``--force`` clears
only what hpnsim wrote there, which :class:`OutputFolder` lists in :data:`MANIFEST` after
each run (so a later run never leaves an earlier run's files beside its own, and never
deletes a file it did not write).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hpnsim.errors import InputError

#: the file in an output folder that lists (one relative path a line) what hpnsim wrote there
MANIFEST = ".hpnsim-files"

#: an example file name per flag, for the message when a folder is given instead of a file
_EXAMPLE = {"--csv": "out.csv", "--parquet": "out.parquet", "--trace": "trace.json"}


def _probe(folder: Path, flag: str) -> None:
    """Make and remove a temporary file in ``folder``; refuse ``flag`` if that fails."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hpnsim-probe-", dir=folder)
    except OSError as exc:
        raise InputError(flag, f"folder {folder} is not writable ({exc.strerror}); give "
                               f"another path") from None
    os.close(fd)
    os.unlink(tmp)


def figure_formats() -> tuple[str, ...]:
    """The file extensions matplotlib can write a figure as (``png``, ``svg``, ``pdf``, ...).

    >>> {"png", "svg", "pdf"} <= set(figure_formats()), "docx" in figure_formats()
    (True, False)
    """
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def check_output_file(path, flag: str, formats: tuple[str, ...] | None = None) -> None:
    """Refuse, before any work, an output file that could not be written after the run:
    its folder must exist and be writable, the path must not be a folder, and with
    ``formats`` its extension must be one of them.

    >>> check_output_file("/nonexistent/gantt.png", "--plot")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --plot: folder /nonexistent does not exist; create it or give another path
    >>> check_output_file("gantt.docx", "--plot", ("png", "svg"))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --plot: gantt.docx: cannot write a .docx figure; use one of .png, .svg
    """
    target = Path(path)
    if target.is_dir():
        example = _EXAMPLE.get(flag, "out.png")
        raise InputError(flag, f"{path} is a folder; give a file path, e.g. {target / example}")
    if formats is not None:
        suffix = target.suffix.lower().lstrip(".")
        if suffix not in formats:
            what = f"a .{suffix} figure" if suffix else "a figure without an extension"
            raise InputError(flag, f"{path}: cannot write {what}; use one of "
                                   f"{', '.join('.' + f for f in formats)}")
    folder = target.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(flag, f"folder {folder} {what}; create it or give another path")
    _probe(folder, flag)


def check_figure_file(path, flag: str = "--plot") -> None:
    """:func:`check_output_file` for a figure: its extension must be a format matplotlib writes.

    >>> check_figure_file("x.docx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --plot: x.docx: cannot write a .docx figure; use one of ..., .png, ...
    """
    check_output_file(path, flag, figure_formats())


def check_output_dir(path, flag: str) -> None:
    """Refuse, before any work, an output folder that exists as a file (or lies under one),
    or that could not be made or written.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     check_output_dir(f.name, "--out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --out: ... is a file; give a folder (it is created if missing)
    """
    target = Path(path)
    for folder in (target, *target.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "" if folder == target else f" (in {path})"
                raise InputError(flag, f"{folder} is a file{where}; give a folder "
                                       f"(it is created if missing)")
            _probe(folder, flag)
            return


def _files(folder: Path) -> set[str]:
    """Every file under ``folder`` (relative POSIX paths), the manifest left out."""
    if not folder.is_dir():
        return set()
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if not p.is_dir() and p.name != MANIFEST}


class OutputFolder:
    """An ``--out`` folder: checked when made (see :func:`check_output_dir`; one that
    already holds files is refused unless ``force``), cleared of what hpnsim wrote there
    before by :meth:`begin`, and its new files listed in :data:`MANIFEST` by :meth:`finish`
    (``with folder as path:`` does both, the listing even when the writing fails).

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> first = OutputFolder(root / "r", "--out")
    >>> _ = first.begin(); _ = (root / "r" / "results.json").write_text("{}"); first.finish()
    >>> OutputFolder(root / "r", "--out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --out: ... holds 1 file (results.json); pass --force to replace what hpnsim wrote there, or give another folder
    >>> _ = (root / "r" / "notes.txt").write_text("mine")
    >>> again = OutputFolder(root / "r", "--out", force=True)
    >>> _ = again.begin(); sorted(p.name for p in (root / "r").iterdir())
    ['notes.txt']
    """

    def __init__(self, path, flag: str = "--out", force: bool = False,
                 known: tuple[str, ...] = ()) -> None:
        self.path, self.flag, self.force, self.known = Path(path), flag, force, known
        check_output_dir(self.path, flag)
        present = sorted(_files(self.path))
        if present and not force:
            shown = ", ".join(present[:3]) + (", ..." if len(present) > 3 else "")
            raise InputError(flag, f"{self.path} holds {len(present)} "
                                   f"file{'s' if len(present) != 1 else ''} ({shown}); pass "
                                   f"--force to replace what hpnsim wrote there, or give "
                                   f"another folder")
        self._before: set[str] = set()

    def written_before(self) -> list[Path]:
        """The files an earlier run listed in the manifest, and those of the ``known`` names
        (what the command always writes, for a run that ended before its manifest), those
        still present."""
        manifest = self.path / MANIFEST
        names = list(self.known)
        if manifest.is_file():
            names += manifest.read_text(encoding="utf-8").splitlines()
        root = self.path.resolve()
        out = []
        for line in dict.fromkeys(names):
            candidate = (self.path / line).resolve()
            if line and root in candidate.parents and candidate.is_file():
                out.append(candidate)
        return out

    def begin(self) -> Path:
        """Make the folder; with ``force``, remove what hpnsim wrote there before (only that)."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.force:
            for path in self.written_before():
                path.unlink()
            (self.path / MANIFEST).unlink(missing_ok=True)
        self._before = _files(self.path)
        return self.path

    def __enter__(self) -> Path:
        return self.begin()

    def __exit__(self, *exc) -> bool:
        self.finish()   # also after a failure: what was written is listed, for --force
        return False

    def finish(self) -> None:
        """List in the manifest every file this run added to the folder."""
        from hpnsim.results import write_atomic

        new = sorted(_files(self.path) - self._before)
        write_atomic(self.path / MANIFEST, "".join(f"{name}\n" for name in new))
