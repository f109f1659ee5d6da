"""Page-number pagination of the API's lists: ``?page=2&page_size=100``."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination

__all__ = ["ApiPagination"]


class ApiPagination(PageNumberPagination):
    """50 items per page by default, at most 200 (``page_size``); answers ``{"count", "next",
    "previous", "results"}``."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
