"""Hydra's basic sweeper, composing only each batch's first job up front
(``hydra/sweeper=check_first``).

Before it launches a batch, the basic sweeper composes the configuration of every job in it,
one after another, to catch composition errors early: ~0.1 s a job in the sweep's own
process while the launcher's workers wait (~20 s for the regime map's 180 jobs). Every job
composes its configuration again where it runs, so checking the first job catches the
errors all jobs share (an unknown key or option); a value only one job has that does not
compose fails that job, and the sweep with it, when it runs. ``python -m experiments.paper``
uses it for its studies (whose configurations the tests compose); ``python -m
experiments.run -m`` keeps the basic sweeper unless told otherwise. Its jobs compose through
:class:`experiments.compose_memo.MemoConfigLoader` (each shape of job once per process).
"""

# (no ``from __future__ import annotations``: Hydra's plugin scan runs this module without
# registering it in sys.modules, where dataclasses would look string annotations up)
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

# the module, not the class: Hydra's plugin scan would list a class imported here
from hydra._internal.core_plugins import basic_sweeper
from hydra.core.config_store import ConfigStore


@dataclass
class CheckFirstSweeperConf:
    _target_: str = "hydra_plugins.smartvector_sweeper.check_first.CheckFirstSweeper"
    max_batch_size: Optional[int] = None  # noqa: UP045 - OmegaConf's structured configs
    params: Optional[dict[str, str]] = None  # noqa: UP045


ConfigStore.instance().store(group="hydra/sweeper", name="check_first",
                             node=CheckFirstSweeperConf, provider="smartvector-bench")


class CheckFirstSweeper(basic_sweeper.BasicSweeper):
    """Hydra's ``BasicSweeper`` that composes only the first job of a batch before launching
    it."""

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        from experiments.compose_memo import memo_context
        from experiments.worker_plugins import keep_plugins_in_workers

        keep_plugins_in_workers()  # a joblib worker scans Hydra's plugins once, not per job
        super().setup(hydra_context=memo_context(hydra_context), task_function=task_function,
                      config=config)  # each job shape composed once per process

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        super().validate_batch_is_legal(batch[:1])
