"""botocore's S3 response parser with a shorter path for flat structures (a listing's objects).

A ListObjectsV2 page holds up to 1,000 `<Contents>`, and botocore reads each through its generic
structure handler: a regular expression per element to drop the XML namespace, then a walk of
every member the model declares. That walk was most of a page's CPU in the scan's outputs.pb
walk (docs/performance.md). This parser reads a structure whose members are scalars, or flat
lists of scalars, in one pass over the element's children, through botocore's own scalar
handlers (the same text, integer and timestamp rules); any other structure, and any element the
short path does not expect (a nested structure such as `<Owner>`, a repeated scalar), goes
through botocore's own code. Set on the client's botocore session the way the AWS CLI sets its
timestamp parser: `parsers()`.

Before any S3 answer is parsed, botocore parses its body once more to see whether a 200 holds
an `<Error>` or was cut short (`handlers._handle_200_error`, either turns it into a 500 that is
retried): a second parse of every listing page. `check_200_errors` answers the same two
questions for a ListObjectsV2 page from its first and last bytes, and leaves every other
operation to botocore.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from botocore import handlers
from botocore.parsers import ResponseParserFactory, RestXMLParser
from botocore.session import Session
from botocore.utils import is_json_value_header

_SCALARS = frozenset(
    {"string", "character", "integer", "long", "float", "double", "boolean", "timestamp", "blob"}
)

# A string member read as botocore's string handler reads it (the element's text, "" when
# empty), without its four calls: a listing page's thousand keys, ETags and storage classes.
_TEXT = object()
_BOTOCORE_STRING = RestXMLParser._handle_string

# Per structure shape name (one service model per session): the short path's plan, or None.
# A member's reader is botocore's scalar handler, `_TEXT`, or None (not flat: botocore's path).
Plan = dict[str, tuple[str, Any, Callable[..., Any] | object | None, bool]] | None


class FlatStructureParser(RestXMLParser):
    """`RestXMLParser` reading flat structures (all members scalars or flat scalar lists) in one
    pass; the result equals botocore's own (tests/unit/sources/test_s3_parsing.py)."""

    _plans: ClassVar[dict[str, Plan]] = {}

    def _handle_structure(self, shape: Any, node: Any) -> Any:
        plan = self._plan(shape)
        if plan is None or isinstance(node, list):
            return super()._handle_structure(shape, node)
        parsed: dict[str, Any] = {}
        for child in node:
            member = plan.get(child.tag) or _namespaced(plan, child.tag)
            if member is None:
                continue  # botocore reads declared members only
            name, member_shape, handle, flat = member
            if handle is None or (not flat and name in parsed):
                return super()._handle_structure(shape, node)
            if handle is _TEXT:
                value: Any = child.text or ""  # botocore's string handler, without its 4 calls
            else:
                value = handle(self, member_shape, child)
            if flat:
                parsed.setdefault(name, []).append(value)
            else:
                parsed[name] = value
        return parsed

    def _plan(self, shape: Any) -> Plan:
        """XML name -> (member, its shape, its handler or None: not flat, flattened list)."""
        try:
            return self._plans[shape.name]
        except KeyError:
            pass
        plan: Plan = {}
        if shape.metadata.get("exception") or shape.is_tagged_union:
            plan = None
        else:
            for name, member in shape.members.items():
                ser = member.serialization
                if ser.get("location") or ser.get("eventheader") or ser.get("xmlAttribute"):
                    plan = None  # botocore reads these elsewhere, or from attributes
                    break
                flat = member.type_name == "list" and bool(ser.get("flattened"))
                scalar = member.member if flat else member
                key = self._member_key_name(member, name)
                handle = None
                if scalar.type_name in _SCALARS and (flat or member.type_name != "list"):
                    handle = getattr(type(self), f"_handle_{scalar.type_name}")
                    if handle is _BOTOCORE_STRING and not is_json_value_header(scalar):
                        handle = _TEXT
                plan[key] = (name, scalar, handle, flat)
        self._plans[shape.name] = plan
        return plan


def _namespaced(plan: dict[str, Any], tag: str) -> Any:
    """The member an element names with its XML namespace (`{ns}Key`), kept in `plan` under
    that tag for the next element (botocore drops the namespace the same way)."""
    if tag[:1] != "{":
        return None
    member = plan.get(tag.rpartition("}")[2])
    if member is not None:
        plan[tag] = member
    return member


class _Factory(ResponseParserFactory):
    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "rest-xml":
            return FlatStructureParser(**self._defaults)
        return super().create_parser(protocol_name)


def parsers(timestamp_parser: Callable[[Any], Any]) -> ResponseParserFactory:
    """The response parser factory to register on an S3 client's botocore session."""
    factory = _Factory()
    factory.set_parser_defaults(timestamp_parser=timestamp_parser)
    return factory


# An S3 error document's root, after an optional XML declaration (S3 sends nothing else first).
_ERROR_ROOT = re.compile(rb"\s*(?:<\?xml[^>]*\?>\s*)?<Error[\s>/]")
_LISTING_END = b"</ListBucketResult>"
_BOTOCORE_200_CHECK = getattr(handlers, "_handle_200_error", None)


def listing_is_broken(body: bytes) -> bool:
    """Whether a ListObjectsV2 answer's body is an error document or a page cut short: what
    botocore's full parse finds in it (`handlers._looks_like_special_case_error`), since a
    complete page is one `<ListBucketResult>` element, ending the body."""
    return bool(_ERROR_ROOT.match(body)) or not body.rstrip().endswith(_LISTING_END)


def _check_200_error(operation_model: Any, response_dict: Any, **kwargs: Any) -> None:
    if operation_model.name != "ListObjectsV2" or not response_dict:
        assert _BOTOCORE_200_CHECK is not None  # registered only in its place
        _BOTOCORE_200_CHECK(operation_model, response_dict, **kwargs)
        return
    if response_dict["status_code"] == 200 and response_dict["body"]:
        if listing_is_broken(response_dict["body"]):
            response_dict["status_code"] = 500  # botocore's own answer: retried as a 500


def check_200_errors(session: Session) -> None:
    """Put `_check_200_error` in the place of botocore's check on `session` (left alone when
    this botocore has no such handler)."""
    if _BOTOCORE_200_CHECK is None:
        return
    session.unregister("before-parse.s3.*", _BOTOCORE_200_CHECK)
    session.get_component("event_emitter").register_first("before-parse.s3.*", _check_200_error)
