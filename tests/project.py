"""kickoff's own code as the static checks walk it: its top-level packages and their modules."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The top-level packages of the product (a folder with an ``__init__.py``; not the tests nor the benchmarks).
PACKAGES: tuple[str, ...] = tuple(
    sorted(
        p.name
        for p in ROOT.iterdir()
        if (p / "__init__.py").exists() and p.name not in {"tests", "bench", "harness"}
    )
)


def product_modules() -> list[Path]:
    """Every module of the product's packages, sorted."""
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
