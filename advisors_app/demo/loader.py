"""Load the demo: models, the ``python-docs`` collection, a word list, templates and chains.

:func:`load_demo` is idempotent and cheap when everything is there: rows are created only when
missing (an operator's edits in the admin are kept), and the collection is re-embedded only
when its build id — a hash of the corpus, the Python version and the chunking — differs from
the one recorded in the collection's description. ``force=True`` restores every demo row to
its shipped content and rebuilds the collection from scratch.

What it creates (slugs):

* chat model ``smollm2-135m-instruct`` (embedded SmolLM2, the slug of the default alias, so
  chains without a model use it) with a demo price (:data:`DEMO_PRICE`, created once: the
  model is free, the price gives the spend report something to show), and embedding model
  ``minilm`` (embedded all-MiniLM-L6-v2);
* collection ``python-docs``: the Python Language Reference from ``pydoc_data.topics``
  (:mod:`advisors_app.demo.corpus`), chunked by :class:`~advisors_app.demo.chunking.
  TitledTextSplitter`, one source ``pydoc:<topic>`` per topic, metadata ``topic``, ``title``,
  ``corpus`` and ``python``;
* word list ``demo-sensitive-words`` (:data:`SENSITIVE_WORDS`);
* templates ``python-docs-context`` and ``python-docs-no-context``;
* the planted document (:mod:`advisors_app.demo.planted`): a page of the collection with an
  instruction to the assistant hidden in it;
* chain ``python-docs``: SafeGuard → guard rails (retrieved documents that read as instructions
  dropped) → session memory (SessionTurnAdvisor outside the tool loop,
  compacting to the facts the user stated: :data:`SESSION_MEMORY`) → RetrievalAugmentation →
  ToolCalling → SessionMemoryAdvisor → SimpleLogger (the tool loop has no tool enabled: see
  ``_CHAINS``); an existing ``python-docs`` chain is kept as it is (``--force`` replaces it);
* chain ``python-docs-json``: SafeGuard → guard rails → MessageChatMemory → RetrievalAugmentation →
  StructuredOutputValidation, answering ``{"answer": ..., "topics": [...]}``;
* chat model ``notes-scripted`` (the scripted fake with tool rules, :data:`NOTES_MODEL_SETTINGS`)
  and chain ``notes``: MessageChatMemory → ToolCalling with the tools ``save_note`` (needs the
  user's approval) and ``list_notes``, so the approval of tool calls can be tried without a
  model that calls tools.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import transaction

from advisors_app.core.advisor import HIGHEST_PRECEDENCE
from advisors_app.core.vectorstore import Document
from advisors_app.definition import move_label, publish
from advisors_app.ingestion.pipeline import ingest_documents
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    AdvisorConfig,
    ChatModelConfig,
    Collection,
    EmbeddingModelConfig,
    ModelPrice,
    PromptTemplate,
    SensitiveWordList,
)
from advisors_app.models import Document as DocumentRow

from .chunking import CHUNK_OVERLAP, CHUNK_SIZE, TitledTextSplitter
from .corpus import CORPUS, Topic, corpus_fingerprint, python_reference_topics
from .dataset import ensure_demo_dataset
from .planted import planted

__all__ = [
    "ANSWER_SCHEMA",
    "CHAT_MODEL",
    "COLLECTION",
    "EMBEDDING_MODEL",
    "JSON_CHAIN",
    "MAIN_CHAIN",
    "NOTES_CHAIN",
    "NOTES_MODEL",
    "NOTES_MODEL_SETTINGS",
    "SENSITIVE_WORDS",
    "SESSION_MEMORY",
    "WORD_LIST",
    "DemoReport",
    "build_id",
    "ensure_demo_rows",
    "load_demo",
]

CHAT_MODEL = "smollm2-135m-instruct"
EMBEDDING_MODEL = "minilm"
COLLECTION = "python-docs"
WORD_LIST = "demo-sensitive-words"
MAIN_CHAIN = "python-docs"
JSON_CHAIN = "python-docs-json"
NOTES_CHAIN = "notes"
NOTES_MODEL = "notes-scripted"
CONTEXT_TEMPLATE = "python-docs-context"
NO_CONTEXT_TEMPLATE = "python-docs-no-context"

#: Words the demo's guard refuses (substrings, any case, look-alike characters folded): asking
#: for help with malicious software is refused before the model is called.
SENSITIVE_WORDS = ["keylogger", "ransomware", "malware", "botnet", "phishing"]

#: Bumped when the chunk format changes, so an older collection is rebuilt (2: the title is
#: the chunk's context line, no longer part of its text; chunks list their identifiers).
CHUNK_FORMAT = 2

SYSTEM_PROMPT = (
    "You are a helpful assistant who explains the Python programming language. "
    "Answer in two to four short sentences of plain English, based on the Python Language "
    "Reference excerpts you are given."
)
JSON_SYSTEM_PROMPT = (
    "You explain the Python programming language. Reply with a JSON object: "
    '"answer" holds a short answer in plain English based on the reference excerpts, '
    '"topics" lists the titles of the excerpts you used.'
)
# The question comes first and again last: a 135M model answers the question it read last,
# and with the question asked twice it strays less into the other excerpts.
CONTEXT_TEMPLATE_TEXT = """\
Question: {query}

Excerpts from the Python Language Reference:

{context}

Answer the question "{query}" in two sentences, using the excerpts.
"""
NO_CONTEXT_TEMPLATE_TEXT = """\
{query}

(The Python Language Reference has no passage about this. Say so in one sentence.)
"""

#: SmolLM2-135M at its best on the demo's questions: one short paragraph (its first is its
#: best; later ones drift into the other excerpts or loop) and a mild frequency penalty
#: against repeated sentences. Constrained JSON never contains a blank line, so the stop
#: sequence is harmless to the JSON chain.
SMOLLM2_OPTIONS: dict[str, Any] = {
    "temperature": 0.2,
    "max_tokens": 120,
    "frequency_penalty": 0.6,
    "stop": ["\n\n"],
}

#: The JSON Schema of the ``python-docs-json`` chain's answers.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "minLength": 1, "maxLength": 800},
        "topics": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["answer", "topics"],
    "additionalProperties": False,
}

#: Session memory of the main chain, sized for SmolLM2's 4,096-token context: after a turn
#: whose view passes 35 % of the window, a task folds all but the last two turns away; 35 % of
#: the window stays free for the retrieved excerpts (3 chunks of 200 tokens and the template)
#: and tokenizer differences, so a turn whose history would not fit in the rest is compacted
#: inline first. The conversation goes on indefinitely; the log stays complete. What replaces
#: the older turns is the facts the user stated in them, their own sentences (``key_facts``,
#: at most 200 tokens, no model call): SmolLM2-135M's own summaries repeat themselves and
#: invent exchanges, so a name or a code said early was lost. The facts go in front of the
#: user's message (``summary_placement``): the model never answered from them at the end of
#: its system message, and sometimes does there (docs/memory.md, "Which strategy").
SESSION_MEMORY: dict[str, Any] = {
    "trigger": {"kind": "tokens", "share": 0.35},
    "strategy": "key_facts",
    "keep_last_turns": 2,
    "summary_max_tokens": 200,
    "summary_placement": "user",
    "prompt_headroom": 0.35,
}

#: Hybrid search (vector and full text, fused by reciprocal rank) with reranking: the chunk that
#: names an identifier asked about ("What must __aenter__ return?") is found as well as the
#: topic of a question in plain words (docs/retrieval.md, "Measured on the demo").
_RETRIEVAL = {
    "collection": COLLECTION,
    "embedding_model": EMBEDDING_MODEL,
    "search_mode": "hybrid",
    "rerank": {"top_n": 20, "method": "bm25"},
    "top_k": 3,
    "similarity_threshold": 0.25,
    "prompt_template": CONTEXT_TEMPLATE,
    "empty_context_prompt_template": NO_CONTEXT_TEMPLATE,
}
_GUARD = {"word_lists": [WORD_LIST]}  # substrings: "keyloggers" is refused too
#: Guard rails (issue 38): a retrieved excerpt that reads as instructions to the assistant is
#: dropped before the model reads it (the planted document, :mod:`.planted`). Threshold 0.9:
#: no chunk of the Language Reference scores above 0.79 on the classifier (the default 0.6
#: would drop two of them), the planted one 0.999.
_RAILS = {
    "rails": {
        "documents": [{"check": "prompt_injection", "action": "drop", "threshold": 0.9}],
    }
}
#: Outside memory (guard at HIGHEST+100, memory at +200), inside nothing else: retrieval sees
#: the history memory adds and runs once per turn, outside the tool loop (+300).
_RETRIEVAL_ORDER = HIGHEST_PRECEDENCE + 250

#: The ``notes-scripted`` model's settings: SmolLM2-135M cannot call tools reliably, so the
#: notes chain runs on the scripted model's tool rules (stateless: the answer depends only on
#: the prompt, so a paused turn resumes the same after a restart). Rules are tried in order:
#: "Save a note: <text>" saves <text>; "list" or "my notes" lists; any other message that
#: mentions a note is saved whole. After a tool round the model repeats the tool's answer,
#: which after a rejection says the call was not executed.
NOTES_MODEL_SETTINGS: dict[str, Any] = {
    "tool_rules": [
        {
            "when": r"(?s)^\W*(?:please\s+)?(?:save|add|take|write|make|keep)\s+"
            r"(?:a\s+|this\s+|the\s+)?note\b\s*[:,.-]?\s*(?P<text>\S.*)",
            "tool": "save_note",
            "arguments": {"text": "{text}"},
        },
        {"when": r"\blist\b|\bmy notes\b", "tool": "list_notes"},
        {"when": r"\bnote", "tool": "save_note", "arguments": {"text": "{message}"}},
    ],
    "after_tool": "The {tool_name} tool answered: {tool_result}",
    "responses": [
        'I keep notes for you. Say "Save a note: buy milk" (you approve the save before it '
        'happens) or "List my notes".'
    ],
}
NOTES_SYSTEM_PROMPT = (
    "You keep short notes for the user: save one with save_note when they ask you to note "
    "something, and list them with list_notes."
)

_CHAINS: dict[str, dict[str, Any]] = {
    MAIN_CHAIN: {
        "name": "Python docs (retrieval, memory, guard)",
        "chat_model": None,
        "system_template": None,
        "enabled": True,
        "description": "Answers questions about Python from the Python Language Reference "
        "(pydoc_data.topics), remembers the conversation (past its last turns, the facts you "
        "stated, in your words) and refuses the demo's sensitive words.",
        "system_prompt": SYSTEM_PROMPT,
        # Model-specific tuning lives on the model configuration (SMOLLM2_OPTIONS), so a chain
        # moved to another model does not inherit it.
        "default_options": {},
        # The loop is in place but no tool is enabled: SmolLM2-135M cannot tell when a tool
        # helps (it called one for most documentation questions in trials). With a capable
        # model, enable DEMO_TOOLS here or in the admin.
        "tools": [],
        "advisors": [
            ("safe_guard", _GUARD, None),
            ("guard", _RAILS, None),
            ("session_memory", SESSION_MEMORY, None),
            ("retrieval_augmentation", _RETRIEVAL, _RETRIEVAL_ORDER),
            ("tool_calling", {}, None),
            ("simple_logger", {}, None),
        ],
    },
    JSON_CHAIN: {
        "name": "Python docs as JSON (structured output)",
        "chat_model": None,
        "system_template": None,
        "enabled": True,
        "description": 'Answers with a JSON object {"answer": ..., "topics": [...]}, '
        "validated against a JSON Schema (the model decodes under that schema).",
        "system_prompt": JSON_SYSTEM_PROMPT,
        "default_options": {
            # A JSON answer needs more room than SmolLM2's one-paragraph limit.
            "max_tokens": 200,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA},
            },
        },
        "tools": [],
        "advisors": [
            ("safe_guard", _GUARD, None),
            ("guard", _RAILS, None),
            ("message_chat_memory", {"max_messages": 10}, None),
            ("retrieval_augmentation", _RETRIEVAL, _RETRIEVAL_ORDER),
            (
                "structured_output_validation",
                {"output_json_schema": ANSWER_SCHEMA, "max_repeat_attempts": 2},
                None,
            ),
        ],
    },
    NOTES_CHAIN: {
        "name": "Notes (tool calls you approve)",
        # A slug: _ensure_chain puts the row in its place.
        "chat_model": NOTES_MODEL,
        "system_template": None,
        "enabled": True,
        "description": 'Keeps notes for you. Ask e.g. "Save a note: buy milk": the model '
        "asks to call save_note and nothing is saved until you approve the call (or edit or "
        'reject it). "List my notes" shows them. Runs on a scripted model, no API key needed.',
        "system_prompt": NOTES_SYSTEM_PROMPT,
        "default_options": {},
        "tools": ["save_note", "list_notes"],
        "advisors": [
            # Memory (HIGHEST+200) wraps the tool loop (HIGHEST+300): the stored conversation
            # holds the paused tool-call message a resume continues from.
            ("message_chat_memory", {"max_messages": 10}, None),
            ("tool_calling", {}, None),
        ],
    },
}

#: Descriptions earlier releases shipped that no longer hold: a database loaded then keeps
#: them (existing rows are left as they are), so the loader replaces exactly these texts.
_STALE_DESCRIPTIONS: dict[str, tuple[str, ...]] = {
    MAIN_CHAIN: (
        "Answers questions about Python from the Python Language Reference "
        "(pydoc_data.topics), remembers the conversation, refuses the demo's sensitive words "
        "and may call the calculator, clock and Python-version tools.",
    ),
}

#: ``progress(done, total)``: chunks handled so far and in all (embedded or already stored).
Progress = Callable[[int, int], None]


#: An admin price for the embedded model, so that the spend report and budgets have costs to
#: show (docs/costs.md): the model itself is free; delete the row in the admin (Model prices)
#: to make it free again. Per million tokens, in the range of small hosted models.
DEMO_PRICE: dict[str, Any] = {
    "input_per_million": Decimal("0.15"),
    "output_per_million": Decimal("0.60"),
    "currency": "USD",
    "note": "Demo price: the embedded model is free; this row gives the reports costs.",
}


@dataclass
class DemoReport:
    """What :func:`load_demo` did: rows ``created``, ``reset`` (force), and the collection."""

    created: list[str] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)
    topics: int = 0
    chunks: int = 0
    embedded: int = 0
    removed: int = 0
    collection_up_to_date: bool = False


def build_id(topics: list[Topic], with_planted: bool = True) -> str:
    """The collection's build id: 16 hex digits of a hash of the corpus, the planted documents
    (:mod:`~advisors_app.demo.planted`, unless ``with_planted`` is false) and the chunking."""
    recipe = f"{corpus_fingerprint(topics)}:{CHUNK_SIZE}:{CHUNK_OVERLAP}:{CHUNK_FORMAT}"
    if with_planted:
        recipe += ":" + hashlib.sha256(repr(sorted(planted().items())).encode()).hexdigest()
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def _description(topics: list[Topic], build: str) -> str:
    version = ".".join(map(str, sys.version_info[:3]))
    return (
        f"The Python {version} Language Reference as shipped in the standard library "
        f"(pydoc_data.topics): {len(topics)} topics, each passage stored once under its most "
        f"specific topic. Build {build}."
    )


def _ensure(model: Any, slug: str, values: dict[str, Any], force: bool, report: DemoReport) -> Any:
    """The row ``slug`` of ``model``: created with ``values`` when missing, reset when forced."""
    row, created = model.objects.get_or_create(slug=slug, defaults=values)
    if created:
        report.created.append(f"{model._meta.verbose_name} {slug}")
    elif force:
        for name, value in values.items():
            setattr(row, name, value)
        row.save()
        report.reset.append(f"{model._meta.verbose_name} {slug}")
    return row


def _ensure_chain(slug: str, spec: dict[str, Any], force: bool, report: DemoReport) -> None:
    values = {k: v for k, v in spec.items() if k != "advisors"}
    exists = AdvisorChain.objects.filter(slug=slug).exists()
    if exists and not force:
        # The description promised tools the chain has not enabled (issue 24): an operator's
        # own text is kept, only a stale shipped one is brought up to date.
        AdvisorChain.objects.filter(
            slug=slug, description__in=_STALE_DESCRIPTIONS.get(slug, ())
        ).update(description=spec["description"])
        return
    if isinstance(values["chat_model"], str):
        values["chat_model"] = ChatModelConfig.objects.get(slug=values["chat_model"])
    with transaction.atomic():
        chain = _ensure(AdvisorChain, slug, values, force, report)
        chain.full_clean()
        chain.advisors.all().delete()
        for advisor_type, params, order in spec["advisors"]:
            row = AdvisorConfig(chain=chain, advisor_type=advisor_type, params=params, order=order)
            row.full_clean()
            row.save()
        # Users get what the production label points at: publish the rows, and move the label
        # when a forced reload changed them.
        version, created = publish(chain, message="Loaded by the demo loader.")
        if created:
            move_label(chain, PRODUCTION, version, reason="demo loader")


def ensure_demo_rows(force: bool = False, report: DemoReport | None = None) -> Collection:
    """Create the demo's rows that are missing (all of them, with ``force``); the collection."""
    report = report if report is not None else DemoReport()
    chat_model = _ensure(
        ChatModelConfig,
        CHAT_MODEL,
        {
            "name": "SmolLM2-135M-Instruct (embedded)",
            "provider": "embedded",
            "options": SMOLLM2_OPTIONS,
            # Seconds per read: a whole answer, in calls, on two busy cores.
            "timeout": 300.0,
        },
        force,
        report,
    )
    notes_model = _ensure(
        ChatModelConfig,
        NOTES_MODEL,
        {
            "name": "Notes demo (scripted tool calls)",
            "provider": "scripted",
            "settings": NOTES_MODEL_SETTINGS,
        },
        force,
        report,
    )
    notes_model.full_clean()
    if not ModelPrice.objects.filter(chat_model=chat_model).exists():
        ModelPrice.objects.create(chat_model=chat_model, **DEMO_PRICE)
        report.created.append(f"ModelPrice {CHAT_MODEL}")
    _ensure(
        EmbeddingModelConfig,
        EMBEDDING_MODEL,
        {"name": "all-MiniLM-L6-v2 (embedded)", "provider": "embedded", "dimensions": 384},
        force,
        report,
    )
    _ensure(
        SensitiveWordList,
        WORD_LIST,
        {"name": "Demo: malicious software", "words": list(SENSITIVE_WORDS)},
        force,
        report,
    )
    for slug, name, text, placeholders in (
        (CONTEXT_TEMPLATE, "Python docs: context", CONTEXT_TEMPLATE_TEXT, ["context", "query"]),
        (NO_CONTEXT_TEMPLATE, "Python docs: no context", NO_CONTEXT_TEMPLATE_TEXT, ["query"]),
    ):
        template = _ensure(
            PromptTemplate,
            slug,
            {"name": name, "text": text, "placeholders": placeholders},
            force,
            report,
        )
        template.full_clean()
    collection = _ensure(
        Collection,
        COLLECTION,
        {"name": "Python Language Reference", "search_mode": "hybrid"},
        False,
        report,
    )
    for slug, spec in _CHAINS.items():
        _ensure_chain(slug, spec, force, report)
    # The demo's retrieval questions, as an evaluation dataset (unchanged ones stay as they are).
    ensure_demo_dataset()
    return collection


def _ingest(
    collection: Collection,
    topics: list[Topic],
    report: DemoReport,
    progress: Progress | None,
    batch_size: int,
    with_planted: bool,
) -> None:
    splitter = TitledTextSplitter(CHUNK_SIZE, CHUNK_OVERLAP)
    python = ".".join(map(str, sys.version_info[:2]))
    documents = {
        f"pydoc:{topic.name}": Document(
            topic.text,
            {"topic": topic.name, "title": topic.title, "corpus": CORPUS, "python": python},
        )
        for topic in topics
    }
    if with_planted:
        documents.update({s: Document(text, meta) for s, (text, meta) in planted().items()})
    # Identical chunks of one source are stored once (ingest_documents), so count them once.
    total = sum(len({c.text for c in splitter.split([d])}) for d in documents.values())
    done = 0
    for source, document in documents.items():

        def step(embedded: int, _: int, before: int = done) -> None:
            if progress is not None:
                progress(before + embedded, total)

        result = ingest_documents(
            collection,
            source,
            [document],
            splitter=splitter,
            batch_size=batch_size,
            progress=step,
        )
        done += result.chunks
        if progress is not None:
            progress(done, total)
        report.chunks += result.chunks
        report.embedded += result.added
        report.removed += result.removed
    stale = DocumentRow.objects.filter(collection=collection).exclude(source__in=list(documents))
    report.removed += stale.count()
    stale.delete()


def load_demo(
    *,
    force: bool = False,
    progress: Progress | None = None,
    batch_size: int = 32,
    topics: list[Topic] | None = None,
) -> DemoReport:
    """Create what the demo needs (see the module docstring); returns what was done.

    Blocking (ORM and embedding on the calling thread). ``progress`` is called while the
    collection is embedded. ``topics`` replaces the corpus (default: every topic of the
    running Python, :func:`~advisors_app.demo.corpus.python_reference_topics`); the
    collection then holds exactly those. The first full run embeds about 550 chunks (about a
    minute on two idle cores); later runs only compare the build id. The full corpus also gets
    the planted document (:mod:`~advisors_app.demo.planted`) the chains' guard drops.
    """
    report = DemoReport()
    with_planted = topics is None
    topics = python_reference_topics() if topics is None else topics
    report.topics = len(topics)
    collection = ensure_demo_rows(force, report)
    build = build_id(topics, with_planted)
    stored = DocumentRow.objects.filter(collection=collection)
    if not force and f"Build {build}." in collection.description and stored.exists():
        report.collection_up_to_date = True
        report.chunks = stored.count()
        return report
    if force:
        report.removed += stored.count()
        stored.delete()
    _ingest(collection, topics, report, progress, batch_size, with_planted)
    collection.description = _description(topics, build)
    collection.save()
    return report
