"""A bench figure: a measured value next to its target, as a ratio (or why it was not measured)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NAME_WIDTH = 62


@dataclass
class Figure:
    name: str
    measured: float
    unit: str
    target: float
    at_most: bool  # the target is an upper bound (else a lower bound)

    @property
    def ratio(self) -> float:
        return self.measured / self.target if self.target else float("inf")

    @property
    def met(self) -> bool:
        return self.measured <= self.target if self.at_most else self.measured >= self.target

    def line(self) -> str:
        bound = "<=" if self.at_most else ">="
        verdict = "met" if self.met else "NOT met"
        return (
            f"{self.name:<{NAME_WIDTH}} {self.measured:>14,.3f} {self.unit:<10} target {bound} "
            f"{self.target:>12,.3f}  ratio {self.ratio:>8.3f}  {verdict}"
        )


@dataclass
class Unmeasured:
    """A figure the bench could not measure in this installation, and why (printed in its place)."""

    name: str
    reason: str

    def line(self) -> str:
        return f"{self.name:<{NAME_WIDTH}} not measured: {self.reason}"


def print_figures(figures: Iterable[Figure | Unmeasured], *, blank_line: bool = True) -> None:
    """Each figure on its line, after a blank line that ends the bench's own progress output."""
    if blank_line:
        print()
    for figure in figures:
        print(figure.line())
