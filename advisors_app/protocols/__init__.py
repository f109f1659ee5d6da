"""Other stream protocols spoken over the turn's events: AG-UI and the AI SDK's UI message stream.

A frontend built on a standard chat protocol — AG-UI (CopilotKit, Pydantic AI, Microsoft's Agent
Framework) or the Vercel AI SDK's UI message stream (``useChat``) — talks to a chain without an
adapter of its own. Each module here is two translations and nothing else:

* the protocol's request body → a :class:`~advisors_app.turn.input.TurnInput` (and back: the
  turn's field errors renamed to the fields the client sent);
* the turn's frames (:mod:`advisors_app.turn.events`, ``to_dict()`` as the SSE stream sends
  them) → the protocol's events, one frame at a time, by a small stateful translator.

The turn runs exactly as for ``POST /api/chains/<slug>/stream/`` — the views
(:mod:`advisors_app.api.views.protocols`) are the stream view's machinery with another encoding —
so authentication, ownership, budgets, guards, throttling and approvals are the turn's, never a
second path. ``common`` holds what both translations share.
"""
