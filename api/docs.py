"""GET /docs: Swagger UI on the OpenAPI document, its files served from the swagger-ui-py package.

Nothing is loaded from a CDN: the page, its script and its stylesheet all come from this origin,
and the page's CSP allows no other script than the bundle and the one inline initialiser (by hash).
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _script_hashes(html: str) -> str:
    digests = (hashlib.sha256(body.encode()).digest() for body in _INLINE_SCRIPT.findall(html))
    return " ".join(f"'sha256-{base64.b64encode(d).decode()}'" for d in digests)


def docs_page(app: FastAPI) -> tuple[str, str]:
    """The Swagger UI page of ``app`` and its CSP (this origin only, the initialiser by its hash)."""
    page = get_swagger_ui_html(
        openapi_url=app.openapi_url or "/openapi.json",
        title=f"{app.title} - Swagger UI",
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
        oauth2_redirect_url=None,
    )
    html = bytes(page.body).decode()
    csp = (
        f"default-src 'self'; script-src 'self' {_script_hashes(html)}; "
        # Swagger UI sets style attributes and draws its icons as data: images.
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
    )
    return html, csp


def install_docs(app: FastAPI) -> None:
    """Serve /docs and its files on ``app`` (built with ``docs_url=None``)."""
    html, csp = docs_page(app)

    async def docs(_request: Request) -> HTMLResponse:
        return HTMLResponse(html, headers={"Content-Security-Policy": csp})

    app.add_route(DOCS_PATH, docs, include_in_schema=False)
    assets = files("swagger_ui").joinpath("static")  # Swagger UI 5's files, as the package ships them
    app.mount(ASSETS_PATH, StaticFiles(directory=str(assets)), name="docs-assets")
