"""When to re-send a streaming record to the front end.

Every display update re-sends the whole bundle, so updating on each text delta
makes the bytes sent grow with the square of the answer. This policy keeps them
linear: while text streams, an update is sent only when the record has grown by
a fixed factor since the last one sent (a geometric series sums to at most
`factor / (factor - 1)` times the final size), never more often than
`min_interval` seconds, and the streaming bundles carry only the JSON record and
a short text/plain line; the full fallbacks are rendered once at rest.
A slow stream (a real model at 50 tokens a second) would then look frozen, so
an update is also allowed once `size / byte_rate` seconds have passed: that
spends at most `byte_rate` bytes a second, which stays linear in the answer for
any fixed streaming speed.
Structural changes (a tool starts or ends, the state changes) are few per turn
and always shown at once. The factor is 4, not 2: the final bundle alone is
about 4x the answer (the record plus three fallbacks), so the streaming updates
get about 1x (measured by tests/benchmarks/bench_display.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GrowthThrottle:
    factor: float = 4.0
    min_interval: float = 0.1
    min_growth: int = 2048
    byte_rate: float = 16_384.0
    _last_size: int = 0
    _last_time: float = float("-inf")

    def should_send(self, size: int, now: float, *, structural: bool = False) -> bool:
        """Decide for a record of `size` bytes at monotonic time `now`."""
        if structural:
            return True
        elapsed = now - self._last_time
        grown = size - self._last_size
        if elapsed < self.min_interval or grown <= 0:
            return False
        if grown >= self.min_growth and size >= self._last_size * self.factor:
            return True
        return elapsed >= size / self.byte_rate

    @property
    def last_size(self) -> int:
        """Size of the last record sent (0 before the first)."""
        return self._last_size

    def sent(self, size: int, now: float) -> None:
        self._last_size = size
        self._last_time = now
