"""Hydra's plugin registry kept in a joblib worker from one job to the next.

Before each job, Hydra's joblib launcher restores the sweep's singletons in the worker
(``Singleton.set_state``) without the plugin registry, which cannot be pickled, and so
builds the registry again: it rescans every ``hydra_plugins`` package, ~25 ms of Python a job
(~2.6% of the sweeps' CPU in a py-spy profile). :func:`keep_plugins_in_workers` makes the
launcher run :func:`execute_job` instead of its own, which hands the registry the worker
already built (the same installed plugins) to that restore; the job then runs as before.
Only under hydra-joblib-launcher 1.2 (whose ``execute_job`` this wraps); a no-op otherwise.
"""

from __future__ import annotations

from typing import Any

#: the launcher's own ``execute_job``, once :func:`keep_plugins_in_workers` replaced it
_LAUNCHERS_EXECUTE_JOB: Any = None


def execute_job(idx: int, overrides: Any, hydra_context: Any, config: Any,
                task_function: Any, singleton_state: dict[str, Any]) -> Any:
    """The launcher's ``execute_job``, with this process's plugin registry (if it has one)
    among the singletons it restores."""
    from hydra.core.plugins import Plugins
    from hydra.core.singleton import Singleton
    from hydra_plugins.hydra_joblib_launcher import _core

    plugins = Singleton._instances.get(Plugins)
    if plugins is not None:
        singleton_state = {**singleton_state,
                           "instances": {**singleton_state["instances"], Plugins: plugins}}
    # in a worker the launcher's module is as installed; in the sweep's own process (a
    # sequential launch) it holds this function, and the original was kept when replaced
    run = _LAUNCHERS_EXECUTE_JOB if _core.execute_job is execute_job else _core.execute_job
    return run(idx, overrides, hydra_context, config, task_function, singleton_state)


def keep_plugins_in_workers() -> None:
    """Make Hydra's joblib launcher start each job through :func:`execute_job`."""
    global _LAUNCHERS_EXECUTE_JOB
    try:
        from importlib.metadata import version

        from hydra_plugins.hydra_joblib_launcher import _core
    except ImportError:
        return
    if not version("hydra-joblib-launcher").startswith("1.2.") or \
            _core.execute_job is execute_job:
        return
    _LAUNCHERS_EXECUTE_JOB = _core.execute_job
    _core.execute_job = execute_job
