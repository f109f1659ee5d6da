"""The REST API: chat (call and Server-Sent Events), conversations, chains, documents, OpenAPI.

Mounted by ``advisors_app.urls`` under ``api/``. Every view calls the app's services (the turn
service, ingestion, the vector store) and answers errors in one JSON shape
(:mod:`advisors_app.api.errors`). Endpoints:

======================================  =========================================================
``POST /api/chains/<slug>/call/``       one turn, whole answer
``POST /api/chains/<slug>/stream/``     one turn as Server-Sent Events
``/api/chains/``, ``/api/chains/<slug>/``  list/read (users), create/change/delete (staff)
``/api/conversations/[<id>/]``          the caller's conversations: list, read, rename, delete
``/api/collections/``                   collections the caller may use; create one's own
``/api/documents/[<id>/]``              list, upload (JSON text or files), delete own chunks
``POST /api/documents/search/``         similarity search with a filter expression
``/api/schema/``, ``/api/docs/``        OpenAPI 3 schema, Swagger UI
======================================  =========================================================
"""
