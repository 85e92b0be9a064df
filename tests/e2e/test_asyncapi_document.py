"""GET /asyncapi.json serves the AsyncAPI document of the repository, without credentials,
outside the OpenAPI document."""

from __future__ import annotations

import httpx
import pytest

from adapters.contracts.schemas import ASYNCAPI_FILE, SCHEMAS_DIR
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def test_the_api_serves_the_asyncapi_document_of_the_repository_without_credentials(
    stack: Stack,
) -> None:
    response = httpx.get(f"{stack.api_url}/asyncapi.json", timeout=10)

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.text == (SCHEMAS_DIR / ASYNCAPI_FILE).read_text(encoding="utf-8")
    assert response.json()["asyncapi"] == "3.0.0"


def test_the_asyncapi_document_is_not_an_operation_of_the_openapi_document(stack: Stack) -> None:
    openapi = httpx.get(f"{stack.api_url}/openapi.json", timeout=10).json()

    assert "/asyncapi.json" not in openapi["paths"]
