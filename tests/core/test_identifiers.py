"""Execution identifiers in every form an operator pastes; anything else is refused clearly."""

import pytest

from forensics.errors import UsageError
from forensics.identifiers import parse_execution
from forensics.model import ExecutionRef

REF = ExecutionRef("gs1", "production", "azvg5f9v9974m78fvlf7")


@pytest.mark.parametrize(
    "text",
    [
        "gs1:production:azvg5f9v9974m78fvlf7",
        "ex:gs1:production:azvg5f9v9974m78fvlf7",
        "https://flyte.example.com/console/projects/gs1/domains/production/executions/azvg5f9v9974m78fvlf7",
        "https://flyte.example.com/console/projects/gs1/domains/production/executions/azvg5f9v9974m78fvlf7?duration=all",
        "  gs1:production:azvg5f9v9974m78fvlf7 ",
    ],
)
def test_accepted_forms(text):
    assert parse_execution(text) == REF


def test_bare_name_with_project_and_domain():
    assert parse_execution("azvg5f9v9974m78fvlf7", project="gs1", domain="production") == REF


@pytest.mark.parametrize(
    "text",
    [
        "azvg5f9v9974m78fvlf7",
        "gs1:production",
        "gs1:production:Azvg",
        "gs1:production:a" + "b" * 63,
        'gs1:prod"}|= "x:abc',
        "https://flyte.example.com/console/executions/abc",
        "a:b:c:d:e",
    ],
)
def test_unknown_forms_are_refused_with_the_accepted_forms(text):
    with pytest.raises(UsageError):
        parse_execution(text)
