"""The API page: every route of ``weft_django.api.urls``, from the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from .markdown import API_PREFIX, md, page, table


def api_schema() -> dict[str, Any]:
    """The OpenAPI document of ``weft_django.api.urls`` mounted at ``/api/weft/``."""
    from django.urls import include, path
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator(patterns=[path(API_PREFIX, include("weft_django.api.urls"))])
    return dict(generator.get_schema(request=None, public=True))


_METHODS = ("get", "post", "put", "patch", "delete")


def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "allOf" in schema:
        return " & ".join(_schema_type(s) for s in schema["allOf"])
    if "oneOf" in schema or "anyOf" in schema:
        return " or ".join(_schema_type(s) for s in schema.get("oneOf", schema.get("anyOf", [])))
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " / ".join(f"`{v}`" for v in schema["enum"] if v is not None)
    fmt = schema.get("format")
    return f"{kind} ({fmt})" if fmt else str(kind)


def _body_fields(schema: dict[str, Any], components: dict[str, Any]) -> list[tuple[str, ...]]:
    if "$ref" in schema:
        schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
    required = set(schema.get("required", ()))
    return [
        (
            f"`{name}`",
            _schema_type(prop),
            "yes" if name in required else "",
            prop.get("description", ""),
        )
        for name, prop in schema.get("properties", {}).items()
    ]


def render_api() -> str:
    schema = api_schema()
    components = schema.get("components", {}).get("schemas", {})
    operations = [
        (route, method, op)
        for route, item in schema["paths"].items()
        for method, op in item.items()
        if method in _METHODS
    ]
    summary_rows = [
        (
            method.upper(),
            f"[`{route}`](#{op.get('operationId', '')})",
            op.get("summary", ""),
        )
        for route, method, op in operations
    ]
    sections = []
    for route, method, op in operations:
        lines = [
            f'<a id="{op.get("operationId", "")}"></a>\n',
            f"### {method.upper()} `{route}`\n",
            f"**{op.get('summary', '')}** (`{op.get('operationId', '')}`)\n",
        ]
        if op.get("description"):
            lines.append(md(op["description"]) + "\n")
        params = op.get("parameters", [])
        if params:
            lines.append(
                table(
                    ("parameter", "in", "type", "required", "meaning"),
                    [
                        (
                            f"`{p['name']}`",
                            p.get("in", ""),
                            _schema_type(p.get("schema", {})),
                            "yes" if p.get("required") else "",
                            p.get("description", ""),
                        )
                        for p in params
                    ],
                )
            )
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        if body.get("schema"):
            fields = _body_fields(body["schema"], components)
            lines.append(f"Request body (`{_schema_type(body['schema'])}`):\n")
            if fields:
                lines.append(table(("field", "type", "required", "meaning"), fields))
        responses = op.get("responses", {})
        if responses:
            resp_rows = []
            for code, resp in responses.items():
                content = resp.get("content", {}).get("application/json", {})
                body_type = _schema_type(content["schema"]) if content.get("schema") else "—"
                resp_rows.append((code, body_type, resp.get("description", "")))
            lines.append(table(("status", "body", "meaning"), resp_rows))
        sections.append("\n".join(lines))
    return page(
        "REST API reference",
        """
        The API is optional: install the `api` extra
        (`pip install "weft-django[api]"`: Django REST framework,
        drf-spectacular and drf-spectacular-sidecar; without it, including the URLs raises
        `ImproperlyConfigured` naming that command), add `"rest_framework"`
        (and `"drf_spectacular"` to serve the schema) to `INSTALLED_APPS`, and
        mount it:

        ```python
        # urls.py
        path("api/weft/", include("weft_django.api.urls")),
        # optional: the OpenAPI schema and its browsable docs
        # (REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"})
        path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
        path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema")),
        ```

        For `/api/docs/` without internet, serve Swagger UI's files yourself:
        add `"drf_spectacular_sidecar"` to `INSTALLED_APPS` and set
        `SPECTACULAR_SETTINGS["SWAGGER_UI_DIST"] = "SIDECAR"` (and
        `"SWAGGER_UI_FAVICON_HREF"`, `"REDOC_DIST"`), as the example project does.

        Access is staff only by default (`WEFT["API_PERMISSION_CLASSES"]`);
        an async-activity token alone authorises its own completion. Send the
        token in the `Weft-Async-Token` header to `async-activities/complete/`
        (or `fail/`): that is the form to prefer, because a URL path is
        written to every access log it passes (proxy, load balancer, server)
        while headers are not, and the token is a bearer credential until it
        is used. `token` in the JSON body works too (for a sender that cannot
        set headers); `async-activities/<token>/complete/` remains for a
        caller that can only be given a URL. Two different tokens in one call
        are a 400 `async_token_conflict`; none is a 400 `async_token_missing`. A caller
        logged in with Django's session cookie sends the CSRF token in the
        `X-CSRFToken` header on every POST, PATCH and DELETE. A refused login
        is a 403 when the first of `REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`
        sends no challenge (session authentication), a 401 with `WWW-Authenticate`
        when it does (Basic); the schema lists whichever your settings give.
        Every error
        is a JSON body with a stable `code` (see the
        [errors reference](errors.md)); a bad body is a 400 with field errors.
        Lists are paginated (`page`, `page_size`); `count` is exact up to
        10,000 matches and PostgreSQL's estimate above (`count_exact` says which).

        This page is generated from that schema, with the API mounted at
        `/api/weft/`.
        """,
        "## Endpoints\n",
        table(("method", "path", "summary"), summary_rows),
        "## Operations\n",
        *sections,
    )
