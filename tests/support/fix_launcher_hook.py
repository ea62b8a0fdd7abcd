"""Installed as `sitecustomize` in `pyflyte-execute` runs: the elastic agent receives SIGTERM.

Replaces `torch.distributed.launcher.api.elastic_launch` (the plugin imports it at call time)
with a launcher whose agent raises a real torch `SignalException(SIGTERM)`, as on preemption,
so flytekit's real entrypoint process shows its exit code and uploads for each case.
"""

import os
import signal

import torch.distributed.launcher.api as launcher_api
from torch.distributed.elastic.multiprocessing.api import SignalException


def elastic_launch(config: object, entrypoint: object) -> object:
    def launch(*args: object) -> None:
        sigterm = signal.SIGTERM
        raise SignalException(f"Process {os.getpid()} got signal: {int(sigterm)}", sigval=sigterm)

    return launch


launcher_api.elastic_launch = elastic_launch
