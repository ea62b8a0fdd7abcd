"""What relaunch compares between task versions (`TaskFacts`), read from templates flytekit and
flytekitplugins-kfpytorch themselves serialize: kfpytorch's `Elastic` and `PyTorch` tasks mount
shared memory, so flytekit 1.16 writes them with a pod template (`k8s_pod`) and no `container`;
their image is the primary container's."""

from __future__ import annotations

from collections import OrderedDict

from flytekit import Resources, task
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfpytorch import Elastic, PyTorch, Worker

from forensics.sources.admin_records import task_facts_of

IMAGE = "ghcr.io/example/train:abc123"
SETTINGS = SerializationSettings(
    image_config=ImageConfig(
        default_image=Image(name="default", fqn="ghcr.io/example/train", tag="abc123")
    ),
    project="gs1",
    domain="production",
    version="v1",
)


def template(fn):
    return get_serializable(OrderedDict(), SETTINGS, fn).template.to_flyte_idl()


@task(task_config=Elastic(nnodes=2, nproc_per_node=8), requests=Resources(cpu="32", gpu="8"))
def elastic_task() -> None: ...


@task(task_config=PyTorch(worker=Worker(replicas=2)))
def pytorch_job() -> None: ...


@task
def plain() -> None: ...


def test_an_elastic_task_serialized_as_a_pod_template_names_its_image():
    tpl = template(elastic_task)
    assert tpl.HasField("k8s_pod") and not tpl.HasField("container")  # the shape upstream writes
    assert task_facts_of(tpl).image == IMAGE


def test_a_pytorch_job_and_a_plain_task_name_their_image():
    assert task_facts_of(template(pytorch_job)).image == IMAGE
    assert task_facts_of(template(plain)).image == IMAGE
