"""An OJS answer's headers are Starlette's for its media type, however they are given."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.responses import Response

from redrive.api.http import OJS_MEDIA_TYPE, OjsResponse, located, ojs


class StarlettesHeaders(Response):
    """Starlette's own header building for the same body and media type."""

    media_type = OJS_MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        return OjsResponse.render(self, content)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("content", "status", "headers"),
    [
        ({"job": {"id": "a"}}, 201, {"Location": "/ojs/v1/jobs/a", "X-Other": "é"}),
        ({"ok": True}, 200, None),
        ({}, 200, {}),
        (None, 204, None),
        ({}, 304, {"ETag": "1"}),
        ({}, 101, None),
        ({"b": 2}, 200, {"Content-Type": "text/plain"}),
        ({"b": 2}, 200, {"content-length": "3", "X-A": "b"}),
    ],
)
def test_headers_are_starlettes(content: Any, status: int, headers: dict[str, str] | None) -> None:
    ours = ojs(content, status, headers)
    theirs = StarlettesHeaders(content, status_code=status, headers=headers)
    assert ours.raw_headers == theirs.raw_headers
    assert ours.body == theirs.body


@pytest.mark.parametrize("status", [201, 202])
def test_a_located_answer_is_starlettes_with_its_location(status: int) -> None:
    content = {"job": {"id": "01a2291e-4c6c-7718-ae94-b1c20bf773a4"}}
    location = "/ojs/v1/jobs/01a2291e-4c6c-7718-ae94-b1c20bf773a4"
    ours = located(content, status, location)
    theirs = StarlettesHeaders(content, status_code=status, headers={"Location": location})
    assert ours.status_code == status
    assert ours.raw_headers == theirs.raw_headers
    assert ours.body == theirs.body
