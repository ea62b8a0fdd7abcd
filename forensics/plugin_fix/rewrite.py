"""The plugin fix by syntax: rewrite the `except SignalException` handler of any affected release.

The bundled patch (`fix show`) is cut from flytekit master (= 1.16.31). Older releases differ
around the handler (imports, the `ChildFailedError` branch, the test module) and in flytekit's
API: exceptions take `timestamp=` (flytekit/exceptions/base.py) and the entrypoint honours
distributed error aggregation (`_F_DES`, flytekit/bin/entrypoint.py) only since flytekit 1.14.0
(flytekit #2797; docs/upstream.md#the-fix-and-releases). So `fix apply` does not replay fixed
context lines: it finds the handler with libcst (a concrete syntax tree, which keeps every other
byte, comment and blank line as it is), checks it is exactly the known bug, and writes the fix the
release's flytekit can run. On master the result is byte for byte the bundled patch (a test
holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from forensics.plugin_fix.layout import data_text

TASK_CLASS = "PytorchElasticFunctionTask"
HELPER = "_distributed_error_aggregation_enabled"
FIRST_NEW_TEST = "test_sigterm_to_agent_exits_as_the_signal_would"


class RewriteError(Exception):
    """The source is not the code the fix was written for (the reason says where)."""


@dataclass(frozen=True)
class Era:
    """What the release's flytekit offers the fix.

    `timestamp`: flytekit's exceptions take `timestamp=`; with it came the entrypoint's
    per-pod error files (`_F_DES`), so `aggregation` follows it (both flytekit #2797, 1.14.0).
    Read off the plugin itself: from 1.14.0 on its `ChildFailedError` branch passes
    `timestamp=first_failure.timestamp`, so the release already requires that flytekit.
    """

    timestamp: bool

    @property
    def aggregation(self) -> bool:
        return self.timestamp

    def notes(self) -> tuple[str, ...]:
        if self.timestamp:
            return (
                "flytekit >= 1.14 (the plugin passes timestamp=): a multi-node pod with "
                "distributed error aggregation (_F_DES) raises FlyteRecoverableException stamped "
                "with the signal time; any other pod exits 128+signal without an error file",
            )
        return (
            "flytekit < 1.14 (the plugin passes no timestamp=): no distributed error aggregation "
            "and no timestamp= (a TypeError there), so every pod exits 128+signal without an "
            "error file",
        )


# ----------------------------------------------------------------------------- task.py

_HANDLER_NEW = """\
if self.max_nodes > 1 and _distributed_error_aggregation_enabled():
    # Each pod of this PyTorchJob writes its own error file and flytepropeller keeps the earliest, so a
    # sibling's genuine failure still wins: fail recoverably, stamped with the time of the signal.
    raise FlyteRecoverableException(
        f"Elastic launch agent process was terminated by signal {E.sigval.name} (e.g. pod preemption/eviction)",
        timestamp=time.time(),
    ) from E
# Exit as the unhandled signal would (128 + signal number), uploading nothing: the pod fails, which
# flytepropeller counts as a system interruption (a retry from the system budget, and the interruptible
# fallback), and a shared error.pb written by a sibling that failed first is not overwritten.
logger.error(
    f"Exiting with code {128 + E.sigval} and no error file, as the signal would: the attempt fails "
    "as interrupted, and an error file written by another worker is kept"
)
raise SystemExit(128 + E.sigval) from E
"""

# flytekit < 1.14: no per-pod error files (and no `timestamp=`): every pod exits 128+signal.
_HANDLER_OLD = """\
# Exit as the unhandled signal would (128 + signal number), uploading nothing: the pod fails, which
# flytepropeller counts as a system interruption (a retry from the system budget, and the interruptible
# fallback), and the error.pb that all pods of a PyTorchJob share is not overwritten when a sibling
# failed first.
logger.error(
    f"Exiting with code {128 + E.sigval} and no error file, as the signal would: the attempt fails "
    "as interrupted, and an error file written by another worker is kept"
)
raise SystemExit(128 + E.sigval) from E
"""

_HELPER_SRC = '''\
def _distributed_error_aggregation_enabled() -> bool:
    """Whether each pod writes its own error file, as decided in `flytekit.bin.entrypoint._build_error_file_name`.

    The backend sets this variable on the workers of distributed tasks only if it aggregates the error files of
    all pods (flytepropeller's `enable-distributed-error-aggregation`); otherwise all pods share one error file.
    """
    from flytekit.bin.entrypoint import get_one_of

    return bool(get_one_of("FLYTE_INTERNAL_DIST_ERROR_STRATEGY", "_F_DES"))
'''

_DOC_OLD = (
    "            FlyteRecoverableException: If the first exception raised in the local worker group is or\n"
    "                inherits from `FlyteRecoverableException`.\n"
)
_DOC_NEW = (
    "            FlyteRecoverableException: If the first exception raised in the local worker group is or\n"
    "                inherits from `FlyteRecoverableException`, or if the elastic launch agent process of a\n"
    "                multi-node task with distributed error aggregation is terminated by a signal.\n"
    "            SystemExit: With exit code 128 + signal number if the elastic launch agent process is otherwise\n"
    "                terminated by a signal (e.g. SIGTERM on pod preemption/eviction). No error file is written: the\n"
    "                pod fails as interrupted, and the shared error file of a sibling that failed first is kept.\n"
)
_DOC_NEW_OLD_ERA = (
    "            FlyteRecoverableException: If the first exception raised in the local worker group is or\n"
    "                inherits from `FlyteRecoverableException`.\n"
    "            SystemExit: With exit code 128 + signal number if the elastic launch agent process is\n"
    "                terminated by a signal (e.g. SIGTERM on pod preemption/eviction). No error file is written: the\n"
    "                pod fails as interrupted, and the shared error file of a sibling that failed first is kept.\n"
)

_IGNORE_OUTPUTS_RAISE = m.SimpleStatementLine(
    body=[m.Raise(exc=m.Call(func=m.Name("IgnoreOutputs"), args=[]), cause=None)]
)
_EXPRESSION_LINE = m.SimpleStatementLine(body=[m.Expr(value=m.Call())])


def _parse(text: str, what: str) -> cst.Module:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        raise RewriteError(f"{what} does not parse: {e.message} (line {e.raw_line})") from None
    if module.code != text:  # libcst round-trips exactly; never write what we could not read back
        raise RewriteError(f"{what} does not round-trip through the syntax tree")
    return module


def _top_level_class(module: cst.Module, name: str) -> cst.ClassDef | None:
    return next((s for s in module.body if m.matches(s, m.ClassDef(name=m.Name(name)))), None)


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return next((s for s in body if m.matches(s, m.FunctionDef(name=m.Name(name)))), None)


def _signal_handlers(function: cst.FunctionDef) -> list[cst.ExceptHandler]:
    found = m.findall(function, m.ExceptHandler(type=m.Name("SignalException")))
    return [h for h in found if isinstance(h, cst.ExceptHandler)]


def detect_era(module: cst.Module) -> Era:
    """The release's flytekit era, read off the plugin (see `Era`)."""
    return Era(timestamp=bool(m.findall(module, m.Arg(keyword=m.Name("timestamp")))))


def _imported_names(module: cst.Module) -> set[str]:
    names: set[str] = set()
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(
                small.names, cst.ImportStar
            ):
                for alias in small.names:
                    target = alias.asname.name if alias.asname else alias.name
                    if isinstance(target, cst.Name):
                        names.add(target.value)
                    elif isinstance(target, cst.Attribute):
                        names.add(cst.Module([]).code_for_node(target).split(".")[0])
    return names


def _is_import(stmt: cst.CSTNode, module_name: str | None = None) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    if module_name is None:
        return isinstance(small, cst.Import)
    if isinstance(small, cst.Import):
        return any(m.matches(a.name, m.Name(module_name)) for a in small.names)
    if isinstance(small, cst.ImportFrom) and small.module is not None:
        return cst.Module([]).code_for_node(small.module) == module_name
    return False


def _insert_after(
    body: list[cst.BaseStatement], anchor: str | None, lines: list[str], what: str
) -> list[cst.BaseStatement]:
    """`lines` (import statements) right after the top-level import of `anchor` (None: `import`)."""
    at = next((i for i, s in enumerate(body) if _is_import(s, anchor)), None)
    if at is None:
        raise RewriteError(f"{what} has no top-level import of {anchor or 'a module'} to follow")
    new = [cst.parse_statement(line + "\n") for line in lines]
    return body[: at + 1] + new + body[at + 1 :]


class _TaskFix(cst.CSTTransformer):
    def __init__(
        self, handler: cst.ExceptHandler, docstring: cst.SimpleString | None, era: Era, nl: str
    ):
        self.handler = handler
        self.docstring = docstring
        self.era = era
        self.nl = nl  # the file's line ending, also inside its docstrings

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        if original_node is not self.docstring:
            return updated_node
        new_doc = (_DOC_NEW if self.era.aggregation else _DOC_NEW_OLD_ERA).replace("\n", self.nl)
        old_doc = _DOC_OLD.replace("\n", self.nl)
        return updated_node.with_changes(value=updated_node.value.replace(old_doc, new_doc, 1))

    def leave_ExceptHandler(
        self, original_node: cst.ExceptHandler, updated_node: cst.ExceptHandler
    ) -> cst.ExceptHandler:
        if original_node is not self.handler:
            return updated_node
        assert isinstance(original_node.name, cst.AsName)
        var = cst.ensure_type(original_node.name.name, cst.Name).value
        template = _HANDLER_NEW if self.era.aggregation else _HANDLER_OLD
        # The templates name the exception E; the release's handler names it (`e` in all of them).
        source = template.replace("E.sigval", f"{var}.sigval").replace("from E\n", f"from {var}\n")
        # Parsed in the file's own line ending, so that the literals' newlines match it too.
        new = list(cst.parse_module(source.replace("\n", self.nl)).body)
        block = cst.ensure_type(updated_node.body, cst.IndentedBlock)
        return updated_node.with_changes(body=block.with_changes(body=[*block.body[:-1], *new]))


def _docstring_node(function: cst.FunctionDef, nl: str) -> cst.SimpleString | None:
    body = cst.ensure_type(function.body, cst.IndentedBlock).body
    first = body[0] if body else None
    if m.matches(first, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])):
        assert isinstance(first, cst.SimpleStatementLine)
        node = cst.ensure_type(first.body[0], cst.Expr).value
        value = cst.ensure_type(node, cst.SimpleString).value
        if value.count(_DOC_OLD.replace("\n", nl)) == 1:
            return cst.ensure_type(node, cst.SimpleString)
    return None


@dataclass(frozen=True)
class TaskRewrite:
    """The verdict on task.py: `applicable` (with the new text) or `applied` (the fix is there)."""

    state: str
    text: str
    era: Era


def rewrite_task(text: str, is_fixed: bool) -> TaskRewrite:
    """Fix task.py's `except SignalException` handler; RewriteError when it is not the known bug.

    `is_fixed`: the static check (patch.analyze_task_source) already says `fixed`.
    """
    module = _parse(text, "task.py")
    era = detect_era(module)
    if is_fixed:
        return TaskRewrite("applied", text, era)
    cls = _top_level_class(module, TASK_CLASS)
    execute = _method(cls, "_execute") if cls is not None else None
    if execute is None:
        raise RewriteError(f"task.py has no {TASK_CLASS}._execute")
    handlers = _signal_handlers(execute)
    if len(handlers) != 1:
        raise RewriteError(
            f"{TASK_CLASS}._execute has {len(handlers)} `except SignalException` handlers, "
            "the fix was written for exactly one"
        )
    (handler,) = handlers
    body = cst.ensure_type(handler.body, cst.IndentedBlock).body
    if not (
        isinstance(handler.name, cst.AsName)
        and isinstance(handler.name.name, cst.Name)
        and body
        and m.matches(body[-1], _IGNORE_OUTPUTS_RAISE)
        and all(m.matches(s, _EXPRESSION_LINE) for s in body[:-1])
    ):
        raise RewriteError(
            "the `except SignalException` handler is not the known bug "
            "(`except SignalException as e:` logging, then `raise IgnoreOutputs()`)"
        )
    nl = module.default_newline
    fixed = module.visit(_TaskFix(handler, _docstring_node(execute, nl), era, nl))
    stmts = list(fixed.body)
    if era.timestamp and "time" not in _imported_names(module):
        stmts = _insert_after(stmts, "os", ["import time"], "task.py")
    if era.aggregation and not any(
        m.matches(s, m.FunctionDef(name=m.Name(HELPER))) for s in module.body
    ):
        at = next(
            i for i, s in enumerate(stmts) if m.matches(s, m.ClassDef(name=m.Name(TASK_CLASS)))
        )
        helper = cst.parse_statement(_HELPER_SRC.replace("\n", nl))
        assert isinstance(helper, cst.FunctionDef)
        helper = helper.with_changes(leading_lines=stmts[at].leading_lines)  # type: ignore[attr-defined]
        stmts.insert(at, helper)
    return TaskRewrite("applicable", fixed.with_changes(body=stmts).code, era)


# ----------------------------------------------------------------------------- the tests


def _tests_template(era: Era) -> str:
    text = data_text("kfpytorch_signal_tests.txt")
    if era.timestamp:
        return text
    # flytekit < 1.14: no per-pod error files, so every pod exits 128+signal; before 1.13 the
    # entrypoint takes the task itself rather than a loader.
    start = text.index(_AGGREGATION_TEST_START)
    end = text.index(_AGGREGATION_TEST_END, start)
    text = text[:start] + _NO_AGGREGATION_TEST + text[end:]
    for old, new in _OLD_ERA_TEST_EDITS:
        if text.count(old) != 1:
            raise RewriteError(f"the bundled tests changed: {old.strip()[:60]!r} not found once")
        text = text.replace(old, new)
    return text


_AGGREGATION_TEST_START = (
    "def test_sigterm_to_agent_with_error_aggregation_raises_recoverable_exception("
)
_AGGREGATION_TEST_END = '@pytest.mark.parametrize("start_method"'
_NO_AGGREGATION_TEST = '''def test_sigterm_to_agent_of_a_multi_node_task_exits_too(monkeypatch) -> None:
    """Test that a multi-node task exits 128 + 15 too: this flytekit has no distributed error aggregation."""
    monkeypatch.setenv("_F_DES", "Earliest")

    @task(task_config=Elastic(nnodes=2, nproc_per_node=1))
    def test_task():
        pass

    with mock.patch("torch.distributed.launcher.api.elastic_launch", side_effect=_agent_receives_sigterm):
        with pytest.raises(SystemExit) as e:
            test_task()

    assert e.value.code == 128 + signal.SIGTERM
    assert isinstance(e.value.__cause__, SignalException)


'''

_OLD_ERA_TEST_EDITS = (
    (
        '        (2, "Earliest", None, "error-*.pb"),\n',
        "        # flytekit < 1.14 has no distributed error aggregation: _F_DES changes nothing\n"
        '        (2, "Earliest", 128 + signal.SIGTERM, None),\n',
    ),
    (
        "_dispatch_execute(ctx, lambda: test_task, str(inputs), str(output_prefix))",
        "_dispatch_execute(ctx, load_task, str(inputs), str(output_prefix))",
    ),
    (
        '    output_prefix = tmp_path / "outputs"\n',
        '    output_prefix = tmp_path / "outputs"\n'
        "    # flytekit 1.13 passes the entrypoint a loader of the task, older releases the task itself\n"
        '    takes_loader = "load_task" in inspect.signature(_dispatch_execute).parameters\n'
        "    load_task = (lambda: test_task) if takes_loader else test_task\n",
    ),
    (
        "    from flyteidl.core import errors_pb2\n",
        "    import inspect\n\n    from flyteidl.core import errors_pb2\n",
    ),
)

_TEST_IMPORTS = (
    ("os", ["import signal", "import time"], ("signal", "time")),
    (
        "flytekit.exceptions.user",
        [
            "from flytekit.extend import IgnoreOutputs",
            "from torch.distributed.elastic.multiprocessing.api import SignalException",
        ],
        ("IgnoreOutputs", "SignalException"),
    ),
)


def rewrite_tests(text: str, era: Era) -> tuple[str, str]:
    """(`applicable`|`applied`, text): the plugin's test module with the signal tests added."""
    module = _parse(text, "tests/test_elastic_task.py")
    defined = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    if FIRST_NEW_TEST in defined:
        return "applied", text
    imported = _imported_names(module)
    stmts = list(module.body)
    for anchor, lines, names in _TEST_IMPORTS:
        wanted = [line for line, name in zip(lines, names, strict=True) if name not in imported]
        if wanted:
            stmts = _insert_after(stmts, anchor, wanted, "tests/test_elastic_task.py")
    code = module.with_changes(body=stmts).code
    if not code.endswith("\n"):
        raise RewriteError("tests/test_elastic_task.py does not end with a newline")
    # The module's own line ending (a CRLF checkout stays CRLF; libcst renders the imports so).
    return "applicable", code + _tests_template(era).replace("\n", module.default_newline)
