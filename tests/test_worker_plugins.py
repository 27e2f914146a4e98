"""A joblib worker keeps Hydra's plugin registry between jobs (experiments.worker_plugins)."""

from __future__ import annotations

from typing import Any

import pytest
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton
from hydra_plugins.hydra_joblib_launcher import _core

from experiments import worker_plugins


def _sent(state: dict[str, Any]) -> dict[str, Any]:
    """The singletons as a job receives them (unpickled: its own dicts, no registry)."""
    return {**state, "instances": {k: v for k, v in state["instances"].items()
                                   if k is not Plugins}}


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A process without a plugin registry, as a new worker; the launcher's own job start
    replaced by one that restores the singletons as it does and returns the registry."""
    saved = dict(Singleton._instances)
    state = Singleton.get_state()  # (without the registry, as the launcher sends it)
    Singleton._instances = {k: v for k, v in saved.items() if k is not Plugins}

    def launchers_execute_job(idx, overrides, hydra_context, config, task_function,
                              singleton_state):
        Singleton.set_state(singleton_state)
        return Plugins.instance()

    monkeypatch.setattr(_core, "execute_job", launchers_execute_job)
    monkeypatch.setattr(worker_plugins, "_LAUNCHERS_EXECUTE_JOB", None)
    yield state
    Singleton._instances = saved


def test_a_worker_scans_the_plugins_once(fresh_worker: dict[str, Any]) -> None:
    first, second, third = (worker_plugins.execute_job(i, [], None, None, None,
                                                       _sent(fresh_worker)) for i in range(3))
    assert first is second is third
    # the launcher's own start builds a registry for every job
    assert _core.execute_job(3, [], None, None, None, _sent(fresh_worker)) is not third


def test_the_launcher_starts_jobs_through_it_also_in_its_own_process(
        fresh_worker: dict[str, Any]) -> None:
    launchers = _core.execute_job
    worker_plugins.keep_plugins_in_workers()
    worker_plugins.keep_plugins_in_workers()  # (a second sweep in the same process)
    assert _core.execute_job is worker_plugins.execute_job
    assert worker_plugins._LAUNCHERS_EXECUTE_JOB is launchers
    # a sequential launch calls it in the sweep's process: the launcher's own start runs
    first = _core.execute_job(0, [], None, None, None, _sent(fresh_worker))
    assert _core.execute_job(1, [], None, None, None, _sent(fresh_worker)) is first
