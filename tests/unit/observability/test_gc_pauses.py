"""The serving process's garbage collector settings (backend/observability/gc_pauses.py).

Each test runs in a fresh interpreter: the settings are process-wide and applied once."""

from __future__ import annotations

import json
import subprocess
import sys

_SCRIPT = """
import gc, json
from backend.observability import gc_pauses, metrics

default = gc.get_threshold()
before = gc_pauses.configured()
first = gc_pauses.configure()
frozen = gc.get_freeze_count()
gc.set_threshold(*default)  # a second call must not apply anything again
second = gc_pauses.configure()
unchanged = gc.get_threshold() == tuple(default)
hooks = sum(1 for hook in gc.callbacks if hook is gc_pauses._timed)
gc.set_threshold(*gc_pauses.GC_THRESHOLDS)
class Cycle:
    pass
for _ in range(3):
    a, b = Cycle(), Cycle()
    a.other, b.other = b, a
gc.collect(0)
gc.collect(2)
text = metrics.exposition().decode()
count = lambda g: float(
    text.split('railyard_gc_pause_seconds_count{generation="%d"} ' % g)[1].split()[0]
)
print(json.dumps({
    "default": default, "before": before, "first": first, "second": second,
    "frozen": frozen, "after_second": unchanged, "hooks": hooks,
    "gen0": count(0), "gen2": count(2),
}))
"""


def test_configure_freezes_startup_objects_once_and_times_collections() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["before"] is False
    assert result["first"] is True and result["second"] is False
    assert result["frozen"] > 1000  # the modules' objects are in the permanent generation
    assert result["after_second"] is True  # the second call changed nothing
    assert result["hooks"] == 1
    assert result["gen0"] >= 1 and result["gen2"] >= 1  # every collection is timed
