"""GET /asyncapi.yaml and GET /asyncapi.json: the queues' AsyncAPI contract (no key; one document)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from api.auth import Need, requires
from publisher.contract import contract_json, contract_text

router = APIRouter(tags=["contract"])


@router.get(
    "/asyncapi.yaml",
    dependencies=[requires(Need.PUBLIC)],
    response_class=Response,
    responses={
        200: {
            "description": "The AsyncAPI 3.0 document of the RabbitMQ queues (docs/asyncapi.yaml).",
            "content": {"application/yaml": {"schema": {"type": "object"}}},
        }
    },
)
def asyncapi_yaml() -> Response:
    """The AsyncAPI 3.0 contract of the queues kickoff publishes to, as written (YAML)."""
    return Response(contract_text(), media_type="application/yaml")


@router.get(
    "/asyncapi.json",
    dependencies=[requires(Need.PUBLIC)],
    response_class=Response,
    responses={
        200: {
            "description": "The same AsyncAPI document as /asyncapi.yaml, as JSON.",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
def asyncapi_json() -> Response:
    """The same contract as JSON."""
    return Response(contract_json(), media_type="application/json")
