"""What a classifier reads: hashed n-grams of a text, or its embedding.

Both turn texts into :class:`~.linear.Rows` and describe themselves in a JSON ``config`` saved
with the weights, so a weights file says how its features are made (:func:`features_from_config`).

* :class:`HashedNgramFeatures` — character 3-5-grams and word 1-2-grams of the text folded as
  the sensitive-word matcher folds it (NFKC, case, invisible characters, look-alike letters),
  hashed into a fixed number of columns (the "hashing trick"). Every language and script, no
  vocabulary, no model: about 40 µs for a sentence, vectorised in numpy.
* :class:`EmbeddingFeatures` — the vector an :class:`~advisors_app.core.model.EmbeddingModel`
  gives (the embedded all-MiniLM-L6-v2 by default: 384 floats, English first, ~3 ms a sentence
  on two cores and more for long texts).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .._sync import run_sync
from ..advisors._matching import fold_text
from ..model import EmbeddingModel
from .linear import FloatArray, IndexArray, Rows

__all__ = ["EmbeddingFeatures", "Features", "HashedNgramFeatures", "features_from_config"]

_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"\s+")
_MULTIPLIER = np.uint64(1_000_003)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def _mix(hashes: np.ndarray[Any, np.dtype[np.uint64]]) -> np.ndarray[Any, np.dtype[np.uint64]]:
    # splitmix64's finaliser: spreads nearby hashes over every column.
    hashes = hashes ^ (hashes >> np.uint64(30))
    hashes = hashes * _MIX_1
    hashes = hashes ^ (hashes >> np.uint64(27))
    hashes = hashes * _MIX_2
    return hashes ^ (hashes >> np.uint64(31))


class Features(Protocol):
    """Turns texts into feature rows of :attr:`dimensions` columns."""

    @property
    def dimensions(self) -> int: ...

    def config(self) -> dict[str, Any]: ...

    async def rows(self, texts: Sequence[str]) -> Rows: ...

    def rows_sync(self, texts: Sequence[str]) -> Rows: ...


class HashedNgramFeatures:
    """Hashed character and word n-grams, each row scaled to unit length.

    ``dimensions`` columns (a power of two keeps collisions uniform); ``char_ngrams`` is the
    ``(shortest, longest)`` character n-gram, taken over the folded text padded with a space
    on each side; ``word_ngrams`` the longest run of ``\\w+`` words. Each occurrence of an
    n-gram adds ``scale / sqrt(n)`` (``norm="l2"``) or ``scale / n`` (``norm="l1"``) to its
    column, ``n`` being the text's number of n-grams. With ``"l1"`` a row's score is the mean
    of its n-grams' weights, so a long text does not drift towards a class just by being long
    (with ``"l2"`` it grows like ``sqrt(n)`` times that mean: long benign documents then read
    as attacks). Hashes are deterministic (no per-process salt), so saved weights stay valid.

    ``patterns`` are regular expressions (searched case-insensitively in the folded text), each
    a column of its own worth ``pattern_weight`` when it matches: cues a bag of n-grams cannot
    see, such as a sentence addressed to an AI followed by an order.
    """

    kind = "hashed_ngrams"

    def __init__(
        self,
        dimensions: int = 1 << 18,
        *,
        char_ngrams: tuple[int, int] = (3, 5),
        word_ngrams: int = 2,
        fold: bool = True,
        patterns: Sequence[str] = (),
        pattern_weight: float = 0.5,
        norm: str = "l2",
        scale: float = 1.0,
    ) -> None:
        if dimensions < 2 + len(patterns):
            raise ValueError(f"dimensions must exceed the patterns by 2, got {dimensions}")
        if not 1 <= char_ngrams[0] <= char_ngrams[1]:
            raise ValueError(f"char_ngrams must be (shortest, longest), got {char_ngrams!r}")
        self._dimensions = dimensions
        self.char_ngrams = (int(char_ngrams[0]), int(char_ngrams[1]))
        self.word_ngrams = word_ngrams
        self.fold = fold
        if norm not in ("l1", "l2"):
            raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")
        self.norm = norm
        self.scale = scale
        self.patterns = tuple(patterns)
        self.pattern_weight = pattern_weight
        self._compiled = [re.compile(p, re.IGNORECASE | re.DOTALL) for p in self.patterns]
        # Pattern columns are the last ones, so n-gram hashes never land on them.
        self._hashed = dimensions - len(self.patterns)

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "dimensions": self._dimensions,
            "char_ngrams": list(self.char_ngrams),
            "word_ngrams": self.word_ngrams,
            "fold": self.fold,
            "patterns": list(self.patterns),
            "pattern_weight": self.pattern_weight,
            "norm": self.norm,
            "scale": self.scale,
        }

    def normalized(self, text: str) -> str:
        """``text`` as the n-grams see it: folded (or case-folded) with spaces collapsed."""
        folded = fold_text(text) if self.fold else text.casefold()
        return _SPACES.sub(" ", folded).strip()

    def _ngrams(self, normalized: str) -> tuple[IndexArray, IndexArray, IndexArray]:
        """``(columns, starts, ends)`` of every n-gram of a normalized text: its hashed column
        and the characters it spans (padding counts as one character past each end)."""
        padded = f" {normalized} "
        points = np.frombuffer(padded.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        hashed: list[np.ndarray[Any, np.dtype[np.uint64]]] = []
        starts: list[IndexArray] = []
        ends: list[IndexArray] = []
        shortest, longest = self.char_ngrams
        for n in range(shortest, longest + 1):
            count = len(points) - n + 1
            if count <= 0:
                break
            hashes = np.full(count, np.uint64(n), dtype=np.uint64)
            for k in range(n):
                hashes = hashes * _MULTIPLIER + points[k : k + count]
            hashed.append(hashes)
            first = np.arange(count, dtype=np.int64) - 1
            starts.append(first)
            ends.append(first + n)
        spans = [m.span() for m in _WORD.finditer(normalized)] if self.word_ngrams else []
        if spans:
            # 0x9E37... keeps word hashes apart from character n-gram hashes of the same value.
            words = np.array(
                [zlib.crc32(normalized[a:b].encode()) for a, b in spans], dtype=np.uint64
            ) + np.uint64(0x9E3779B97F4A7C15)
            word_starts = np.array([a for a, _ in spans], dtype=np.int64)
            word_ends = np.array([b for _, b in spans], dtype=np.int64)
            run = words
            for length in range(1, self.word_ngrams + 1):
                if length > 1:
                    run = run[:-1] * _MULTIPLIER + words[length - 1 :]
                if not len(run):
                    break
                hashed.append(run)
                starts.append(word_starts[: len(run)])
                ends.append(word_ends[length - 1 :])
        if not hashed:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty
        columns = (_mix(np.concatenate(hashed)) % np.uint64(self._hashed)).astype(np.int64)
        return columns, np.concatenate(starts), np.concatenate(ends)

    def _row(self, columns: IndexArray, matched: list[int]) -> tuple[IndexArray, FloatArray]:
        """A row of n-gram ``columns`` and the columns of the ``matched`` patterns."""
        count = max(len(columns), 1)
        share = 1.0 / count if self.norm == "l1" else 1.0 / np.sqrt(count)
        values = np.full(len(columns), self.scale * share, dtype=np.float32)
        if matched:
            columns = np.concatenate((columns, np.array(matched, dtype=np.int64)))
            extra = np.full(len(matched), self.pattern_weight, dtype=np.float32)
            values = np.concatenate((values, extra))
        return columns, values

    def vector(self, text: str) -> tuple[IndexArray, FloatArray]:
        """``(columns, values)`` of one text (columns repeat for repeated n-grams)."""
        normalized = self.normalized(text)
        matched = [
            self._hashed + i
            for i, pattern in enumerate(self._compiled)
            if pattern.search(normalized)
        ]
        return self._row(self._ngrams(normalized)[0], matched)

    def windowed_rows(self, texts: Sequence[str], size: int, stride: int) -> Rows:
        """One row per window of ``size`` characters every ``stride`` of each normalized text
        (one row for a text that fits): what :meth:`vector` gives for each window, up to the
        n-grams at a window's edges, with each text folded and hashed once."""
        rows: list[tuple[IndexArray, FloatArray]] = []
        for text in texts:
            normalized = self.normalized(text)
            columns, starts, ends = self._ngrams(normalized)
            # Each pattern scans the whole text once (scanning every window costs ~6x more);
            # a window has the cue when one of its matches lies inside it.
            found = [
                (self._hashed + i, [m.span() for m in pattern.finditer(normalized)])
                for i, pattern in enumerate(self._compiled)
            ]
            found = [(column, spans) for column, spans in found if spans]
            if len(normalized) <= size:
                rows.append(self._row(columns, [column for column, _ in found]))
                continue
            last = len(normalized) - size
            for start in (*range(0, last, stride), last):
                end = start + size
                inside = (starts >= start - 1) & (ends <= end + 1)
                matched = [
                    column
                    for column, spans in found
                    if any(a >= start and b <= end for a, b in spans)
                ]
                rows.append(self._row(columns[inside], matched))
        return Rows.stack(rows, self._dimensions)

    def rows_sync(self, texts: Sequence[str]) -> Rows:
        return Rows.stack([self.vector(t) for t in texts], self._dimensions)

    async def rows(self, texts: Sequence[str]) -> Rows:
        # Pure CPU work of well under a millisecond a text: no thread hop.
        return self.rows_sync(texts)


class EmbeddingFeatures:
    """The vectors of an embedding model (``dimensions`` floats per text).

    ``rows`` awaits the model's ``embed``; ``rows_sync`` uses its ``embed_sync`` when it has one
    (the embedded MiniLM does), else runs ``embed`` to completion.
    """

    kind = "embedding"

    def __init__(self, model: EmbeddingModel, *, model_name: str = "") -> None:
        self.model = model
        self.model_name = model_name or str(getattr(model, "model_name", ""))

    @property
    def dimensions(self) -> int:
        return self.model.dimensions

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "dimensions": self.dimensions, "model": self.model_name}

    async def rows(self, texts: Sequence[str]) -> Rows:
        return Rows.dense(np.array(await self.model.embed(list(texts)), dtype=np.float32))

    def rows_sync(self, texts: Sequence[str]) -> Rows:
        embed_sync = getattr(self.model, "embed_sync", None)
        vectors = embed_sync(list(texts)) if embed_sync else run_sync(self.model.embed(texts))
        return Rows.dense(np.array(vectors, dtype=np.float32).reshape(len(texts), -1))


def features_from_config(
    config: Mapping[str, Any], embedding_model: EmbeddingModel | None = None
) -> Features:
    """The features a weights file's ``config`` describes (``embedding_model`` for
    ``"embedding"`` configs); ``ValueError`` for an unknown kind or a missing model."""
    kind = config.get("kind")
    if kind == HashedNgramFeatures.kind:
        low, high = config["char_ngrams"]
        return HashedNgramFeatures(
            int(config["dimensions"]),
            char_ngrams=(int(low), int(high)),
            word_ngrams=int(config["word_ngrams"]),
            fold=bool(config["fold"]),
            patterns=tuple(config.get("patterns") or ()),
            pattern_weight=float(config.get("pattern_weight", 0.5)),
            norm=str(config.get("norm", "l2")),
            scale=float(config.get("scale", 1.0)),
        )
    if kind == EmbeddingFeatures.kind:
        if embedding_model is None:
            raise ValueError(
                f"these weights read {config.get('model') or 'an embedding model'}'s vectors: "
                "pass embedding_model"
            )
        if embedding_model.dimensions != config.get("dimensions"):
            raise ValueError(
                f"these weights read {config.get('dimensions')}-dimensional vectors; the "
                f"embedding model gives {embedding_model.dimensions}"
            )
        return EmbeddingFeatures(embedding_model, model_name=str(config.get("model") or ""))
    raise ValueError(f"unknown feature kind {kind!r} in a classifier's config")
