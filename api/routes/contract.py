"""GET /asyncapi.yaml and GET /asyncapi.json: the queues' AsyncAPI contract (no key; one document)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter
from fastapi.responses import Response

from api.auth import Need, requires
from publisher.contract import contract_json, contract_text

router = APIRouter(tags=["contract"])

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def _document_route(path: str, *, media_type: str, description: str) -> Callable[[Endpoint], Endpoint]:
    """``GET path``: the contract as ``media_type``, for anyone (no key); ``description`` is its 200's."""
    return router.get(
        path,
        dependencies=[requires(Need.PUBLIC)],
        response_class=Response,
        responses={
            200: {"description": description, "content": {media_type: {"schema": {"type": "object"}}}}
        },
    )


@_document_route(
    "/asyncapi.yaml",
    media_type="application/yaml",
    description="The AsyncAPI 3.0 document of the RabbitMQ queues (docs/asyncapi.yaml).",
)
def asyncapi_yaml() -> Response:
    """The AsyncAPI 3.0 contract of the queues kickoff publishes to, as written (YAML)."""
    return Response(contract_text(), media_type="application/yaml")


@_document_route(
    "/asyncapi.json",
    media_type="application/json",
    description="The same AsyncAPI document as /asyncapi.yaml, as JSON.",
)
def asyncapi_json() -> Response:
    """The same contract as JSON."""
    return Response(contract_json(), media_type="application/json")
