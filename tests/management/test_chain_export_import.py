"""``manage.py chain_export`` and ``chain_import``: a chain's snapshot out as JSON and back in.

The round trip is the contract: exporting a chain and importing the file — into the same
database, or after the chain and the template and word list it refers to are gone — gives a
draft with the same ``snapshot_hash``.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from advisors_app.definition import (
    SNAPSHOT_FORMAT,
    canonical_json,
    move_label,
    publish,
    resolve_draft,
    snapshot_hash,
)
from advisors_app.management.commands.chain_import import SNAPSHOT_KEYS, SNAPSHOT_SCHEMA
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    ChainLabelEvent,
    PromptTemplate,
    SensitiveWordList,
)
from tests.factories import make_chain
from tests.helpers import database_url_for_subprocess, subprocess_env

ROOT = Path(__file__).resolve().parents[2]

MEMORY_TEXT = "{instructions}\n\nThe conversation so far:\n{memory}"
SYSTEM_TEXT = "You answer questions about Python, briefly."
WORDS = ["keylogger", "rootkit"]


def configured_chain(slug: str = "configured", **fields: Any) -> AdvisorChain:
    """A published chain whose advisors refer to a template and a word list by slug."""
    PromptTemplate.objects.create(
        slug="memory-text", text=MEMORY_TEXT, placeholders=["instructions", "memory"]
    )
    SensitiveWordList.objects.create(slug="blocked", words=WORDS)
    fields.setdefault("system_prompt", "Answer in one sentence.")
    fields.setdefault("default_options", {"temperature": 0.2, "max_tokens": 64})
    return make_chain(
        slug,
        advisors=(
            ("safe_guard", {"word_lists": ["blocked"], "words": ["exploit"]}),
            ("prompt_chat_memory", {"system_prompt_template": "memory-text", "max_messages": 6}),
        ),
        **fields,
    )


def export(*args: str) -> str:
    out = io.StringIO()
    call_command("chain_export", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def run_import(*args: str, stdin: str | None = None) -> str:
    out = io.StringIO()
    extra = {"stdin": io.StringIO(stdin)} if stdin is not None else {}
    call_command("chain_import", *args, stdout=out, stderr=io.StringIO(), **extra)
    return out.getvalue()


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def draft_hash(slug: str) -> str:
    return snapshot_hash(resolve_draft(AdvisorChain.objects.get(slug=slug)))


# chain_export


@pytest.mark.django_db
def test_exports_the_production_version_as_indented_canonical_json() -> None:
    chain = configured_chain()
    version = chain.versions.get()
    chain.system_prompt = "An unpublished edit."
    chain.save()
    printed = export(chain.slug)
    assert printed == canonical_json(version.snapshot, indent=2) + "\n"
    snapshot = json.loads(printed)
    assert snapshot_hash(snapshot) == version.snapshot_hash
    assert snapshot["system_prompt"] == "Answer in one sentence."
    assert snapshot["references"]["prompt_template:memory-text"] == {"text": MEMORY_TEXT}
    assert snapshot["references"]["word_list:blocked"] == {"words": WORDS}
    assert printed.startswith('{\n  "advisors": [\n')


@pytest.mark.django_db
def test_the_summary_goes_to_stderr_so_stdout_is_only_json() -> None:
    chain = configured_chain()
    out, err = io.StringIO(), io.StringIO()
    call_command("chain_export", chain.slug, stdout=out, stderr=err)
    json.loads(out.getvalue())
    hashed = chain.versions.get().snapshot_hash
    assert err.getvalue() == f"Exported chain 'configured': v1 (production), sha256 {hashed}.\n"
    quiet = io.StringIO()
    call_command("chain_export", chain.slug, "--verbosity", "0", stdout=io.StringIO(), stderr=quiet)
    assert quiet.getvalue() == ""


@pytest.mark.django_db
def test_version_label_and_draft_choose_the_snapshot() -> None:
    chain = configured_chain()
    first = chain.versions.get()
    chain.system_prompt = "Second version."
    chain.save()
    second, _ = publish(chain, message="second")
    move_label(chain, "staging", second)
    chain.system_prompt = "Draft only."
    chain.save()

    def prompt(*args: str) -> str:
        return json.loads(export(chain.slug, *args))["system_prompt"]

    assert prompt() == "Answer in one sentence."  # production still on v1
    assert prompt("--version", "1") == "Answer in one sentence."
    assert prompt("--version", "2") == "Second version."
    assert prompt("--chain-version", "1") == "Answer in one sentence."  # chat's spelling
    assert prompt("--label", "staging") == "Second version."
    assert prompt("--label", PRODUCTION) == "Answer in one sentence."
    assert prompt("--draft") == "Draft only."
    assert snapshot_hash(json.loads(export(chain.slug, "--version", "1"))) == first.snapshot_hash
    with pytest.raises(CommandError, match="not allowed with argument"):
        export(chain.slug, "--draft", "--version", "1")


@pytest.mark.django_db
def test_a_chain_never_published_exports_its_draft() -> None:
    chain = make_chain("unpublished", publish=False, system_prompt="Draft.")
    err = io.StringIO()
    out = io.StringIO()
    call_command("chain_export", chain.slug, stdout=out, stderr=err)
    assert json.loads(out.getvalue()) == resolve_draft(chain)
    assert "the draft (never published)" in err.getvalue()


@pytest.mark.django_db
def test_unknown_chain_version_or_label_is_a_clear_error() -> None:
    chain = configured_chain()
    with pytest.raises(CommandError, match=r"no chain 'nope': check the slug"):
        export("nope")
    with pytest.raises(CommandError, match=r"has no version 7 \(it has only v1\)"):
        export(chain.slug, "--version", "7")
    with pytest.raises(CommandError, match=r"has no label 'canary' \(labels: production \(v1\)\)"):
        export(chain.slug, "--label", "canary")
    bare = make_chain("bare", publish=False)
    with pytest.raises(CommandError, match=r"'bare' has no version 1 \(it has no versions yet\)"):
        export(bare.slug, "--version", "1")


@pytest.mark.django_db
def test_output_writes_a_file(tmp_path: Path) -> None:
    chain = configured_chain()
    target = tmp_path / "configured.json"
    printed = export(chain.slug, "--output", str(target))
    assert target.read_text(encoding="utf-8") == export(chain.slug)
    assert printed.startswith("Exported chain 'configured': v1 (production), sha256 ")
    assert printed.rstrip().endswith(f"Written to {target}.")
    with pytest.raises(CommandError, match=re.escape(f"cannot write {tmp_path}/missing/x.json")):
        export(chain.slug, "--output", str(tmp_path / "missing" / "x.json"))


# Round trip


@pytest.mark.django_db
def test_importing_an_export_into_the_same_database_changes_nothing(tmp_path: Path) -> None:
    chain = configured_chain()
    version = chain.versions.get()
    path = write(tmp_path / "chain.json", export(chain.slug))
    chain.system_prompt = "Edited since."
    chain.advisors.filter(advisor_type="safe_guard").delete()
    chain.save()

    printed = run_import(path, "--publish")
    assert draft_hash(chain.slug) == version.snapshot_hash
    assert printed.splitlines() == [
        "Updated the draft of chain 'configured'.",
        f"Draft sha256 {version.snapshot_hash} (as in the file).",
        f"Nothing new to publish: v1 already holds this draft (sha256 {version.snapshot_hash}).",
    ]
    assert chain.versions.count() == 1


@pytest.mark.django_db
def test_export_then_import_into_an_empty_database_gives_the_same_hash(tmp_path: Path) -> None:
    """The chain, its template and its word list are deleted; import brings them all back."""
    system = PromptTemplate.objects.create(slug="system-text", text=SYSTEM_TEXT)
    chain = configured_chain(tools=["calculator"], system_prompt="", system_template=system)
    expected = chain.versions.get().snapshot_hash
    path = write(tmp_path / "chain.json", export(chain.slug))
    chain.delete()
    PromptTemplate.objects.filter(slug__in=["memory-text", "system-text"]).delete()
    SensitiveWordList.objects.filter(slug="blocked").delete()

    printed = run_import(path, "--label", PRODUCTION, "--message", "from git")

    chain = AdvisorChain.objects.get(slug="configured")
    assert chain.name == "configured"
    assert PromptTemplate.objects.get(slug="memory-text").text == MEMORY_TEXT
    assert chain.system_template.slug == "system-text"
    assert chain.system_template.text == SYSTEM_TEXT
    assert chain.tools == ["calculator"]
    assert SensitiveWordList.objects.get(slug="blocked").words == WORDS
    assert draft_hash(chain.slug) == expected
    version = chain.versions.get()
    assert (version.number, version.snapshot_hash, version.message) == (1, expected, "from git")
    assert chain.labels.get(name=PRODUCTION).version == version
    assert printed.splitlines() == [
        "Created chain 'configured'.",
        f"Draft sha256 {expected} (as in the file).",
        f"Published v1, sha256 {expected}.",
        # Publishing the first version labels it production already.
        "Label 'production' already points at v1.",
    ]
    assert snapshot_hash(json.loads(export(chain.slug))) == expected


@pytest.mark.django_db
def test_import_reads_stdin_and_moves_a_label_with_the_reason(tmp_path: Path) -> None:
    chain = configured_chain()
    chain.system_prompt = "Version two."
    chain.save()
    text = export(chain.slug, "--draft")
    printed = run_import("-", "--label", "staging", stdin=text)
    version = chain.versions.get(number=2)
    assert version.message == "Imported from stdin"
    assert "Label 'staging' now points at v2." in printed
    printed = run_import(write(tmp_path / "v2.json", text), "--label", PRODUCTION)
    assert "Moved label 'production' from v1 to v2." in printed
    event = ChainLabelEvent.objects.filter(label__name=PRODUCTION).first()
    assert (event.from_version.number, event.to_version.number) == (1, 2)
    assert event.reason == "chain_import"
    assert ChainLabelEvent.objects.get(label__name="staging").reason == "chain_import"


@pytest.mark.django_db
def test_rows_that_differ_here_are_kept_and_named(tmp_path: Path) -> None:
    chain = configured_chain()
    expected = chain.versions.get().snapshot_hash
    path = write(tmp_path / "chain.json", export(chain.slug))
    SensitiveWordList.objects.filter(slug="blocked").update(words=["other"])
    printed = run_import(path)
    assert "Note: word list 'blocked' differs from the snapshot's; left as it is." in printed
    now = draft_hash(chain.slug)
    assert now != expected
    assert f"Draft sha256 {now} differs from the file's {expected}" in printed
    assert SensitiveWordList.objects.get(slug="blocked").words == ["other"]


@pytest.mark.django_db
def test_a_refused_publish_lists_the_lint_errors_and_keeps_the_draft(tmp_path: Path) -> None:
    chain = configured_chain()
    snapshot = json.loads(export(chain.slug))
    snapshot["advisors"].append({"type": "no_such_type", "order": 0, "enabled": True, "params": {}})
    path = write(tmp_path / "broken.json", json.dumps(snapshot))
    err = io.StringIO()
    with pytest.raises(CommandError, match="chain 'configured' was not published") as raised:
        call_command("chain_import", path, "--label", "staging", stdout=io.StringIO(), stderr=err)
    assert raised.value.returncode == 1
    assert "advisors_app.E108" in err.getvalue() and "no_such_type" in err.getvalue()
    assert chain.advisors.filter(advisor_type="no_such_type").exists()  # the draft is imported
    assert chain.versions.count() == 1 and not chain.labels.filter(name="staging").exists()


# Refused files


@pytest.fixture
def snapshot(db: None) -> dict[str, Any]:
    return json.loads(export(configured_chain().slug))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"is not JSON \(line 1, column 2: Expecting property name"),
        ("[1, 2]", r"holds a JSON list, not a chain snapshot"),
        ('"text"', r"holds a JSON str, not a chain snapshot"),
        ("{}", r"has no 'format' key; this version reads snapshot format"),
        ('{"format": 1}', r"has format 1; this version reads snapshot format .*chain_export"),
    ],
)
@pytest.mark.django_db
def test_a_file_that_is_not_a_snapshot_is_refused(
    tmp_path: Path, content: str, message: str
) -> None:
    path = write(tmp_path / "wrong.json", content)
    with pytest.raises(CommandError, match=f"^{re.escape(str(tmp_path / 'wrong.json'))} {message}"):
        run_import(path)
    assert not AdvisorChain.objects.exists()


def changed(snapshot: dict[str, Any], edit: Any) -> dict[str, Any]:
    edit(snapshot)
    return snapshot


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.pop("advisors"), r"advisors: This field is required\."),
        (lambda s: s.update(colour="red"), r"colour: Unknown field\. Known fields: advisors, "),
        (lambda s: s.update(slug="not a slug"), r"slug: 'not a slug' does not match"),
        (lambda s: s.update(advisors={}), r"advisors: \{\} is not of type 'array'"),
        (lambda s: s["advisors"][0].pop("params"), r"advisors\.0\.params: This field is required"),
        (
            lambda s: s["references"].update({"word_list:blocked": {"words": "x"}}),
            r"references\.word_list:blocked\.words: 'x' is not of type 'array'",
        ),
        (lambda s: s["advisors"][0].update(order=2**40), r"advisors\.0\.order: 1099511627776 is"),
        (
            lambda s: s["references"].update({"word_list:no spaces": {"words": []}}),
            r"references: 'word_list:no spaces' is not valid under any of the given schemas",
        ),
        (
            lambda s: s["references"].update({"prompt_template:memory-text": {}}),
            r"references\.prompt_template:memory-text\.text: This field is required",
        ),
    ],
)
def test_a_snapshot_of_the_wrong_shape_is_refused_naming_the_field(
    tmp_path: Path, snapshot: dict[str, Any], edit: Any, message: str
) -> None:
    AdvisorChain.objects.all().delete()
    path = write(tmp_path / "bad.json", json.dumps(changed(snapshot, edit)))
    with pytest.raises(
        CommandError, match=rf"bad\.json is not a valid chain snapshot: .*{message}"
    ):
        run_import(path)
    assert not AdvisorChain.objects.exists()


def test_a_system_template_with_no_text_anywhere_is_refused(
    tmp_path: Path, snapshot: dict[str, Any]
) -> None:
    before = draft_hash("configured")
    snapshot["system_template"] = "gone"
    snapshot["references"]["prompt_template:gone"] = None
    path = write(tmp_path / "gone.json", json.dumps(snapshot))
    with pytest.raises(CommandError, match=r"the system template 'gone' has no text"):
        run_import(path)
    assert draft_hash("configured") == before  # nothing written


@pytest.mark.django_db
def test_unreadable_files_and_bad_options_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(
        CommandError, match=re.escape(f"cannot read {tmp_path}/absent.json: No such file")
    ):
        run_import(str(tmp_path / "absent.json"))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"slug": "caf\xe9"}')
    with pytest.raises(CommandError, match=r"latin\.json is not UTF-8 text"):
        run_import(str(latin))
    with pytest.raises(CommandError, match="--label 'Prod!': Use 1 to 50 lower-case letters"):
        run_import(str(latin), "--label", "Prod!")
    with pytest.raises(CommandError, match="--message is 501 characters long; at most 500"):
        run_import(str(latin), "--message", "m" * 501)


def test_the_import_keys_are_the_keys_resolve_draft_writes(snapshot: dict[str, Any]) -> None:
    assert snapshot["format"] == SNAPSHOT_FORMAT
    assert tuple(sorted(snapshot)) == SNAPSHOT_KEYS
    advisor_keys = SNAPSHOT_SCHEMA["properties"]["advisors"]["items"]["required"]
    assert all(sorted(advisor) == sorted(advisor_keys) for advisor in snapshot["advisors"])


# A real process


@pytest.mark.django_db(transaction=True)
def test_manage_py_chain_export_in_a_subprocess(tmp_path: Path) -> None:
    chain = configured_chain()
    expected = chain.versions.get().snapshot_hash
    env = subprocess_env(
        DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=database_url_for_subprocess()
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "chain_export", chain.slug, "--version", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert snapshot_hash(json.loads(done.stdout)) == expected
    assert done.stdout == export(chain.slug)
    assert f"sha256 {expected}" in done.stderr
    missing = subprocess.run(
        [sys.executable, "manage.py", "chain_export", "nope"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 1
    assert "CommandError: no chain 'nope'" in missing.stderr and missing.stdout == ""
