"""The runner's seams (run/seams.py): the real world unless a test hands in fakes."""

from __future__ import annotations

from pywebbench import bringup
from pywebbench.faults import measure_robustness
from pywebbench.meter.core_speed import CoreSpeedProbe
from pywebbench.meter.flame import sampled_window
from pywebbench.meter.interference import InterferenceWindow
from pywebbench.meter.sampler import Sampler, snapshot, trees_cpu_s
from pywebbench.run.executor import LocalExecutor
from pywebbench.run.seams import Seams
from pywebbench.run.syscalls import traced_window


def test_the_default_seams_are_the_real_bring_up_and_meters() -> None:
    seams = LocalExecutor().seams  # what `pywebbench run` measures with
    assert seams == Seams()
    up = seams.bringup
    assert (up.provision, up.services, up.start, up.check, up.stop) == (
        bringup.provision,
        bringup.Services,
        bringup.start,
        bringup.check,
        bringup.stop,
    )
    assert seams.sampler is Sampler and seams.core_speed_probe is CoreSpeedProbe
    assert seams.tree_snapshot is snapshot and seams.trees_cpu_s is trees_cpu_s
    assert seams.syscalls_tracer is traced_window and seams.stack_sampler is sampled_window
    assert seams.fault_clients is measure_robustness
    assert seams.interference_window is InterferenceWindow
