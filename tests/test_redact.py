"""Secret redaction: a corpus of realistic secrets that must go, and near misses that must stay."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ov_agent_ext.redact import REDACTED, names_secret, redact, redact_value

CORPUS = Path(__file__).parent / "fixtures" / "secrets"


@dataclass
class Case:
    name: str
    text: str = ""
    secrets: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)


def load_cases(path: Path) -> list[Case]:
    """Parse a corpus file: "=== name", "secret:"/"keep:" lines, "---", then the text."""
    cases: list[Case] = []
    current: Case | None = None
    body: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("=== "):
            if current is not None and body is not None:
                current.text = "\n".join(body).strip("\n")
            current, body = Case(line[4:].strip()), None
            cases.append(current)
        elif current is None:
            continue  # the file's header comments
        elif body is not None:
            body.append(line)
        elif line == "---":
            body = []
        elif line.startswith("secret: "):
            current.secrets.append(line[len("secret: ") :])
        elif line.startswith("keep: "):
            current.keep.append(line[len("keep: ") :])
        elif line.strip():
            raise ValueError(f"{path.name}: unexpected line in {current.name!r}: {line!r}")
    if current is not None and body is not None:
        current.text = "\n".join(body).strip("\n")
    return cases


SECRETS = load_cases(CORPUS / "secrets.txt")
NEAR_MISSES = load_cases(CORPUS / "near_misses.txt")


def test_the_corpus_is_substantial_and_well_formed() -> None:
    assert len(SECRETS) >= 30
    assert len(NEAR_MISSES) >= 15
    for case in SECRETS:
        assert case.text, case.name
        assert case.secrets, case.name
        for secret in case.secrets:
            assert secret in case.text, (case.name, secret)
        for kept in case.keep:
            assert REDACTED in kept or kept in case.text, (case.name, kept)
    for case in NEAR_MISSES:
        assert case.text, case.name
        assert not case.secrets, case.name


@pytest.mark.parametrize("case", SECRETS, ids=[c.name for c in SECRETS])
def test_every_secret_in_the_corpus_is_redacted(case: Case) -> None:
    out = redact(case.text)
    for secret in case.secrets:
        assert secret not in out, f"{secret!r} survived in {out!r}"
    for kept in case.keep:
        assert kept in out, f"{kept!r} lost in {out!r}"
    assert REDACTED in out


@pytest.mark.parametrize("case", NEAR_MISSES, ids=[c.name for c in NEAR_MISSES])
def test_near_misses_are_left_alone(case: Case) -> None:
    assert redact(case.text) == case.text


@pytest.mark.parametrize("case", SECRETS + NEAR_MISSES, ids=[c.name for c in SECRETS + NEAR_MISSES])
def test_redaction_is_idempotent_on_the_corpus(case: Case) -> None:
    once = redact(case.text)
    assert redact(once) == once


# --- specific behaviours -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OPENAI_API_KEY=sk-abc123def456ghi789jkl012", "OPENAI_API_KEY=[REDACTED]"),
        ("DB_PASSWORD: hunter2", "DB_PASSWORD: [REDACTED]"),
        ("export GITHUB_TOKEN=abc123", "export GITHUB_TOKEN=[REDACTED]"),
        ('{"secret": "s3cr"}', '{"secret": "[REDACTED]"}'),
        ("password=hunter2", "password=[REDACTED]"),
        ("passwd=hunter2", "passwd=[REDACTED]"),
        ("pwd=hunter2", "pwd=[REDACTED]"),
        ("https://bob:pa55@example.com/x", "https://bob:[REDACTED]@example.com/x"),
        ("Authorization: Bearer abc.def.ghi123", "Authorization: Bearer [REDACTED]"),
        ("authorization: token ghx_notaknownprefix1", "authorization: token [REDACTED]"),
    ],
)
def test_key_names_and_context_are_kept(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_private_key_keeps_its_armour_lines() -> None:
    text = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBa\nAoGBAM9x\n-----END EC PRIVATE KEY-----"
    assert redact(text) == (
        "-----BEGIN EC PRIVATE KEY-----\n[REDACTED]\n-----END EC PRIVATE KEY-----"
    )


def test_private_key_in_a_json_string_keeps_the_escapes() -> None:
    text = '"-----BEGIN PRIVATE KEY-----\\nMIIEvQ\\n-----END PRIVATE KEY-----\\n"'
    assert (
        redact(text) == '"-----BEGIN PRIVATE KEY-----\\n[REDACTED]\\n-----END PRIVATE KEY-----\\n"'
    )


def test_pgp_private_key_block() -> None:
    text = (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGR\n=abcd\n"
        "-----END PGP PRIVATE KEY BLOCK-----"
    )
    out = redact(text)
    assert "lQOYBGR" not in out
    assert out.startswith("-----BEGIN PGP PRIVATE KEY BLOCK-----")


def test_openai_shaped_identifiers_without_digits_are_not_keys() -> None:
    assert redact("the sk-learn-compatible-estimator-wrapper") == (
        "the sk-learn-compatible-estimator-wrapper"
    )
    assert redact("key sk-abcdefghij0123456789abcd") == "key [REDACTED]"


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("apiKey", True),
        ("x-api-key", True),
        ("APIKEY", True),
        ("dbPassword", True),
        ("DB_PASS", True),
        ("client_secret", True),
        ("refresh_token", True),
        ("PRIVATE_KEY", True),
        ("aws_secret_access_key", True),
        ("credentials", True),
        ("max_tokens", False),
        ("tokenizer", False),
        ("token_count", False),
        ("TOKEN_URL", False),
        ("password_file", False),
        ("secret_name", False),
        ("private_key_id", False),
        ("sort_key", False),
        ("bypass", False),
        ("pass", False),
        ("pass_rate", False),
        ("pass_result_to_next_func", False),
        ("smtpPass", True),
        ("author", False),
        ("", False),
    ],
)
def test_names_secret(key: str, secret: bool) -> None:
    assert names_secret(key) is secret


def test_bare_key_counts_only_with_a_random_value() -> None:
    assert redact("STRIPE_KEY=a8F3k2L9m4N7p1Q6") == "STRIPE_KEY=[REDACTED]"
    assert redact("SORT_KEY=created_at") == "SORT_KEY=created_at"
    assert redact("cache_key = 'user:42'") == "cache_key = 'user:42'"


def test_dotenv_lines_are_literal_but_code_is_not() -> None:
    # At a line start, KEY=value with no spaces is a .env literal, even if it looks like a name.
    assert redact("DB_PASSWORD=db_password") == "DB_PASSWORD=[REDACTED]"
    # In code, the same shape with spaces names a variable.
    assert redact("db_password = db_password") == "db_password = db_password"


def test_redact_value_walks_nested_structures() -> None:
    value = {
        "command": "export API_TOKEN=abc123xyz && ./run",
        "env": {"DB_PASSWORD": "hunter2", "DEBUG": "1", "HOME": "/home/me"},
        "headers": [{"Authorization": "Bearer abcdefghijklmnop1234"}],
        "args": ("--password", "hunter2"),
        "argv": ["psql", "-h", "db", "--password", "$PGPASS", "--token-file", "/run/t", "-v"],
        "limit": 10,
        "flag": True,
        "none": None,
        "api_key": "${API_KEY}",
    }
    out = redact_value(value)
    assert out == {
        "command": "export API_TOKEN=[REDACTED] && ./run",
        "env": {"DB_PASSWORD": "[REDACTED]", "DEBUG": "1", "HOME": "/home/me"},
        "headers": [{"Authorization": "Bearer [REDACTED]"}],
        "args": ("--password", "[REDACTED]"),
        "argv": ["psql", "-h", "db", "--password", "$PGPASS", "--token-file", "/run/t", "-v"],
        "limit": 10,
        "flag": True,
        "none": None,
        "api_key": "${API_KEY}",
    }
    assert value["env"]["DB_PASSWORD"] == "hunter2"  # type: ignore[index]  # not mutated


def test_redact_value_secret_keyed_strings_are_replaced_whole() -> None:
    assert redact_value({"password": "correct horse battery staple"}) == {"password": REDACTED}
    assert redact_value({"password": ""}) == {"password": ""}
    assert redact_value({"token_path": "/run/secrets/t"}) == {"token_path": "/run/secrets/t"}


def test_empty_and_plain_text() -> None:
    assert redact("") == ""
    assert redact("just words") == "just words"
    assert redact("你好，我的名字是小明") == "你好，我的名字是小明"


def test_redaction_is_fast_on_large_mixed_text() -> None:
    chunk = "\n".join(case.text for case in SECRETS + NEAR_MISSES)
    text = (chunk + "\n") * max(1, 200_000 // len(chunk))
    start = time.perf_counter()
    out = redact(text)
    elapsed = time.perf_counter() - start
    assert "hunter2hunter2" not in out
    assert elapsed < 1.0, f"{len(text)} chars took {elapsed:.3f}s"


def test_no_catastrophic_backtracking_on_adversarial_runs() -> None:
    for text in (
        "a" * 50_000,
        "password" * 5_000,
        "-" * 20_000 + "password",
        "key=" * 10_000,
        "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * 50_000,
        "x" + "_" * 30_000 + "token",
        "https://" + "a" * 20_000 + ":" + "b" * 20_000,
    ):
        start = time.perf_counter()
        redact(text)
        assert time.perf_counter() - start < 0.5, text[:40]


@settings(max_examples=100, deadline=None, database=None)
@given(st.text())
def test_redact_never_raises_and_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


_FRAGMENTS = st.sampled_from(
    [
        "password",
        "=",
        ": ",
        '"',
        "'",
        " ",
        "\n",
        "export ",
        "API_KEY",
        "token",
        "hunter2",
        "sk-",
        "abc123def456ghi789jkl",
        "Bearer ",
        "Authorization: ",
        "https://u:",
        "@host",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "--password ",
        "[REDACTED]",
        "${X}",
        "\\",
    ]
)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(_FRAGMENTS | st.text(max_size=5), max_size=25).map("".join))
def test_redact_is_idempotent_on_secret_like_soup(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
