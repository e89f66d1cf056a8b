"""The processes of ``deploy/Procfile``: the one list that production, ``kickoff up`` and the docs share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from config.errors import ConfigurationError

#: The source checkout's Procfile (``kickoff up`` runs from a checkout: ``pip install -e .``).
PROCFILE = Path(__file__).resolve().parent.parent / "deploy" / "Procfile"


@dataclass(frozen=True)
class ProcfileEntry:
    """One ``name: command`` line; ``command`` is a shell command line (honcho and foreman run it with sh)."""

    name: str
    command: str


def read_procfile(path: Path = PROCFILE) -> list[ProcfileEntry]:
    """Every process of the Procfile at ``path``, in its order (comments and blank lines skipped)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read {path}: {exc.strerror} (kickoff up runs from a source checkout)"
        ) from exc
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip() or not command.strip():
            raise ConfigurationError(f"{path}:{number}: not a 'name: command' line")
        entries.append(ProcfileEntry(name=name.strip(), command=command.strip()))
    return entries


def select_entries(
    entries: list[ProcfileEntry], *, only: list[str] | None = None, exclude: tuple[str, ...] = ()
) -> list[ProcfileEntry]:
    """The entries named by ``only`` (an exact name or a unique prefix, e.g. ``listener`` for
    ``listener-worker``; all when None), minus ``exclude``. Raises ValueError naming an unknown one."""
    names = [e.name for e in entries]
    chosen = set(names)
    if only is not None:
        chosen = set()
        for word in only:
            if word in names:
                chosen.add(word)
                continue
            matches = [n for n in names if n.startswith(word)]
            if len(matches) != 1:
                known = ", ".join(names)
                raise ValueError(
                    f"{word!r} is {'ambiguous' if matches else 'not a process'} (processes: {known})"
                )
            chosen.add(matches[0])
    return [e for e in entries if e.name in chosen and e.name not in exclude]
