"""The static files, served by whitenoise from ``STATIC_ROOT`` on both of Django's lanes.

whitenoise 6 is sync-only middleware. The web process runs Django's async lane
(uvicorn), where one sync middleware makes Django adapt the whole stack below it:
two thread hops on every request, the pages' and the API's included, and a
"StreamingHttpResponse must consume synchronous iterators" warning for every
file it serves. :class:`StaticFilesMiddleware` keeps whitenoise's file table,
headers (hashed names cached for good, the gzip copy for clients that accept it)
and range handling, and on the async lane looks the path up in that table
(memory only) and opens and reads a file in one thread hop, only for the
static files themselves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import FileResponse, HttpRequest, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


async def _body(body: bytes) -> AsyncIterator[bytes]:
    yield body


class StaticFilesMiddleware(WhiteNoiseMiddleware):  # type: ignore[misc]  # no stubs
    """whitenoise's middleware, able to run on Django's async lane without thread hops."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self._async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        """The static file at the request's path, else the rest of the stack."""
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
        if self.autorefresh:
            # Looks on disk at every request (a development setting): off the loop.
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return await get_response(request)
        return await sync_to_async(self._serve_read, thread_sensitive=False)(static_file, request)

    def _serve_read(self, static_file: Any, request: HttpRequest) -> HttpResponseBase:
        """whitenoise's response with its body read here, handed to the loop as an
        async iterator (the files are the console's and the API docs', at most a few MB)."""
        response: FileResponse = self.serve(static_file, request)
        response.streaming_content = _body(response.getvalue())
        return response
