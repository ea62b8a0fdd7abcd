"""elastic-audit probe: what does the installed kfpytorch plugin make of an elastic agent's death signal?

Runs inside the interpreter being checked (`python -c <this file> RESULT.json`), which need not
have elastic-audit installed: standard library plus that interpreter's own packages only, and
syntax that old Pythons accept. `torch.distributed.launcher.api.elastic_launch` is replaced by a
launcher whose agent raises a real torch `SignalException(SIGTERM)`, exactly what torch raises when
a pod is preempted; the plugin's task is then executed the way flytekit's entrypoint executes it.
No cluster, no GPU, no worker processes. The verdict is written as JSON to RESULT.json.
"""

import json
import logging
import os
import platform
import signal
import sys
import traceback
from importlib.metadata import PackageNotFoundError, version

SILENT = ("ignore-outputs", "returned", "clean-exit")
AGGREGATION_VARS = ("FLYTE_INTERNAL_DIST_ERROR_STRATEGY", "_F_DES")

# (name, nnodes, distributed error aggregation strategy or None)
SCENARIOS = (
    ("single-node", 1, None),
    ("multi-node, shared error file", 2, None),
    ("multi-node, error aggregation", 2, "Earliest"),
)


def _version(dist):
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _probe_task():
    """Never runs: the launcher is replaced before any worker would start."""


def _classify(error, sigterm_exc):
    """(outcome, detail) of what `execute` raised (None: it returned) after the death signal."""
    from flytekit.core.base_task import IgnoreOutputs
    from flytekit.exceptions.user import FlyteRecoverableException

    if error is None:
        return "returned", "execute() returned normally: the attempt would succeed"
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, IgnoreOutputs):
        return "ignore-outputs", "raised IgnoreOutputs: exit 0, no outputs.pb, no error.pb"
    if isinstance(error, SystemExit):
        code = error.code
        if code in (0, None):
            return "clean-exit", f"SystemExit({code!r}): exit 0 without outputs"
        return f"exit-{code}", f"SystemExit({code!r}): the pod fails, no error file"
    cause = " (caused by the SignalException)" if error.__cause__ is sigterm_exc else ""
    if isinstance(error, FlyteRecoverableException):
        return "recoverable-error", text + cause
    return "error", text + cause


def _run_scenario(nnodes, strategy):
    from unittest import mock

    from flytekitplugins.kfpytorch.task import Elastic, PytorchElasticFunctionTask
    from torch.distributed.elastic.multiprocessing.api import SignalException

    for var in AGGREGATION_VARS:
        os.environ.pop(var, None)
    if strategy:
        os.environ["_F_DES"] = strategy
    raised = []

    def elastic_launch(config, entrypoint):
        def launch(*args):
            exc = SignalException(
                f"Process {os.getpid()} got signal: {int(signal.SIGTERM)}", sigval=signal.SIGTERM
            )
            raised.append(exc)
            raise exc

        return launch

    task = PytorchElasticFunctionTask(
        task_config=Elastic(nnodes=nnodes, nproc_per_node=1, start_method="fork"),
        task_function=_probe_task,
    )
    error = None
    with mock.patch("torch.distributed.launcher.api.elastic_launch", side_effect=elastic_launch):
        try:
            task.execute()
        except BaseException as e:  # SystemExit is a verdict here, not a reason to stop
            error = e
    if not raised:
        return "not-reached", f"the plugin never called elastic_launch ({error!r})"
    return _classify(error, raised[0])


def probe():
    result = {
        "status": "unknown",
        "reason": "",
        "python": sys.executable,
        "python_version": platform.python_version(),
        "plugin_version": _version("flytekitplugins-kfpytorch"),
        "flytekit_version": _version("flytekit"),
        "torch_version": _version("torch"),
        "plugin_file": None,
        "scenarios": [],
    }
    try:
        import flytekitplugins.kfpytorch.task as plugin
    except ImportError as e:
        result["status"] = "not-installed"
        result["reason"] = f"flytekitplugins-kfpytorch cannot be imported here ({e})"
        return result
    result["plugin_file"] = os.path.abspath(plugin.__file__)
    try:
        import torch.distributed.elastic.multiprocessing.api
        import torch.distributed.launcher.api  # noqa: F401
    except ImportError as e:
        result["reason"] = f"torch elastic cannot be imported ({e}): install the [elastic] extra"
        return result
    logging.getLogger("flytekit").setLevel(logging.CRITICAL + 1)
    saved = dict(os.environ)
    try:
        for name, nnodes, strategy in SCENARIOS:
            try:
                outcome, detail = _run_scenario(nnodes, strategy)
            except Exception as e:
                outcome, detail = "not-reached", f"{type(e).__name__}: {e}"
            result["scenarios"].append({"name": name, "outcome": outcome, "detail": detail})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    scenarios = result["scenarios"]
    silent = [s for s in scenarios if s["outcome"] in SILENT]
    unreached = [s for s in scenarios if s["outcome"] == "not-reached"]
    if silent:
        result["status"] = "vulnerable"
        result["reason"] = (
            "a SIGTERM to the elastic agent ends the attempt cleanly without outputs "
            f"({_outcomes(silent)})"
        )
    elif unreached:
        result["reason"] = f"the probe could not drive the plugin ({unreached[0]['detail']})"
    else:
        result["status"] = "fixed"
        result["reason"] = (
            f"a SIGTERM to the elastic agent fails the attempt ({_outcomes(scenarios)})"
        )
    return result


def _outcomes(scenarios):
    return "; ".join(f"{s['name']}: {s['outcome']}" for s in scenarios)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        result = probe()
    except Exception:
        result = {"status": "unknown", "reason": "probe crashed: " + traceback.format_exc(limit=3)}
    text = json.dumps(result)
    if out:
        with open(out, "w") as fh:
            fh.write(text)
    else:
        print(text)


main()
