"""How often a background loop runs: at its base interval while it finds work, slower when not.

A pass that finds nothing doubles the wait before the next one, up to a cap; a pass that
finds something, or a wake-up (new work announced), returns to the base interval. Pure: the
loop owns the clock and the sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IdlePacing:
    #: The interval while there is work.
    base: float
    #: The longest interval while there is none (never below ``base``).
    cap: float
    current: float = field(init=False)

    def __post_init__(self) -> None:
        if self.base <= 0:
            raise ValueError("the base interval must be positive")
        self.cap = max(self.cap, self.base)
        self.current = self.base

    def after(self, found: bool) -> float:
        """The wait before the next pass, after a pass that found work (or not)."""
        self.current = self.base if found else min(self.cap, self.current * 2)
        return self.current

    def wake(self) -> None:
        """New work may be waiting: the next waits start from the base interval again."""
        self.current = self.base

    @property
    def backed_off(self) -> bool:
        return self.current > self.base


__all__ = ["IdlePacing"]
