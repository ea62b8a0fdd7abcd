"""An Elastic task for `pyflyte-execute` runs; $ELASTIC_AUDIT_NNODES sets its node count."""

import os

from flytekit import task
from flytekitplugins.kfpytorch.task import Elastic


@task(task_config=Elastic(nnodes=int(os.environ["ELASTIC_AUDIT_NNODES"]), nproc_per_node=1))
def train() -> None:
    """Never runs: the launcher is replaced, and its agent is terminated at once."""
